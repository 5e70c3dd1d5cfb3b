"""Plain PyTorch with JPEGs decoded on the GPU (loader=native_gpu): no DALI.

DataLoader workers only read the files' bytes (the sharding contract of the native loader: the same
ShardedBatchSampler). A thread of the training process takes each batch of encoded JPEGs and, on a CUDA
stream of its own, decodes it in one batched call (gpu_decoder, a BatchDecoder of DECODERS:
torchvision.io.decode_jpeg on the device, or nvImageCodec), crops, resizes, flips and normalises it,
then records an event. The thread works prefetch_batches ahead; training's stream waits on a batch's
event (no host wait) and record_stream() tells the caching allocator that training's stream uses the
batch, so its memory is not handed out again before that work is done. Decoding overlaps training.

Both decoders use nvJPEG. torchvision (>= 0.19) sends every baseline JPEG of a batch to the hardware
decoder (NVJPG engines of A100/H100/H200) and the rest to nvJPEG's CUDA decoder one by one; it decodes on
a stream of its own, waits on the host for the batch (cudaStreamSynchronize) and makes the current
stream wait for it. nvImageCodec (gpu_decoder=nvimgcodec; gpu_decode.py, the only module that imports
nvidia.nvimgcodec, lazily) splits each batch between its hardware backend (hw_decoder_load of it) and
nvJPEG's CUDA decoders, as DALI does, parses the headers on a thread pool and decodes on the stream it is
given (ours): its images are ready in that stream's order, their memory (cudaMallocAsync on that stream)
is handed to torch without a copy (DLPack) and freed on that stream when the tensors go.

cpu_decode_share takes some decoding off the GPU that training shares: the workers decode each batch's
first round(share x batch) JPEGs on the CPU themselves (collate_encoded) and the thread uploads them
(pinned, non-blocking, on its stream) ahead of nvJPEG's share. Both halves go through the same
transform_batch in batch order, so the crops and flips do not depend on which side decoded an image.

Augmentation contract (the native and DALI loaders' too): augment=true -> random resized crop (area
8-100%, aspect 3/4-4/3, torchvision's RandomResizedCrop algorithm, random_resized_crop_box) resized to
image_size (one torchvision.ops.roi_align over the batch, antialiased: transform_batch), then a
horizontal flip with p=0.5; augment=false -> the shorter side resized to image_size*256/224 and a centre
crop. Normalised with native.to_model_input.
On a CPU run the same steps run on the CPU (what the tests cover).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import queue
import random
import sys
import threading
from collections.abc import Iterator

import torch

from benchmarks.adapter_config import Installation
from benchmarks.errors import ConfigError
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import NativeGpuLoaderConfig
from benchmarks.loaders.gpu_decode import (
    DECODERS,
    WorkerBatch,
    collate_encoded,
    num_cpu_decoded,
    nvimgcodec_install_hint,
    nvimgcodec_missing,
    read_bytes,
    split_encoded,
    upload_decoded,
)
from benchmarks.loaders.native import EpochStream, ShardedBatchSampler, sharded_dataloader, subset, to_model_input

JPEG_SUFFIXES = (".jpg", ".jpeg")
# The decode thread shares the GIL with training's thread, which holds it while it queues a step. A
# thread that gives the GIL up (in decode_jpeg, roi_align) waits up to the interpreter's switch interval
# (5 ms) to get it back, several times a batch; 0.5 ms keeps a batch's decoding from waiting tens of ms.
SWITCH_INTERVAL_S = 0.0005
CROP_AREA = (0.08, 1.0)
CROP_ASPECT = (3 / 4, 4 / 3)
_END = object()  # the producer thread's last item of an epoch


def random_resized_crop_box(
    height: int,
    width: int,
    rng: random.Random,
    *,
    area: tuple[float, float] = CROP_AREA,
    aspect: tuple[float, float] = CROP_ASPECT,
) -> tuple[int, int, int, int]:
    """(top, left, crop height, crop width) as torchvision's RandomResizedCrop draws them: up to 10 tries
    of an area share uniform in `area` and an aspect ratio log-uniform in `aspect` that fit the image,
    else the largest centred crop with the aspect clamped into the range."""
    image_area = height * width
    log_low, log_high = math.log(aspect[0]), math.log(aspect[1])
    for _ in range(10):
        target = image_area * rng.uniform(*area)
        ratio = math.exp(rng.uniform(log_low, log_high))
        w, h = round(math.sqrt(target * ratio)), round(math.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, height - h), rng.randint(0, width - w), h, w
    if width / height < aspect[0]:
        w, h = width, round(width / aspect[0])
    elif width / height > aspect[1]:
        h, w = height, round(height * aspect[1])
    else:
        h, w = height, width
    return (height - h) // 2, (width - w) // 2, h, w


def centre_box(height: int, width: int, *, size: int) -> tuple[tuple[int, int], tuple[int, int, int, int]]:
    """The evaluation transform: ((resized height, width) with the shorter side size*256/224, and the
    centred size x size box in it as (top, left, height, width))."""
    short = size * 256 // 224
    if height <= width:
        resized = (short, int(short * width / height))
    else:
        resized = (int(short * height / width), short)
    top, left = round((resized[0] - size) / 2), round((resized[1] - size) / 2)
    return resized, (top, left, size, size)


def crop_boxes(
    shapes: list[tuple[int, int]], *, size: int, augment: bool, rng: random.Random
) -> list[tuple[int, int, int, int]]:
    """Per image (height, width), the region of it that becomes the size x size output, as (top, left,
    height, width) in its own pixels: the random resized crop, or for evaluation the centre crop of the
    image resized to a shorter side of size*256/224, taken back to the image's scale."""
    boxes = []
    for height, width in shapes:
        if augment:
            boxes.append(random_resized_crop_box(height, width, rng))
            continue
        (resized_h, resized_w), (top, left, h, w) = centre_box(height, width, size=size)
        sy, sx = height / resized_h, width / resized_w
        boxes.append((top * sy, left * sx, h * sy, w * sx))
    return boxes


