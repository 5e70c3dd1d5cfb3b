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
stream wait for it. nvImageCodec (gpu_decoder=nvimgcodec; this is the only module that imports
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
import ctypes
import functools
import importlib.util
import math
import os
import queue
import random
import sys
import threading
from collections.abc import Iterator
from typing import Any, NamedTuple, Protocol

import torch

from benchmarks.adapter_config import Installation
from benchmarks.errors import ConfigError
from benchmarks.loaders.base import LoaderContext
from benchmarks.loaders.configs import GpuJpegDecoder, NativeGpuLoaderConfig
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


def read_bytes(path: str) -> bytes:
    """A file's bytes (what the workers read: no decoding there)."""
    with open(path, "rb") as f:
        return f.read()


# a NamedTuple, not a dataclass: the DataLoader pins (loader.pin_memory=true) the fields of a named tuple
class WorkerBatch(NamedTuple):
    """One batch as a DataLoader worker hands it over: its first len(shapes) images decoded on the CPU
    (uint8 CHW, flattened one after another into `pixels`; `shapes` holds each one's C, H, W), the rest
    still encoded (all their bytes in `joined`, each file's length in `lengths`), every label in batch order."""

    pixels: torch.Tensor
    shapes: torch.Tensor
    joined: torch.Tensor
    lengths: torch.Tensor
    labels: torch.Tensor


def num_cpu_decoded(batch_size: int, share: float) -> int:
    """How many of a batch's images the workers decode on the CPU (loader.cpu_decode_share): its first
    round(share x batch_size)."""
    return round(share * batch_size)


def decode_cpu(encoded: list[torch.Tensor]) -> list[torch.Tensor]:
    """JPEGs (1-D uint8 tensors) -> uint8 CHW RGB images, decoded on the CPU."""
    from torchvision.io import ImageReadMode, decode_jpeg

    return decode_jpeg(encoded, mode=ImageReadMode.RGB) if encoded else []


def join_decoded(images: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """Decoded images -> (all their pixels in one flat uint8 tensor, their (C, H, W) as an (n, 3) tensor):
    one tensor crosses from the worker, not one per image. In a worker the pixels are concatenated straight
    into shared memory, as default_collate does, so sending the batch copies them no second time."""
    shapes = torch.tensor([list(image.shape) for image in images], dtype=torch.int64).view(-1, 3)
    total = sum(image.numel() for image in images)
    if total and torch.utils.data.get_worker_info() is not None:
        out = torch.empty(0, dtype=torch.uint8).set_(torch.UntypedStorage._new_shared(total))
    else:
        out = torch.empty(total, dtype=torch.uint8)
    if images:
        torch.cat([image.reshape(-1) for image in images], out=out)
    return out, shapes


def collate_encoded(batch: list[tuple[bytes, int]], *, cpu_decode_share: float = 0.0) -> WorkerBatch:
    """A batch of (bytes, label) -> a WorkerBatch: the first num_cpu_decoded() JPEGs decoded here, the
    rest's bytes in one uint8 tensor with each file's length (split_encoded undoes it)."""
    num_decoded = num_cpu_decoded(len(batch), cpu_decode_share)
    pixels, shapes = join_decoded(
        decode_cpu([torch.frombuffer(bytearray(data), dtype=torch.uint8) for data, _ in batch[:num_decoded]])
    )
    encoded = batch[num_decoded:]
    lengths = torch.tensor([len(data) for data, _ in encoded], dtype=torch.int64)
    joined = bytearray(b"".join(data for data, _ in encoded))
    joined = torch.frombuffer(joined, dtype=torch.uint8) if joined else torch.empty(0, dtype=torch.uint8)
    labels = torch.tensor([label for _, label in batch], dtype=torch.int64)
    return WorkerBatch(pixels, shapes, joined, lengths, labels)


def split_encoded(joined: torch.Tensor, lengths: torch.Tensor) -> list[torch.Tensor]:
    """The JPEGs of a collated batch, as contiguous 1-D views."""
    return list(torch.split(joined, lengths.tolist()))


def upload_decoded(pixels: torch.Tensor, shapes: torch.Tensor, device: torch.device) -> list[torch.Tensor]:
    """The workers' decoded images (join_decoded) on `device` as CHW views: on a GPU one pinned copy of
    them all, sent without blocking on the current stream (the host allocator keeps the pinned block
    until that copy is done)."""
    if not len(shapes):
        return []
    if device.type == "cuda":
        pixels = pixels.pin_memory().to(device, non_blocking=True)  # pin_memory: a no-op if already pinned
    sizes = shapes.prod(dim=1).tolist()
    return [flat.view(shape) for flat, shape in zip(torch.split(pixels, sizes), shapes.tolist())]


class BatchDecoder(Protocol):
    """Decodes a batch on the run's device (loader.gpu_decoder; DECODERS holds one per value)."""

    name: str

    @classmethod
    def check_installed(cls) -> None:
        """ConfigError (one line, the install command) unless its library is here; imports nothing."""

    def decode(self, encoded: list[torch.Tensor]) -> list[torch.Tensor]:
        """JPEGs (1-D uint8 CPU tensors) -> uint8 CHW RGB images on the device, in batch order, ready in the
        current stream's order (the decode thread's stream)."""

    def describe(self) -> dict[str, str]:
        """What decoded, for meta.json: the library and its version, and how it was set up."""


class TorchvisionDecoder:
    """torchvision.io.decode_jpeg of the whole batch on the device (on a CPU run, on the CPU): nvJPEG, every
    baseline JPEG on the hardware decoder where the GPU has one."""

    name = "torchvision"

    def __init__(self, device: torch.device, *, stream: Any, batch_size: int, hw_decoder_load: float) -> None:
        self.device = device

    @classmethod
    def check_installed(cls) -> None:
        """torchvision is a requirement of the project."""

    def decode(self, encoded: list[torch.Tensor]) -> list[torch.Tensor]:
        from torchvision.io import ImageReadMode, decode_jpeg

        return decode_jpeg(encoded, mode=ImageReadMode.RGB, device=self.device)

    def describe(self) -> dict[str, str]:
        import torchvision

        return {"gpu_decoder_library": f"torchvision {torchvision.__version__} (decode_jpeg: nvJPEG)"}


def nvimgcodec_install_hint() -> str:
    """The pip command for nvImageCodec with the nvJPEG library, for the CUDA major version torch uses."""
    major = (torch.version.cuda or "13").split(".")[0]
    return f"pip install 'nvidia-nvimgcodec-cu{major}[nvjpeg]'"


def nvimgcodec_missing() -> str | None:
    """Why loader.gpu_decoder=nvimgcodec cannot run here (its package is not installed), or None. Looks the
    module up without importing it."""
    try:
        found = importlib.util.find_spec("nvidia.nvimgcodec") is not None
    except ModuleNotFoundError:  # no `nvidia` package at all
        found = False
    if found:
        return None
    return (
        "loader.gpu_decoder=nvimgcodec needs nvImageCodec's python package (nvidia.nvimgcodec), which is not "
        f"installed; run {nvimgcodec_install_hint()!r}, or use loader.gpu_decoder=torchvision"
    )


def import_nvimgcodec() -> Any:
    """nvidia.nvimgcodec, or a one-line ConfigError with the install command."""
    missing = nvimgcodec_missing()
    if missing:
        raise ConfigError(missing)
    try:
        import nvidia.nvimgcodec as nvimgcodec
    except ImportError as error:
        raise ConfigError(
            f"loader.gpu_decoder=nvimgcodec: nvidia.nvimgcodec does not load ({error}); reinstall it with "
            f"{nvimgcodec_install_hint()!r}"
        ) from None
    return nvimgcodec


def nvimgcodec_backends(nvimgcodec: Any, hw_decoder_load: float) -> list:
    """nvImageCodec's backends, in the order DALI's mixed decoder asks for them: the hardware decoder takes
    round(hw_decoder_load x batch) JPEGs (rounded up to its engines' mini-batch; 0: none), nvJPEG's CUDA
    decoder the rest (Huffman decoding on the decoder's CPU threads below 1 M pixels, the rest on the SMs)
    and what the hardware cannot decode (progressive JPEGs, 4:1:1 chroma). FIXED: the split is the hint,
    every batch."""
    kind, fixed = nvimgcodec.BackendKind, nvimgcodec.LoadHintPolicy.FIXED
    return [
        nvimgcodec.Backend(kind.HW_GPU_ONLY, load_hint=hw_decoder_load, load_hint_policy=fixed),
        nvimgcodec.Backend(kind.GPU_ONLY, load_hint=1.0, load_hint_policy=fixed),
        nvimgcodec.Backend(kind.HYBRID_CPU_GPU, load_hint=1.0, load_hint_policy=fixed),
    ]


def nvimgcodec_params(nvimgcodec: Any) -> Any:
    """Planar RGB uint8 (CHW, as decode_jpeg gives it) and no EXIF rotation (neither decode_jpeg nor PIL
    applies it, so every loader crops the same pixels)."""
    return nvimgcodec.DecodeParams(
        apply_exif_orientation=False, color_spec=nvimgcodec.ColorSpec.SRGB, sample_format=nvimgcodec.SampleFormat.P_RGB
    )


def decode_nvimgcodec(
    nvimgcodec: Any, decoder: Any, params: Any, encoded: list[torch.Tensor], *, cuda_stream: int, consumer_stream: int
) -> list[torch.Tensor]:
    """One batched nvImageCodec decode -> CHW uint8 tensors, without a copy. The code streams read the
    batch's bytes in place (numpy views of the tensor the worker sent); the decode runs on cuda_stream and
    each image is handed to torch through DLPack for consumer_stream: the same stream, so no event (-1: no
    ordering, for host images). An image that does not decode is an error, not a gap in the batch."""
    decoded = decoder.decode(
        [nvimgcodec.CodeStream(t.numpy()) for t in encoded], params=params, cuda_stream=cuda_stream
    )
    failed = [n for n, image in enumerate(decoded) if image is None]
    if failed or len(decoded) != len(encoded):
        which = f"#{failed[0]}" if failed else "some"
        raise RuntimeError(
            f"loader.gpu_decoder=nvimgcodec: {len(failed) or len(encoded) - len(decoded)} of the batch's "
            f"{len(encoded)} JPEGs did not decode ({which} first); check the files with loader.gpu_decoder=torchvision"
        )
    images = [torch.from_dlpack(image.to_dlpack(consumer_stream)) for image in decoded]
    bad = next((tuple(t.shape) for t in images if t.dim() != 3 or t.shape[0] != 3 or t.dtype != torch.uint8), None)
    if bad is not None:
        raise RuntimeError(
            f"loader.gpu_decoder=nvimgcodec: an image came back as {bad}, not planar RGB uint8 (3, H, W)"
        )
    return images


# CUmemPool_attribute CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (cuda.h)
_RELEASE_THRESHOLD = 4


def keep_pool_memory(device_index: int) -> str:
    """Lets the device's current memory pool (cudaMallocAsync's: nvImageCodec allocates its images there, on
    our stream) keep the memory freed into it. By default (release threshold 0) it hands it back to the
    driver at every synchronisation, and the next batch's images are mapped anew. What it did, for meta.json."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as error:
        return f"unchanged ({error})"
    device, pool, keep = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64(2**64 - 1)
    for call, args in (
        ("cuDeviceGet", (ctypes.byref(device), device_index)),
        ("cuDeviceGetMemPool", (ctypes.byref(pool), device)),
        ("cuMemPoolSetAttribute", (pool, _RELEASE_THRESHOLD, ctypes.byref(keep))),
    ):
        status = getattr(cuda, call)(*args)
        if status:
            return f"unchanged ({call} returned CUresult {status})"
    return "kept (release threshold: no limit)"


class NvImageCodecDecoder:
    """nvImageCodec's batched decode on our stream: nvimgcodec_backends' split between the hardware decoder
    and nvJPEG's CUDA decoder (hw_decoder_load), planar RGB out, handed over without a copy."""

    name = "nvimgcodec"

    def __init__(self, device: torch.device, *, stream: Any, batch_size: int, hw_decoder_load: float) -> None:
        if device.type != "cuda":  # validate() refuses it first (check_device); builders that skip it land here
            raise ConfigError(
                "loader.gpu_decoder=nvimgcodec decodes on a GPU; use loader.gpu_decoder=torchvision on a CPU run"
            )
        self._nvimgcodec = import_nvimgcodec()
        index = device.index if device.index is not None else torch.cuda.current_device()
        self.hw_decoder_load = hw_decoder_load
        self._stream = int(stream.cuda_stream)
        self._decoder = self._nvimgcodec.Decoder(
            device_id=index,
            backends=nvimgcodec_backends(self._nvimgcodec, hw_decoder_load),
            # the hardware decoder's buffers for a whole batch up front, as DALI sizes them
            options=f"nvjpeg_hw_decoder:preallocate_batch_size={batch_size}",
        )
        self._params = nvimgcodec_params(self._nvimgcodec)
        self.pool_memory = keep_pool_memory(index)

    @classmethod
    def check_installed(cls) -> None:
        missing = nvimgcodec_missing()
        if missing:
            raise ConfigError(missing)

    def decode(self, encoded: list[torch.Tensor]) -> list[torch.Tensor]:
        return decode_nvimgcodec(
            self._nvimgcodec,
            self._decoder,
            self._params,
            encoded,
            cuda_stream=self._stream,
            consumer_stream=self._stream,
        )

    def describe(self) -> dict[str, str]:
        return {
            "gpu_decoder_library": (
                f"nvimgcodec {self._nvimgcodec.__version__} (hardware {self.hw_decoder_load:g} of each batch, "
                "then nvJPEG's CUDA decoder)"
            ),
            "gpu_decoder_pool_memory": self.pool_memory,
        }


# loader.gpu_decoder -> its BatchDecoder
DECODERS: dict[GpuJpegDecoder, type[BatchDecoder]] = {
    GpuJpegDecoder.torchvision: TorchvisionDecoder,
    GpuJpegDecoder.nvimgcodec: NvImageCodecDecoder,
}


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
