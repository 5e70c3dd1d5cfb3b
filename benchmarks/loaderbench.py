"""Loaders alone (`ddlbench loaderbench`): img/s each loader delivers on the rank's device, ready for
training (normalised float NCHW), at 1 .. the rank's CPUs of workers or threads, and the decode
ceilings they can reach; no model runs. Where each loader saturates, and where its CPU work does.

Every case is the loader option exactly as a run builds it (the composed config with loader=NAME and its
worker key set; native_gpu-nvimgcodec is native_gpu with loader.gpu_decoder=nvimgcodec), timed between
two device synchronisations after warm-up batches. Ceilings: `cpu_decode` is what one CPU worker does per
second (open, decode, random resized crop, flip: the native loader's per-image work; workers x this is the
most N workers can give); `device_decode` is batched decode_jpeg plus the crop/flip/normalise on the run's
device (loader=native_gpu's device work without file reading). On a GPU, beside it: `device_decode_only`
(decode_jpeg alone), `nvimgcodec_decode` (nvImageCodec, the hardware decoder for every JPEG, plus the same
crop/flip/normalise) and `nvimgcodec_decode_only_hw<load>` (nvImageCodec alone at each hardware share of
NVIMGCODEC_HW_LOADS: the hardware alone, DALI's split here, nvJPEG's CUDA decoder alone). Without
nvidia.nvimgcodec its rows are skipped, with the reason on stderr.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import torch
from omegaconf import DictConfig

from benchmarks.errors import ConfigError
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import loader_cpus, queue_depth

LOADERS = ("native", "native_gpu", "native_gpu-nvimgcodec", "dali", "dali-tfrecord")
DEFAULT_LOADERS = ("native", "native_gpu", "dali")
# the cases and ceilings that decode with nvImageCodec (loader.gpu_decoder=nvimgcodec)
NVIMGCODEC_CASES = ("native_gpu-nvimgcodec",)
# nvImageCodec's decode-only ceilings, by the hardware decoder's share of a batch (loader.hw_decoder_load):
# the hardware alone, DALI's setting here (conf: DaliLoaderConfig.hw_decoder_load), nvJPEG's CUDA decoder alone
NVIMGCODEC_HW_LOADS = (1.0, 0.65, 0.0)


@dataclass(frozen=True, slots=True)
class Measurement:
    """One case: a loader at a worker (or thread) count, or a ceiling (workers: None)."""

    case: str  # a loader case (LOADERS) or a ceiling (cpu_decode, device_ceilings())
    workers: int | None
    img_s: float
    images: int  # timed images
    device: str
    # seconds between the timed batches' arrivals (a loader case; empty for a ceiling): the loader's spread
    batch_intervals_s: tuple[float, ...] = ()

    def record(self) -> dict:
        return asdict(self)


def worker_counts(cpus_per_rank: int) -> list[int]:
    """1, 2, 4, ... up to the default (the rank's CPUs less one), which is always the last."""
    fair = loader_cpus(cpus_per_rank)
    counts = [1]
    while counts[-1] * 2 < fair:
        counts.append(counts[-1] * 2)
    return counts if counts[-1] == fair else [*counts, fair]


def loader_overrides(case: str, workers: int, *, tfrecord_path: str | None) -> list[str]:
    """The overrides that make `case` at `workers` workers or threads."""
    if case in ("native", "native_gpu"):
        return [f"loader={case}", f"loader.num_workers={workers}"]
    if case == "native_gpu-nvimgcodec":
        return ["loader=native_gpu", "loader.gpu_decoder=nvimgcodec", f"loader.num_workers={workers}"]
    if case == "dali":
        return ["loader=dali", "loader.reader=file", f"loader.num_threads={workers}"]
    if case == "dali-tfrecord":
        if not tfrecord_path:
            raise ConfigError(
                "loaderbench case dali-tfrecord needs --tfrecord DIR (a folder from 'ddlbench data convert')"
            )
        return ["loader=dali", "loader.reader=tfrecord", f"loader.num_threads={workers}", f"data.path={tfrecord_path}"]
    raise ConfigError(f"loaderbench: {case!r} is no loader case; choose from {', '.join(LOADERS)}")


def context(cfg: DictConfig, device: torch.device) -> LoaderContext:
    return LoaderContext(
        rank=0,
        world_size=1,
        device=device,
        per_gpu_batch=int(cfg.run.per_gpu_batch),
        seed=int(cfg.run.seed),
        num_classes=int(cfg.model.num_classes),
        image_size=int(cfg.model.image_size),
        channels_last=bool(cfg.precision.channels_last),
        data_path=cfg.data.path,
    )


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def loader_img_s(
    epoch_loader, device: torch.device, *, warmup: int, batches: int
) -> tuple[float, int, tuple[float, ...]]:
    """(img/s, images timed, the seconds between the timed batches' arrivals) of a built loader alone: `batches`
    batches after `warmup`, epochs as needed. The intervals are taken on the host as each batch is handed over
    (no synchronisation per batch, which would stall a GPU pipeline): their spread is the loader's, which
    `ddlbench predict` models each rank's data time from."""
    done, epoch, start, samples, arrivals = 0, 0, 0.0, 0, []
    while done < warmup + batches + 1:
        epoch_loader.set_epoch(epoch)
        before = done
        for _, labels in epoch_loader:
            if done == warmup:  # the clock starts once this batch is here: it is not counted
                synchronize(device)
                start, samples = time.perf_counter(), 0
            elif done > warmup:
                samples += int(labels.shape[0])
                arrivals.append(time.perf_counter())
            done += 1
            if done == warmup + batches + 1:
                break
        if done == before:
            raise ConfigError(
                "the loader yielded no batch in a whole epoch: the data set is smaller than one batch; "
                "pass a smaller run.per_gpu_batch or more data"
            )
        epoch += 1
    synchronize(device)
    img_s = samples / (time.perf_counter() - start)
    times = [start, *arrivals]
    return img_s, samples, tuple(round(b - a, 7) for a, b in zip(times, times[1:]))


def _jpeg_files(path: str, limit: int) -> list[str]:
    files = []
    for root, _, names in sorted(os.walk(path)):
        files += [os.path.join(root, n) for n in sorted(names) if n.lower().endswith((".jpg", ".jpeg"))]
        if len(files) >= limit:
            break
    if not files:
        raise ConfigError(f"data.path={path} holds no .jpg files for the decode ceilings; pass an ImageFolder of JPEGs")
    return files[:limit]


def cpu_decode_img_s(files: Sequence[str], *, image_size: int, seconds: float = 2.0) -> float:
    """One CPU worker's img/s doing the native loader's per-image work (PIL decode, random resized crop,
    flip, to a uint8 tensor), in this process on one thread."""
    from PIL import Image

    from benchmarks.loaders.native import image_transform

    transform = image_transform(image_size, augment=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        count, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            with Image.open(files[count % len(files)]) as image:
                transform(image.convert("RGB"))
            count += 1
        return count / (time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)


def device_decode_img_s(
    files: Sequence[str],
    device: torch.device,
    *,
    batch: int,
    image_size: int,
    batches: int = 10,
    gpu_decoder: str = "torchvision",
    hw_decoder_load: float = 1.0,
    transform: bool = True,
) -> float:
    """Batched decode (loader.gpu_decoder's BatchDecoder, on a stream of its own as the loader's thread
    runs it) + crop/flip/normalise on `device` (loader=native_gpu's device work), the bytes already in
    memory; transform=False: the decode alone."""
    from benchmarks.loaders.native import to_model_input
    from benchmarks.loaders.native_gpu import DECODERS, transform_batch

    stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    decoder = DECODERS[gpu_decoder](device, stream=stream, batch_size=batch, hw_decoder_load=hw_decoder_load)
    encoded = [torch.frombuffer(bytearray(open(f, "rb").read()), dtype=torch.uint8) for f in files]
    # one joined tensor per batch, split into views, as a DataLoader worker hands a batch over
    chunks = []
    for i in range(batches + 2):
        chunk = [encoded[(i * batch + j) % len(encoded)] for j in range(batch)]
        chunks.append(list(torch.split(torch.cat(chunk), [t.numel() for t in chunk])))
    rng = random.Random(0)

    def one(chunk):
        images = decoder.decode(chunk)
        if transform:
            images = to_model_input(
                transform_batch(images, size=image_size, augment=True, rng=rng), device, channels_last=True
            )
        return images

    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        for chunk in chunks[:2]:
            one(chunk)
        synchronize(device)
        start = time.perf_counter()
        for chunk in chunks[2:]:
            one(chunk)
        synchronize(device)
    return batches * batch / (time.perf_counter() - start)


def device_ceilings(device: torch.device) -> list[tuple[str, str, float, bool]]:
    """The device's decode ceilings as (case, loader.gpu_decoder, loader.hw_decoder_load, with the crop):
    device_decode everywhere; on a GPU decode_jpeg alone and nvImageCodec's (the module docstring)."""
    out = [("device_decode", "torchvision", 1.0, True)]
    if device.type == "cuda":
        out += [("device_decode_only", "torchvision", 1.0, False), ("nvimgcodec_decode", "nvimgcodec", 1.0, True)]
        out += [(f"nvimgcodec_decode_only_hw{load:g}", "nvimgcodec", load, False) for load in NVIMGCODEC_HW_LOADS]
    return out


def nvimgcodec_unavailable(device: torch.device) -> str | None:
    """Why the nvImageCodec cases cannot run here (a CPU device, or no nvidia.nvimgcodec), or None."""
    from benchmarks.loaders.native_gpu import nvimgcodec_missing

    if device.type != "cuda":
        return "they decode on a GPU and system.device=cpu"
    return nvimgcodec_missing()


def print_note(line: str) -> None:
    print(f"[ddlbench] loaderbench: {line}", file=sys.stderr, flush=True)


def measure(
    cfg_for: Callable[[list[str]], DictConfig],
    base: DictConfig,
    *,
    cases: Sequence[str],
    workers: Sequence[int],
    warmup: int,
    batches: int,
    tfrecord_path: str | None,
    progress: Callable[[Measurement], None] = lambda m: None,
    note: Callable[[str], None] = print_note,
) -> list[Measurement]:
    """The ceilings, then every case at every worker count. cfg_for(overrides) composes the config of a
    case (the user's overrides plus the case's); base is the user's own. A case or ceiling that cannot run
    here (nvImageCodec's on a CPU or without the package) is left out, with the reason in note()."""
    from benchmarks.adapters import build_loader
    from benchmarks.validate import validate

    device = torch.device("cuda", 0) if base.system.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    out: list[Measurement] = []
    # the ceilings first, while no loader's workers or threads share the machine
    files = _jpeg_files(base.data.path, limit=512)
    size, batch = int(base.model.image_size), int(base.run.per_gpu_batch)
    out.append(
        Measurement(
            case="cpu_decode", workers=1, img_s=cpu_decode_img_s(files, image_size=size), images=0, device="cpu"
        )
    )
    progress(out[-1])
    unavailable = nvimgcodec_unavailable(device)
    ceilings = device_ceilings(device)
    skipped = [case for case, decoder, _, _ in ceilings if decoder == "nvimgcodec" and unavailable]
    if unavailable and (skipped or device.type == "cuda"):
        note(f"nvImageCodec's decode ceilings are skipped: {unavailable}")
    for case, gpu_decoder, load, transform in ceilings:
        if case in skipped:
            continue
        img_s = device_decode_img_s(
            files,
            device,
            batch=batch,
            image_size=size,
            gpu_decoder=gpu_decoder,
            hw_decoder_load=load,
            transform=transform,
        )
        out.append(Measurement(case=case, workers=None, device=device.type, images=batch * 10, img_s=img_s))
        progress(out[-1])
    for case in cases:
        if case in NVIMGCODEC_CASES and unavailable:
            note(f"case {case} is skipped: {unavailable}")
            continue
        for count in workers:
            cfg = cfg_for(loader_overrides(case, count, tfrecord_path=tfrecord_path))
            validate(cfg)
            queued = queue_depth(cfg.loader, workers=count)
            epoch_loader = build_loader(cfg).build(context(cfg, device))
            # a loader starts with its queue full: warm-up drains it, and the timed batches are many times
            # more than it holds, or a full queue reads as speed (15 workers x 2 = 30 batches ready)
            img_s, images, intervals = loader_img_s(
                epoch_loader, device, warmup=max(warmup, queued), batches=max(batches, 5 * queued)
            )
            del epoch_loader  # its workers or DALI pipeline go before the next case starts its own
            out.append(
                Measurement(
                    case=case,
                    workers=count,
                    img_s=img_s,
                    images=images,
                    device=device.type,
                    batch_intervals_s=intervals,
                )
            )
            progress(out[-1])
    return out


def format_table(measurements: Sequence[Measurement], *, cpus_per_rank: int) -> str:
    """The measurements as a text table: loader cases by worker count, then the ceilings."""
    rows = [("case", "workers", "img/s", "img/s per worker", "images timed", "device")]
    for m in measurements:
        per = "-" if not m.workers else f"{m.img_s / m.workers:,.0f}"
        rows.append(
            (
                m.case,
                "-" if m.workers is None else str(m.workers),
                f"{m.img_s:,.0f}",
                per,
                f"{m.images:,}" if m.images else "-",
                m.device,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    return "\n".join(
        [
            *lines,
            "",
            f"cpu_decode: one worker (x workers: the most native can reach); device_decode: "
            f"batched decode_jpeg + crop/flip/normalise on the device (_only: the decode alone; nvimgcodec_: "
            f"nvImageCodec's, hw<load>: its hardware decoder's share); the rank has {cpus_per_rank} CPUs, "
            f"the loaders' default is {loader_cpus(cpus_per_rank)}",
        ]
    )


def print_progress(m: Measurement) -> None:
    workers = "" if m.workers is None else f" x{m.workers}"
    print(f"[ddlbench] loaderbench {m.case}{workers}: {m.img_s:,.0f} img/s", file=sys.stderr, flush=True)