# half-precision roi_align is exact for what it is given up to here: image positions (the batch index) and
# pixel coordinates of at most 2048 (fp16's integers); beyond, and on the CPU, it runs in float32
HALF_EXACT = 2048


def transform_batch(images: list[torch.Tensor], *, size: int, augment: bool, rng: random.Random) -> torch.Tensor:
    """Decoded CHW uint8 RGB images (any sizes, on one device) -> an NCHW float batch (0..255) of size x size:
    random resized crop + flip, or resize + centre crop. The crops and resizes of the images that share a
    shape are one roi_align (all of them in the usual batch of one size): each output pixel averages
    bilinear samples over its share of the crop (as many per axis as the crop is larger than the output),
    so shrinking is antialiased, as PIL's resize is. Flips are drawn after all the crops. A few kernels per
    batch, not per image: the thread that runs this shares the GIL and the GPU with training."""
    from torchvision.ops import roi_align

    boxes = crop_boxes([tuple(i.shape[1:]) for i in images], size=size, augment=augment, rng=rng)
    device = images[0].device
    by_shape: dict[tuple[int, ...], list[int]] = {}
    for n, image in enumerate(images):
        by_shape.setdefault(tuple(image.shape), []).append(n)
    out = None
    for shape, members in by_shape.items():
        half = device.type == "cuda" and len(members) <= HALF_EXACT and max(shape[1:]) <= HALF_EXACT
        dtype = torch.float16 if half else torch.float32
        rois = torch.tensor(
            [
                [k, boxes[n][1], boxes[n][0], boxes[n][1] + boxes[n][3], boxes[n][0] + boxes[n][2]]
                for k, n in enumerate(members)
            ],
            dtype=dtype,
        )
        crops = roi_align(
            torch.stack([images[n] for n in members]).to(dtype),
            rois.to(device, non_blocking=True),
            output_size=(size, size),
            spatial_scale=1.0,
            sampling_ratio=-1,
            aligned=True,
        ).float()
        if len(by_shape) == 1:
            out = crops
        else:
            if out is None:
                out = torch.empty((len(images), 3, size, size), dtype=torch.float32, device=device)
            out[torch.tensor(members, device=device)] = crops
    if augment:
        flips = [rng.random() < 0.5 for _ in images]
        if any(flips):
            mask = torch.tensor(flips, device=out.device).view(-1, 1, 1, 1)
            out = torch.where(mask, out.flip(-1), out)
    return out


