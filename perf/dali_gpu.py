"""DALI vs native on the GPU: loader-alone img/s, and ResNet-50 training img/s fed by synthetic, DALI
and native data, with ratios to synthetic (issue 5's goal: DALI-fed training >= 0.97 of synthetic).

  python perf/dali_gpu.py --data /tmp/ddl_jpeg --make-data 4096          # 1 GPU, everything
  python perf/dali_gpu.py --data /tmp/ddl_jpeg --gpus 2 --only train      # 2 GPUs (nvidia-h200-x2)
  python perf/dali_gpu.py --data /tmp/ddl_jpeg --only loaders --json $OUT/dali_loaders.json

--make-data N writes exactly N synthetic 500x375 JPEGs (the seed study's size; make N a multiple of
GPUs x batch, or every epoch ends in a small, slow step) as an ImageFolder in --data and
the same images as TFRecord shards + DALI index files in --data-tfrecord, in parallel processes (it
refuses a non-empty folder; without --make-data both folders must exist). Needs on the machine:
nvidia-dali-cuda130 + its nvimgcodec/nvcomp/nvjpeg wheels, hydra-core, omegaconf (carry them as
tools/dali_slim.sh packs them; the `crc32c` wheel makes writing TFRecords faster, optional).

Loader alone: batches delivered on the GPU, normalised float NCHW (channels_last), timed between two
device synchronisations after warm-up batches; DALI (file and TFRecord readers, hw_decoder_load 0 and
0.65) and native (8 and 16 workers). Training: `ddlbench run` (torchrun, the real loop) with
precision=amp_bf16 model=resnet model.depth=50; throughput_img_s from each run's summary.json.
The last lines start with RESULT and are what goes into docs/.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
# the loaders-alone runs happen in this process: the hardware queues system=h200 gives the training runs
# (docs/dali.md), set before CUDA starts
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "32")

import torch  # noqa: E402

from benchmarks.loaders.base import LoaderContext  # noqa: E402

# --- data -----------------------------------------------------------------------------------------


def _write_jpegs(job: tuple[str, int, int, int, int, int]) -> int:
    from benchmarks.data.synth import class_image

    root, class_id, first, count, num_classes, quality = job
    folder = Path(root) / f"class_{class_id:05d}"
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(first, first + count):
        image = class_image(class_id, index, num_classes=num_classes, width=500, height=375, seed=0)
        image.save(folder / f"{index:07d}.jpg", quality=quality)
    return count


def _write_shard(job: tuple[str, list[tuple[str, int, str]]]) -> int:
    from benchmarks.data.tfrecord import Sample, write_shard

    path, samples = job
    write_shard(Path(path), [Sample(Path(p), label, name) for p, label, name in samples])
    return len(samples)


def make_data(
    jpeg_dir: Path, tfrecord_dir: Path, *, num_images: int, num_classes: int, num_shards: int, quality: int = 90
) -> None:
    """An ImageFolder of `num_images` 500x375 JPEGs and the same images as TFRecord shards (parallel)."""
    import numpy as np

    from benchmarks.data.tfrecord import list_imagefolder, shard_name

    for folder in (jpeg_dir, tfrecord_dir):
        if folder.exists() and any(folder.iterdir()):
            sys.exit(f"dali_gpu: --make-data refuses the non-empty folder {folder}; drop --make-data to reuse it")
    # exactly num_images (the first classes take the remainder): with 4,096 = 16 x 256 every epoch is
    # whole batches on 1 and 2 GPUs. 4,100 (41 per class) added a 4-image last step to each 16-step
    # epoch, which cost ~1 point of the DALI/synthetic ratio on 1 H200 and more on 2.
    sizes = [num_images // num_classes + (c < num_images % num_classes) for c in range(num_classes)]
    jobs = [
        (str(jpeg_dir), c, first, min(64, size - first), num_classes, quality)
        for c, size in enumerate(sizes)
        for first in range(0, size, 64)
    ]
    start = time.perf_counter()
    with multiprocessing.Pool(os.cpu_count()) as pool:
        total = sum(pool.map(_write_jpegs, jobs))
        samples = list_imagefolder(jpeg_dir)
        order = np.random.default_rng(0).permutation(len(samples)).tolist()
        tfrecord_dir.mkdir(parents=True, exist_ok=True)
        bounds = [len(order) * k // num_shards for k in range(num_shards + 1)]
        shard_jobs = [
            (
                str(tfrecord_dir / (shard_name(k, num_shards) + ".tfrecord")),
                [
                    (str(samples[i].path), samples[i].label, samples[i].class_name)
                    for i in order[bounds[k] : bounds[k + 1]]
                ],
            )
            for k in range(num_shards)
        ]
        records = sum(pool.map(_write_shard, shard_jobs))
    print(
        f"data: {total} JPEGs in {jpeg_dir}, {records} records in {num_shards} TFRecord shards in {tfrecord_dir} "
        f"({time.perf_counter() - start:.0f} s)",
        flush=True,
    )


# --- loader alone ---------------------------------------------------------------------------------


def loader_img_s(option, ctx: LoaderContext, *, warmup: int, batches: int) -> float:
    """Batches/s of a loader alone, times the batch, between two synchronisations after warm-up."""
    from benchmarks.loaderbench import loader_img_s as measure

    return measure(option.build(ctx), ctx.device, warmup=warmup, batches=batches)[0]


def run_loaders(args: argparse.Namespace) -> dict[str, float]:
    from benchmarks.loaders.configs import DaliLoaderConfig, NativeLoaderConfig
    from benchmarks.loaders.dali import DaliLoader
    from benchmarks.loaders.native import NativeLoader

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    results = {}
    cases = [
        (
            f"dali-{reader}-hw{load:g}",
            DaliLoader(DaliLoaderConfig(reader=reader, hw_decoder_load=load, num_threads=args.dali_threads or 16)),
            args.data if reader == "file" else args.data_tfrecord,
        )
        for reader in ("file", "tfrecord")
        for load in (0.0, 0.65)
    ]
    cases += [
        (f"native-w{w}", NativeLoader(NativeLoaderConfig(num_workers=w, prefetch_factor=4)), args.data) for w in (8, 16)
    ]
    for name, option, path in cases:
        ctx = LoaderContext(
            rank=0,
            world_size=1,
            device=device,
            per_gpu_batch=args.batch,
            seed=0,
            num_classes=1000,
            image_size=224,
            channels_last=True,
            data_path=str(path),
        )
        img_s = loader_img_s(option, ctx, warmup=args.loader_warmup, batches=args.loader_batches)
        results[name] = img_s
        print(f"loader {name:<22} {img_s:>10,.0f} img/s", flush=True)
    return results


# --- training -------------------------------------------------------------------------------------


def train_summary(loader_overrides: list[str], *, args: argparse.Namespace, root: Path, name: str) -> dict:
    overrides = [
        "framework=ddp",
        "model=resnet",
        "model.depth=50",
        "precision=amp_bf16",
        "system=h200",
        f"system.ranks_per_node={args.gpus}",
        f"run.per_gpu_batch={args.batch}",
        f"run.warmup_steps={args.warmup}",
        f"run.steps={args.steps}",
        "run.log_every=0",
        f"run.root={root}",
        f"run.campaign={name}",
        f"run.telemetry_hz={args.telemetry_hz}",
        *loader_overrides,
    ]
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0"}
    result = subprocess.run(
        [sys.executable, "-m", "ddlbench.cli", "run", *overrides], cwd=REPO, env=env, capture_output=True, text=True
    )
    if result.returncode != 0:
        print(result.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"dali_gpu: training with {loader_overrides} failed (exit {result.returncode})")
    (summary,) = (root / name).glob("*/summary.json")
    print(f"  {name}: {step_diagnosis(summary.parent)}", flush=True)
    return json.loads(summary.read_text())


def step_diagnosis(run_dir: Path) -> str:
    """Per rank, medians (ms) of the measured steps: GPU data wait, forward, step; the host blocked in the
    loader and queueing the step; and how many steps waited over 1 ms for data on the GPU."""
    import statistics

    parts = []
    for log in sorted(run_dir.glob("rank*.jsonl")):
        steps = [r for r in map(json.loads, log.read_text().splitlines()) if "step_s" in r and not r["warmup"]]
        med = {
            k: 1e3 * statistics.median(r[k] for r in steps)
            for k in ("data_s", "fwd_s", "step_s", "host_data_s", "host_step_s")
        }
        waits = sum(r["data_s"] > 1e-3 for r in steps) / len(steps)
        parts.append(
            f"{log.stem} data {med['data_s']:.1f} fwd {med['fwd_s']:.1f} step {med['step_s']:.1f} | host "
            f"data {med['host_data_s']:.1f} step {med['host_step_s']:.1f} | waits {waits:.0%}"
        )
    return "; ".join(parts)


TRAIN_CASES = (
    "synthetic",
    "dali-file",
    "dali-tfrecord",
    "native",
    "dali-file-hw1",
    "dali-file-q8",
    "dali-file-copy",
    "dali-file-bind",
    "dali-file-tuned",
)
DEFAULT_TRAIN_CASES = "synthetic,dali-file,dali-tfrecord,native"


def _merge(base: list[str], extra: list[str]) -> list[str]:
    """Overrides with the later value of a key winning (Hydra refuses a key given twice)."""
    merged = {o.split("=", 1)[0]: o for o in base}
    merged.update({o.split("=", 1)[0]: o for o in extra})
    return list(merged.values())


def train_cases(args: argparse.Namespace) -> dict[str, list[str]]:
    # DALI's threads: loader.num_threads, by default system.cpus_per_rank (16 on system=h200)
    dali = ["loader=dali", *([f"loader.num_threads={args.dali_threads}"] if args.dali_threads else [])]
    file = [*dali, "loader.reader=file", f"data.path={args.data}"]
    every = {
        "synthetic": ["loader=synthetic"],
        "dali-file": file,
        "dali-tfrecord": [*dali, "loader.reader=tfrecord", f"data.path={args.data_tfrecord}"],
        "native": [
            "loader=native",
            f"data.path={args.data}",
            f"loader.num_workers={args.native_workers}",
            "loader.prefetch_factor=4",
        ],
        # every JPEG on the hardware decoder (NVJPG), none on the SMs the training uses
        "dali-file-hw1": [*file, "loader.hw_decoder_load=1.0"],
        # a deeper queue absorbs the moments DALI's GPU stage falls behind (2 H200: data waits of 5-20 ms)
        "dali-file-q8": [*file, "loader.prefetch_queue_depth=8"],
        # the copy out of DALI's buffers (the default until 2026-11-29), which also ties DALI's stream to torch's
        "dali-file-copy": [*file, "loader.zero_copy=false"],
        # each rank (and its DALI threads) on its own half of the cores: local runs are not bound otherwise
        "dali-file-bind": [*file, "system.cpu_bind=cores"],
        # everything that helped a little on 2 H200 (2026-11-29), together: bound ranks, a queue of 8, NCCL
        # on at most 8 SMs (CTAs)
        "dali-file-tuned": [
            *file,
            "system.cpu_bind=cores",
            "loader.prefetch_queue_depth=8",
            "+system.env.NCCL_MAX_CTAS=8",
        ],
    }
    # --case NAME:OVERRIDE,...: the DALI file case (the synthetic one if they say loader=synthetic) with
    # these overrides on top
    every.update(
        {
            name: _merge(every["synthetic"] if "loader=synthetic" in overrides else file, overrides)
            for name, overrides in args.custom_cases.items()
        }
    )
    return {name: every[name] for name in args.train_cases}


def run_training(args: argparse.Namespace) -> dict[str, float]:
    """Each case --rounds times, interleaved (the machine drifts), and its mean img/s."""
    samples: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = args.runs_root or Path(tmp)  # kept with --runs-root (their step logs), else dropped
        for round_index in range(args.rounds):
            for name, overrides in train_cases(args).items():
                summary = train_summary(
                    overrides, args=args, root=root, name=f"{name.replace('-', '_')}_g{args.gpus}_r{round_index}"
                )
                samples.setdefault(name, []).append(summary["throughput_img_s"])
                print(
                    f"train resnet50 amp_bf16 {args.gpus} GPU(s) b{args.batch} round {round_index} {name:<14} "
                    f"{summary['throughput_img_s']:>9,.0f} img/s  last loss {summary['last_loss']:.3f}",
                    flush=True,
                )
    return {name: sum(values) / len(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="ImageFolder of JPEGs")
    parser.add_argument("--data-tfrecord", type=Path, default=None, help="TFRecord folder (default: <data>_tfrecord)")
    parser.add_argument(
        "--make-data", type=int, default=0, metavar="N", help="first write N synthetic JPEGs + TFRecords"
    )
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--quality", type=int, default=90, help="JPEG quality of --make-data (94: ~97 KB per image)")
    parser.add_argument(
        "--only", choices=("all", "loaders", "train", "data"), default="all", help="data: only --make-data"
    )
    parser.add_argument("--gpus", type=int, default=1, help="GPUs for the training runs (loaders use one)")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument(
        "--dali-threads",
        type=int,
        default=None,
        help="DALI threads per rank (default: the config's, system.cpus_per_rank; 16 for the loaders alone)",
    )
    parser.add_argument("--native-workers", type=int, default=16)
    parser.add_argument("--loader-warmup", type=int, default=10)
    parser.add_argument("--loader-batches", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument(
        "--train-cases",
        default=DEFAULT_TRAIN_CASES,
        help=f"comma-separated training cases, 'synthetic' first (of {', '.join(TRAIN_CASES)})",
    )
    parser.add_argument(
        "--case",
        action="append",
        default=[],
        metavar="NAME:OVERRIDE[,OVERRIDE...]",
        help="a further training case: the dali-file case (synthetic if they include loader=synthetic) "
        "with these overrides on top, e.g. 't8:loader.num_threads=8' (repeatable; name it "
        "in --train-cases)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="interleaved repeats of the training cases (mean)")
    parser.add_argument(
        "--telemetry-hz",
        type=float,
        default=0,
        help="training runs sample GPU clock/power/utilisation and process CPU this often (0: off)",
    )
    parser.add_argument(
        "--runs-root",
        type=Path,
        default=None,
        help="keep the training runs' directories here (default: a temporary folder)",
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    args.train_cases = args.train_cases.split(",")
    args.custom_cases = {}
    for case in args.case:
        name, _, overrides = case.partition(":")
        if not name or not overrides or name in TRAIN_CASES:
            parser.error(
                f"--case={case}: write NAME:OVERRIDE[,OVERRIDE...] with a new NAME (not {', '.join(TRAIN_CASES)})"
            )
        args.custom_cases[name] = overrides.split(",")
    unknown = sorted(set(args.train_cases) - set(TRAIN_CASES) - set(args.custom_cases))
    if unknown or args.train_cases[0] != "synthetic":
        parser.error(
            f"--train-cases={','.join(args.train_cases)}: start with synthetic and choose from "
            f"{', '.join([*TRAIN_CASES, *args.custom_cases])}"
        )
    args.data = args.data.resolve()  # the training runs start in the repository root
    args.data_tfrecord = (args.data_tfrecord or args.data.with_name(args.data.name + "_tfrecord")).resolve()
    if not torch.cuda.is_available():
        sys.exit("dali_gpu: no CUDA GPU here; this benchmark is for the GPU machine (tests cover the CPU path)")
    if args.make_data:
        make_data(
            args.data,
            args.data_tfrecord,
            num_images=args.make_data,
            num_classes=args.classes,
            num_shards=args.shards,
            quality=args.quality,
        )
    figures: dict[str, dict[str, float]] = {}
    if args.only in ("all", "loaders"):
        figures["loader_img_s"] = run_loaders(args)
    if args.only in ("all", "train"):
        figures["train_img_s"] = run_training(args)
    for kind, values in figures.items():
        for name, img_s in values.items():
            extra = ""
            if kind == "train_img_s":
                extra = f" ratio_to_synthetic={img_s / values['synthetic']:.3f}"
            print(
                f"RESULT {kind} gpus={args.gpus if kind == 'train_img_s' else 1} batch={args.batch} {name}={img_s:.0f}{extra}"
            )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "args": {k: str(v) for k, v in vars(args).items()},
                    **figures,
                    "torch": torch.__version__,
                    "gpu": torch.cuda.get_device_name(0),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
