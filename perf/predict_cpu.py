"""The predictor's CPU validation study: training runs over emulated links, to be predicted from others.

Every "host" is a network namespace (launchers/netns.py, as Stash uses them) and its link is shaped by
tc to a rate. For each host count N and each rate, this runs commbench (all_reduce, the network's
calibration) and one DDP training run across the N hosts (one rank each): the held-out points. An
unshaped run per host count is the compute calibration: the emulated hosts share this machine's cores,
so a rank computes at the speed its host count leaves it, which only a run of the same count shows; each
calibration runs just before the pair it calibrates (same folder name), since the machine's load drifts.

    python perf/predict_cpu.py --out runs/predict_cpu               # hosts 2 and 4, 3 rates (~6 min)
    python perf/predict_cpu.py --out runs/predict_fsdp --mode framework=fsdp   # a sharded mode, alike
    python perf/predict_cpu.py --out runs/predict_native --loader "loader=native loader.num_workers=1"  # loader-bound
    ddlbench predict <the overrides it prints> --from runs/predict_cpu/calibration \\
        --validate runs/predict_cpu/links --gpus 2,4

--mode takes the overrides of a framework mode (default DDP in 0.25 MB buckets): calibration and held-out runs are
of that mode, and commbench measures the collectives every mode sends (all_reduce, all_gather,
reduce_scatter). --loader takes a loader's overrides (default the synthetic loader): a real one reads 640
JPEGs of --jpeg's size (500x375 by default, study A's) that this script writes to OUT/data first. With one
worker per rank and large JPEGs (--jpeg 1000x750) the ranks wait for it, and the calibration runs, fed by
it too, give the predictor the pace its batches arrived at. Layout: OUT/calibration/<rate>mbit/h<N>, OUT/links/<rate>mbit/commbench-h<N>.json,
OUT/links/<rate>mbit/h<N>.
Needs root (network namespaces) and tc; nothing that exists is overwritten.
"""

from __future__ import annotations

import argparse
import shlex
import socket
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from launchers import netns  # noqa: E402
from launchers.programs.base import RankProgram  # noqa: E402

TRAIN = (
    "model=shufflenet_v2",
    "model.width=0.5",
    "model.num_classes=10",
    "model.image_size=32",
    "run.per_gpu_batch=16",
    "run.log_every=0",
    "system.ranks_per_node=1",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def say(text: str) -> None:
    print(f"[predict_cpu] {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def run_on_hosts(hosts: int, link: netns.Link, *, program: RankProgram | None = None, overrides=()) -> None:
    env = {"OMP_NUM_THREADS": "1"}
    with netns.Emulation(num_nodes=hosts, link=link) as topo:
        code = netns.run_ranks(
            topo,
            world_size=hosts,
            ranks_per_node=1,
            overrides=overrides,
            program=program,
            master_port=free_port(),
            env=env,
            timeout_s=900,
        )
    if code:
        raise SystemExit(f"predict_cpu: {hosts} hosts at {link.describe()} failed (exit {code})")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="new folder")
    p.add_argument("--hosts", default="2,4", help="host counts, one rank each (default 2,4)")
    p.add_argument("--rates-mbit", default="100,300,1000", help="link rates (default 100,300,1000)")
    p.add_argument("--steps", type=int, default=80, help="measured steps per training run")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--max-bytes", type=int, default=4 * 1024 * 1024, help="commbench's largest size")
    p.add_argument(
        "--mode",
        default="framework=ddp framework.bucket_cap_mb=0.25",
        help="the framework mode's overrides, space-separated (default 'framework=ddp framework.bucket_cap_mb=0.25': "
        "4 messages of 1.4 MB; e.g. 'framework=fsdp', 'framework=deepspeed framework.zero_stage=3')",
    )
    p.add_argument(
        "--loader",
        default="loader=synthetic",
        help="the loader's overrides, space-separated (default 'loader=synthetic'; e.g. 'loader=native "
        "loader.num_workers=1': JPEGs decoded by one worker per rank)",
    )
    p.add_argument(
        "--jpeg",
        default="500x375",
        help="WIDTHxHEIGHT of the JPEGs a real loader reads (default 500x375, study A's size)",
    )
    args = p.parse_args()
    out = Path(args.out).resolve()
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"predict_cpu: --out {out} is not empty (never overwritten); give a new folder")
    hosts = [int(v) for v in args.hosts.split(",")]
    rates = [float(v) for v in args.rates_mbit.split(",")]
    loader = args.loader.split()
    if "loader=synthetic" not in loader:  # a real loader reads JPEGs: written once, before the first run
        from benchmarks.data.synth import synth_imagefolder

        data = out / "data"
        try:
            width, height = (int(v) for v in args.jpeg.split("x"))
        except ValueError:
            raise SystemExit(f"predict_cpu: --jpeg {args.jpeg!r} is not WIDTHxHEIGHT; e.g. --jpeg 1000x750") from None
        synth_imagefolder(
            data, num_classes=10, images_per_class=64, width=width, height=height, quality=90, seed=0, progress=False
        )
        loader.append(f"data.path={data}")
    train = [*args.mode.split(), *loader, *TRAIN, f"run.steps={args.steps}", f"run.warmup_steps={args.warmup}"]
    for rate in rates:
        folder = out / "links" / f"{rate:g}mbit"
        for n in hosts:
            # the calibration just before the runs it calibrates: a shared machine's load drifts over minutes
            say(f"calibration: {n} hosts, unshaped link")
            calibration = out / "calibration" / f"{rate:g}mbit" / f"h{n}"
            run_on_hosts(n, netns.Link(), overrides=[*train, f"run.dir={calibration}"])
            link = netns.Link(rate_mbit=rate)
            say(f"commbench: {n} hosts at {link.describe()}")
            bench = RankProgram(
                module="benchmarks.commbench",
                args=(
                    "--out",
                    str(folder / f"commbench-h{n}.json"),
                    "--ops",
                    "all_reduce,all_gather,reduce_scatter",
                    "--placement",
                    "out",
                    "--min-bytes",
                    "1024",
                    "--max-bytes",
                    str(args.max_bytes),
                    "--warmup",
                    "1",
                    "--iters",
                    "3",
                    "--device",
                    "cpu",
                ),
                python=sys.executable,
            )
            folder.mkdir(parents=True, exist_ok=True)
            run_on_hosts(n, link, program=bench)
            say(f"training: {n} hosts at {link.describe()}")
            run_on_hosts(n, link, overrides=[*train, f"run.dir={folder / f'h{n}'}"])
    say("done; predict them with:")
    print(
        "ddlbench predict "
        + shlex.join([o for o in train if not o.startswith(("run.steps", "run.warmup", "run.log"))])
        + f" --from {out / 'calibration'} --validate {out / 'links'} --gpus {args.hosts}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