class NativeGpuEpoch:
    def __init__(
        self,
        ctx: LoaderContext,
        batches: EpochStream,
        sampler: ShardedBatchSampler,
        num_samples: int,
        config: NativeGpuLoaderConfig,
    ):
        self.ctx, self.batches, self.sampler = ctx, batches, sampler
        self.num_samples, self.config = num_samples, config
        self.cuda = ctx.device.type == "cuda"
        # a high-priority stream: its few kernels per batch go ahead of training's queued ones, so a batch is
        # ready before training waits for it
        self.stream = torch.cuda.Stream(ctx.device, priority=-1) if self.cuda else None
        self.decoder = DECODERS[config.gpu_decoder](
            ctx.device, stream=self.stream, batch_size=ctx.per_gpu_batch, hw_decoder_load=config.hw_decoder_load
        )
        self.epoch = 0
        if self.cuda:  # process-wide; a rank process runs one loader
            sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))

    def __len__(self) -> int:
        return len(self.sampler)

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)
        self.epoch = epoch

    def batch_rng(self, number: int) -> random.Random:
        """The crops' and flips' random numbers of the epoch's batch `number` on this rank: apart from torch's
        generators (which training uses), and the same however far ahead the decoding ran before an epoch
        was left early."""
        return random.Random(f"native_gpu:{self.ctx.seed}:{self.ctx.rank}:{self.epoch}:{number}")

    def _decode(self, batch: WorkerBatch, rng: random.Random) -> torch.Tensor:
        """A worker's batch -> its transformed images, in batch order: the CPU-decoded first (uploaded), then
        the rest decoded on the device (self.decoder). One transform_batch over both: the same crops and
        flips whichever side decoded an image."""
        images = upload_decoded(batch.pixels, batch.shapes, self.ctx.device)
        if len(batch.lengths):
            images += self.decoder.decode(split_encoded(batch.joined, batch.lengths))
        return transform_batch(images, size=self.ctx.image_size, augment=self.config.augment, rng=rng)

    def _produce(self, batches: Iterator, out: queue.Queue, stop: threading.Event) -> None:
        """The decode thread: every batch of the epoch decoded and transformed on self.stream, with the
        event training's stream waits on; then _END (or the exception that stopped it)."""

        def put(item) -> bool:
            while not stop.is_set():
                try:
                    out.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        try:
            if self.cuda:
                torch.cuda.set_device(self.ctx.device)  # the current device is per thread
            with torch.cuda.stream(self.stream) if self.cuda else contextlib.nullcontext():
                for number, batch in enumerate(batches):
                    images = self._decode(batch, self.batch_rng(number))
                    images = to_model_input(images, self.ctx.device, channels_last=self.ctx.channels_last)
                    labels = batch.labels.to(self.ctx.device, non_blocking=True)
                    event = None
                    if self.cuda:
                        event = torch.cuda.Event()
                        event.record(self.stream)
                    if not put((images, labels, event)):
                        return
        except BaseException as error:  # handed to the training thread, which raises it
            put(error)
            return
        put(_END)

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        ready: queue.Queue = queue.Queue(maxsize=self.config.prefetch_batches)
        stop = threading.Event()
        thread = threading.Thread(
            target=self._produce,
            args=(self.batches.epoch(self.epoch), ready, stop),
            daemon=True,
            name=f"native_gpu-decode-rank{self.ctx.rank}",
        )
        thread.start()
        timeout_s = float(self.config.timeout_s or 0)
        try:
            while True:
                item = self._next(ready, thread, timeout_s)
                if item is _END:
                    return
                if isinstance(item, BaseException):
                    raise item
                images, labels, event = item
                if event is not None:
                    current = torch.cuda.current_stream(self.ctx.device)
                    current.wait_event(event)  # the GPU waits for the batch, the host does not
                    images.record_stream(current)  # allocated on the decode stream, used on this one
                    labels.record_stream(current)
                yield images, labels
        finally:
            stop.set()
            thread.join()

    @staticmethod
    def _next(ready: queue.Queue, thread: threading.Thread, timeout_s: float):
        """The decode thread's next item; an error if it died without one, or gave none for timeout_s
        (loader.timeout_s; 0: no limit)."""
        waited = 0.0
        while True:
            try:
                return ready.get(timeout=1.0)
            except queue.Empty:
                waited += 1.0
                if not thread.is_alive() and ready.empty():
                    raise RuntimeError(
                        "loader=native_gpu: the decode thread ended without handing over a batch"
                    ) from None
                if timeout_s and waited >= timeout_s:
                    raise RuntimeError(
                        f"loader=native_gpu: no batch for {timeout_s:.0f} s (loader.timeout_s); the "
                        "decode thread or a DataLoader worker is stuck"
                    ) from None

    def describe(self) -> dict:
        return {
            "loader": "native_gpu",
            "num_samples": self.num_samples,
            "cpu_count": os.cpu_count(),
            "decode_device": self.ctx.device.type,
            # of each batch, the images the DataLoader workers decode on the CPU (loader.cpu_decode_share)
            "cpu_decoded_per_batch": num_cpu_decoded(self.ctx.per_gpu_batch, self.config.cpu_decode_share),
            "switch_interval_s": sys.getswitchinterval(),
            **self.decoder.describe(),
            **self.config.described(),
        }


