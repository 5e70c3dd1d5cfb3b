"""Writes the golden Stash study in tests/data/stash/study (hand-chosen step times; run once, committed).

Per role and repeat, the slowest rank's measured step times (2 measured steps after 1 warm-up, batch 4):
  gpu1  (synthetic, 1 GPU)          r0 0.5+0.5 = 1.0   r1 0.5+0.7 = 1.2   median 1.1
  node  (synthetic, 2 GPUs, 1 node) r0 0.7+0.7 = 1.4   r1 0.8+0.8 = 1.6   median 1.5
  nodes (synthetic, 2 GPUs, 2 nodes)r0 1.5+1.5 = 3.0   r1 1.5+1.5 = 3.0   median 3.0
  warm  (native, 2 GPUs, warm)      r0 1.0+1.0 = 2.0   r1 1.0+1.0 = 2.0   median 2.0
  cold  (native, 2 GPUs, cold)      r0 2.0+2.0 = 4.0   r1 2.0+2.0 = 4.0   median 4.0
so interconnect = 0.4 s (36.36 %), network = 1.5 s (100 %), cpu = 0.5 s (33.33 %), disk = 2.0 s (100 %).
    python tests/data/stash/make_golden.py
"""

import json
import shutil
from pathlib import Path

OUT = Path(__file__).resolve().parent / "study"
# role: loader, cache, world, nodes, {repeat: [per-rank step times of the 2 measured steps]}
ROLES = {
    "gpu1": ("synthetic", "warm", 1, 1, {0: [[0.5, 0.5]], 1: [[0.5, 0.7]]}),
    "node": ("synthetic", "warm", 2, 1, {0: [[0.6, 0.6], [0.7, 0.7]], 1: [[0.6, 0.6], [0.8, 0.8]]}),
    "nodes": ("synthetic", "warm", 2, 2, {0: [[1.5, 1.5], [1.4, 1.4]], 1: [[1.5, 1.5], [1.5, 1.2]]}),
    "warm": ("native", "warm", 2, 1, {0: [[1.0, 1.0], [0.9, 0.9]], 1: [[1.0, 1.0], [1.0, 1.0]]}),
    "cold": ("native", "cold", 2, 1, {0: [[2.0, 2.0], [1.9, 1.9]], 1: [[2.0, 2.0], [2.0, 2.0]]}),
}
BATCH = 4


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    for loader, cache, world, nodes, repeats in ROLES.values():
        for repeat, ranks in repeats.items():
            name = f"ddp-{loader}-simple_cnn-g{world}-n{nodes}-b{BATCH}-r{repeat}"
            run = OUT / ("cold-cache" if cache == "cold" else "") / name
            run.mkdir(parents=True)
            wall = sum(max(r[i] for r in ranks) for i in range(2))
            (run / "config.yaml").write_text(
                f"framework:\n  name: ddp\n  bucket_cap_mb: 25.0\nloader:\n  name: {loader}\nmodel:\n  arch: simple_cnn\n"
                f"  depth: null\n  num_classes: 10\nprecision:\n  name: fp32\nsystem:\n  name: local_cpu\n"
                f"data:\n  path: {'null' if loader == 'synthetic' else '/data/synth'}\n  cache: {cache}\n"
                f"run:\n  campaign: study\n  repeat: {repeat}\n  per_gpu_batch: {BATCH}\n  steps: 2\n"
            )
            meta = {
                "schema_version": 1,
                "started": "2026-11-29T10:00:00+0000",
                "launcher": "torchrun",
                "world_size": world,
                "num_nodes": nodes,
                "git_sha": "abc123",
                "git_dirty": False,
                "versions": {"torch": "2.14.1"},
                "hardware": {"host": "vm", "gpus": [], "cpu_count": 2},
                "env": {},
            }
            if cache == "cold":
                meta["cache_evict"] = {
                    "method": "fadvise",
                    "num_files": 160,
                    "dataset_bytes": 1300153,
                    "resident_before_bytes": 1429504,
                    "resident_after_bytes": 0,
                }
            (run / "meta.json").write_text(json.dumps(meta))
            (run / "summary.json").write_text(
                json.dumps(
                    {
                        "schema_version": 1,
                        "status": "completed",
                        "framework": "ddp",
                        "loader": loader,
                        "model": "simple_cnn",
                        "precision": "fp32",
                        "world_size": world,
                        "num_nodes": nodes,
                        "per_gpu_batch": BATCH,
                        "global_batch": BATCH * world,
                        "warmup_steps": 1,
                        "measured_steps": 2,
                        "measured_samples": 2 * BATCH * world,
                        "wall_s": wall,
                        "throughput_img_s": 2 * BATCH * world / wall,
                        "per_gpu_img_s": 2 * BATCH / wall,
                        "campaign": "study",
                        "repeat": repeat,
                    }
                )
            )
            for rank, times in enumerate(ranks):
                lines = [
                    {
                        "kind": "header",
                        "schema_version": 1,
                        "rank": rank,
                        "local_rank": rank % (world // nodes),
                        "host": "vm",
                        "device": "cpu",
                        "pid": 3,
                        "steps_per_epoch": 100,
                    }
                ]
                for step, (warm, t) in enumerate([(True, 0.9), *((False, t) for t in times)]):
                    lines.append(
                        {
                            "step": step,
                            "epoch": 0,
                            "step_in_epoch": step,
                            "samples": BATCH,
                            "warmup": warm,
                            "comm_s": None,
                            "comm_exposed_s": None,
                            "data_s": 0.1,
                            "fwd_s": 0.1,
                            "bwd_s": 0.1,
                            "opt_s": 0.1,
                            "step_s": t,
                        }
                    )
                (run / f"rank{rank}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


if __name__ == "__main__":
    main()
