"""The decode path of loader=native_gpu: encoded JPEGs from the workers (read_bytes; collate_encoded, with a
share decoded on the CPU there), then one batched GPU decode per batch by a BatchDecoder of DECODERS
(loader.gpu_decoder): torchvision's decode_jpeg (nvJPEG) or nvImageCodec (this is the only module that
imports nvidia.nvimgcodec, lazily). The loader around it, its crops and its decode thread: native_gpu.py."""

from __future__ import annotations

import ctypes
import importlib.util
from typing import Any, NamedTuple, Protocol

import torch

from benchmarks.errors import ConfigError
from benchmarks.loaders.configs import GpuJpegDecoder

# CUmemPool_attribute CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (cuda.h)
_RELEASE_THRESHOLD = 4


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