class NativeGpuLoader:
    @classmethod
    def installation(cls) -> Installation:
        import torchvision

        missing = nvimgcodec_missing()
        nvimgcodec = (
            f"not installed ({nvimgcodec_install_hint()})"
            if missing
            else _installed_version("nvidia-nvimgcodec-cu", "installed")
        )
        return Installation(
            ok=True,
            detail=f"torchvision {torchvision.__version__} (decode_jpeg on CUDA: nvJPEG); "
            f"loader.gpu_decoder=nvimgcodec: {nvimgcodec}",
        )

    def __init__(self, config: NativeGpuLoaderConfig) -> None:
        config.check()
        DECODERS[config.gpu_decoder].check_installed()  # before any process group exists
        self.config = config

    def build(self, ctx: LoaderContext) -> NativeGpuEpoch:
        from torchvision.datasets import DatasetFolder

        path = ctx.data_path
        if not path or not os.path.isdir(path):
            raise ConfigError(
                f"data.path={path!r} is not a directory; make one with 'ddlbench data synth --out DIR' "
                "and pass data.path=DIR"
            )
        try:
            dataset = DatasetFolder(path, loader=read_bytes, extensions=JPEG_SUFFIXES)
        except FileNotFoundError as error:  # no class folder, or no JPEG in any
            raise ConfigError(
                f"data.path={path}: {error}; loader=native_gpu decodes JPEGs (.jpg, .jpeg) of an "
                "ImageFolder (<class>/<image>.jpg); use loader=native for other formats"
            ) from None
        config = ctx.for_split(self.config)
        dataset = subset(dataset, ctx.indices(len(dataset)))
        collate = functools.partial(collate_encoded, cpu_decode_share=config.cpu_decode_share)
        stream, sampler = sharded_dataloader(dataset, ctx, config, collate_fn=collate)
        return NativeGpuEpoch(ctx, stream, sampler, len(dataset), config)


def _installed_version(prefix: str, default: str) -> str:
    """The version of the installed distribution whose name starts with prefix (nvidia-nvimgcodec-cu12/13)."""
    from importlib import metadata

    for dist in metadata.distributions():
        name = dist.metadata["Name"] or ""
        if name.lower().startswith(prefix):
            return f"{name} {dist.version}"
    return default
