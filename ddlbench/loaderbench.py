"""`ddlbench loaderbench`: the loaders alone, at 1 .. the rank's CPUs of workers, and the decode ceilings (the
measurement: benchmarks/loaderbench.py)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from benchmarks.errors import ConfigError


def cmd_loaderbench(args: argparse.Namespace) -> int:
    """Loaders alone on this machine's device (benchmarks/loaderbench.py), a table, and with --out the
    figures' JSON and PNG."""
    import json

    from benchmarks import loaderbench
    from benchmarks.config import compose

    out = Path(args.out) if args.out else None
    if out is not None and out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out} is not empty (results are never overwritten); pass a new folder")
    base = compose(args.overrides)
    if not base.data.path:
        raise ConfigError(
            "loaderbench reads data: pass data.path=DIR (an ImageFolder of JPEGs; "
            "'ddlbench data synth --out DIR' makes one)"
        )
    from benchmarks.validate import check_data

    check_data(compose([*args.overrides, "loader=native"]), world_size=1)  # there, readable, a batch's worth
    cases = [c.strip() for c in args.loaders.split(",") if c.strip()]
    for case in cases:
        loaderbench.loader_overrides(case, 1, tfrecord_path=args.tfrecord)  # an unknown case: one line, now
    try:
        workers = (
            [int(w) for w in args.workers.split(",")]
            if args.workers
            else loaderbench.worker_counts(int(base.system.cpus_per_rank))
        )
    except ValueError:
        raise ConfigError(f"--workers {args.workers!r} must be comma-separated counts, e.g. --workers 1,4,15") from None
    if min(workers) < 1:
        raise ConfigError(f"--workers {args.workers}: every count must be >= 1")
    os.environ.update({k: str(v) for k, v in base.system.env.items()})  # before CUDA starts (DALI's queues)
    print(
        f"[ddlbench] loaderbench: {', '.join(cases)} at {', '.join(map(str, workers))} workers/threads, "
        f"{args.batches} batches of {base.run.per_gpu_batch} after {args.warmup}, on {base.system.device}",
        file=sys.stderr,
        flush=True,
    )
    measurements = loaderbench.measure(
        lambda extra: compose([*args.overrides, *extra]),
        base,
        cases=cases,
        workers=workers,
        warmup=args.warmup,
        batches=args.batches,
        tfrecord_path=args.tfrecord,
        progress=loaderbench.print_progress,
    )
    print(loaderbench.format_table(measurements, cpus_per_rank=int(base.system.cpus_per_rank)))
    if out is not None:
        import pandas as pd

        from analysis.loaderbench import loaderbench_curves

        out.mkdir(parents=True, exist_ok=True)
        records = [m.record() for m in measurements]
        (out / "loaderbench.json").write_text(
            json.dumps(
                {
                    "overrides": args.overrides,
                    # what `ddlbench predict --loader-capacity` checks against the configuration it predicts
                    "per_gpu_batch": int(base.run.per_gpu_batch),
                    "image_size": int(base.model.image_size),
                    "system": str(base.system.name),
                    "measurements": records,
                },
                indent=1,
            )
        )
        figure = loaderbench_curves(pd.DataFrame(records))
        figure.savefig(out / "loaderbench.png")
        print(f"\n[ddlbench] wrote loaderbench.json and loaderbench.png to {out}")
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench loaderbench`."""
    p = sub.add_parser(
        "loaderbench",
        help="loaders alone: img/s per loader at 1 .. the rank's CPUs of workers, and decode ceilings",
        description="Each case is the loader exactly as a run builds it (the composed config with loader=NAME and "
        "its workers/threads set), timed on this machine's device (system.device) between two "
        "synchronisations after warm-up batches; no model runs. Then the ceilings: one CPU worker's "
        "decode + crop rate and the device's batched decode_jpeg.",
        epilog="example:\n  ddlbench loaderbench system=h200 data.path=data/jpeg run.per_gpu_batch=256 --out loaderbench/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "overrides", nargs="*", help="Hydra overrides (system, data.path, run.per_gpu_batch, model.image_size)"
    )
    p.add_argument(
        "--loaders",
        default="native,native_gpu,dali",
        help="comma-separated cases: native, native_gpu, dali, dali-tfrecord (default native,native_gpu,dali)",
    )
    p.add_argument(
        "--workers",
        default=None,
        help="comma-separated worker/thread counts (default 1, 2, 4, ... up to the rank's CPUs less one)",
    )
    p.add_argument("--warmup", type=int, default=5, help="batches before the timing starts (default 5)")
    p.add_argument("--batches", type=int, default=30, help="timed batches per case (default 30)")
    p.add_argument("--tfrecord", default=None, metavar="DIR", help="TFRecord folder for the dali-tfrecord case")
    p.add_argument(
        "--out", default=None, metavar="DIR", help="write loaderbench.json and loaderbench.png here (a new folder)"
    )
    p.set_defaults(func=cmd_loaderbench)
