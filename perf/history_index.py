"""`ddlbench history`'s indexing speed: N synthetic runs (default 10,000: 100 campaigns of 25 cells x 4 sizes
on 1 to 8 GPUs, 40 steps per rank log; analysis.synthetic_logs's run directories copied with new campaigns,
repeats and start times) indexed into a new store, then indexed again (every run known). Prints one RESULT
line; the goal (docs/history.md) is under 10 s for 10,000 runs on the 2-core CI machine.

    python perf/history_index.py [--runs 10000] [--jobs N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from analysis.history.index import index_roots  # noqa: E402
from analysis.synthetic_logs.campaign import write_campaign  # noqa: E402
from analysis.synthetic_logs.cells import SynthCell  # noqa: E402


def templates(where: Path) -> list[Path]:
    """One completed run per cell: 4 sizes (1, 2, 4, 8 GPUs), from analysis.synthetic_logs."""
    cells = [SynthCell("ddp", "dali", "resnet50", n, 1 if n < 8 else 2) for n in (1, 2, 4, 8)]
    write_campaign(where, cells, steps=40, warmup_steps=5, campaign="t", commbench=False)
    return sorted(p for p in (where / "t").iterdir() if (p / "summary.json").is_file())


def write_runs(out: Path, n: int, sources: list[Path]) -> None:
    """n run directories below out/c<NNN>/, each a template's files with its campaign, repeat and start time."""
    import yaml

    from benchmarks.rundir.cell_identity import cell_hash

    files = [{f.name: f.read_bytes() for f in s.iterdir() if f.is_file()} for s in sources]
    hashes = []  # synthetic_logs' meta.json predates cell_hash; runs of today's ddlbench carry it
    for run in files:
        meta = json.loads(run["meta.json"])
        config = yaml.safe_load(run["config.yaml"])
        hashes.append(cell_hash(config, world_size=meta["world_size"], num_nodes=meta["num_nodes"]))
    for i in range(n):
        k = i % len(sources)
        campaign, repeat = f"c{i // 100:03d}", (i % 100) // len(sources)
        run = out / campaign / f"{sources[k].name.rsplit('-r', 1)[0]}-r{repeat}"
        run.mkdir(parents=True)
        for name, data in files[k].items():
            if name == "meta.json":
                meta = json.loads(data)
                meta["cell_hash"] = hashes[k]
                meta["started"] = time.strftime("%Y-%m-%dT%H:%M:%S+0000", time.gmtime(1.767e9 + 600 * i))
                data = json.dumps(meta).encode()
            (run / name).write_bytes(data)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: one per CPU)")
    parser.add_argument("--keep", type=Path, help="write the runs here (kept) instead of a temporary folder")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="history-perf-"))
    try:
        root = args.keep or work / "runs"
        t = time.perf_counter()
        write_runs(root, args.runs, templates(work / "templates"))
        print(f"wrote {args.runs:,} runs in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        cpu = time.process_time()
        first = index_roots([root], work / "history.sqlite", jobs=args.jobs)
        again = index_roots([root], work / "history.sqlite", jobs=args.jobs)
        print(
            f"RESULT runs={args.runs} new={first.num_added} index_s={first.seconds:.2f} "
            f"again_s={again.seconds:.2f} (known={again.num_known}) cpus={os.cpu_count()} "
            f"load_1min={os.getloadavg()[0]:.1f} parent_cpu_s={time.process_time() - cpu:.1f}"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
