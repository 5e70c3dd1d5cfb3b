"""The settings of every loader adapter (synthetic, native, native_gpu, dali). Torch-free.

Kept apart from the loader modules (which import torch, and DALI lazily) so that Hydra's ConfigStore,
validate() and campaign planning use them without torch: see benchmarks/adapter_config.py. Each
dataclass is the one home of its defaults, its `name` and its adapter class (`_target_`);
conf/loader/<name>.yaml only makes the option selectable (its defaults list) and says what it is.

One rule sizes every loader's CPU work (native and native_gpu's DataLoader workers, DALI's threads): the
rank's CPUs (system.cpus_per_rank) less one for the training process itself, LOADER_CPUS. A loader
given far fewer is a handicap, not a comparison: validate.warnings() says so before launch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from omegaconf import II, MISSING

from benchmarks.adapter_config import AdapterConfig, Choice
from benchmarks.errors import ConfigError
from benchmarks.models.configs import TaskKind


class DaliReader(Choice):
    """file: data.path is an ImageFolder of JPEGs; tfrecord: data.path/*.tfrecord with DALI .idx index files
    (`ddlbench data synth --format tfrecord`, `ddlbench data convert`)."""

    file = "file"
    tfrecord = "tfrecord"


class DecoderDevice(Choice):
    """Where DALI decodes JPEGs: auto = mixed (nvJPEG + the hardware decoder) on a GPU run, cpu otherwise."""

    auto = "auto"
    mixed = "mixed"
    cpu = "cpu"


class GpuJpegDecoder(Choice):
    """Who decodes loader=native_gpu's JPEGs on the GPU: torchvision's decode_jpeg (nvJPEG; it sends every
    baseline JPEG to the hardware decoder of A100/H100/H200, the rest to nvJPEG's CUDA decoder) or
    nvImageCodec (nvidia-nvimgcodec: its hardware backend takes loader.hw_decoder_load of each batch,
    nvJPEG's CUDA decoders the rest, as DALI splits its decoding)."""

    torchvision = "torchvision"
    nvimgcodec = "nvimgcodec"


def loader_cpus(cpus_per_rank: int) -> int:
    """The CPU workers (or threads) a loader gets by default: the rank's CPUs less the one its training
    process needs, at least 1."""
    return max(1, int(cpus_per_rank) - 1)


def worker_count(loader: Mapping[str, Any]) -> int:
    """A loader's CPU workers or threads as set (num_workers, DALI's num_threads; 0 for the synthetic loader)."""
    return int(loader.get("num_workers", loader.get("num_threads", 0)) or 0)


def queue_depth(loader: Mapping[str, Any], *, workers: int) -> int:
    """Batches a loader prepares ahead: DataLoader workers x prefetch_factor (plus native_gpu's decoded
    batches), or DALI's prefetch_queue_depth. loader: the loader's settings (a config or a plain mapping)."""
    return (
        workers * int(loader.get("prefetch_factor", 0) or 0)
        + int(loader.get("prefetch_batches", 0) or 0)
        + int(loader.get("prefetch_queue_depth", 0) or 0)
    )


def batch_makers(loader: Mapping[str, Any], *, workers: int) -> int:
    """Batches a loader makes at once: its workers where each makes whole batches, in turn (a DataLoader's,
    LoaderConfig.WORKERS_MAKE_BATCHES), else one (a DALI pipeline's threads share each batch)."""
    option = CONFIGS.get(str(loader.get("name")))
    return max(1, workers) if option is not None and option.WORKERS_MAKE_BATCHES else 1


# the OmegaConf resolver benchmarks/schema.py registers, and the default of every loader's worker count
LOADER_CPUS_RESOLVER = "ddlbench.loader_cpus"
LOADER_CPUS = II(f"{LOADER_CPUS_RESOLVER}:${{system.cpus_per_rank}}")


@dataclass
class LoaderConfig(AdapterConfig):
    """What every loader option has: the adapter class (`_target_`), its name, and whether it reads data.path."""

    GROUP: ClassVar[str] = "loader"
    # the tasks whose batches it yields (benchmarks/tasks/): images and class labels, unless said
    TASKS: ClassVar[tuple[TaskKind, ...]] = (TaskKind.classification,)
    # each CPU worker makes whole batches, the workers in turn (a DataLoader's); False: one batch at a time
    WORKERS_MAKE_BATCHES: ClassVar[bool] = False
    _target_: str = MISSING
    name: str = MISSING
    needs_data: bool = True

    def described(self) -> dict[str, Any]:
        """The settings as meta.json records them (needs_data is a fact of the option, not a setting)."""
        return {key: value for key, value in self.settings().items() if key != "needs_data"}

    def cpu_workers(self) -> tuple[str, int] | None:
        """(key, value) of the setting that gives this loader CPU workers or threads; None if it has none."""
        return None

    def check_device(self, device: str) -> None:
        """The rules between this option and the run's device (system.device: cpu or cuda): ConfigError
        for a setting that needs the other one. Options that have such rules override this."""


@dataclass
class SyntheticLoaderConfig(LoaderConfig):
    """Tensors pre-built on the device: the no-I/O baseline; every task's, each made by the task itself."""

    TASKS: ClassVar[tuple[TaskKind, ...]] = tuple(TaskKind)
    _target_: str = "benchmarks.loaders.synthetic.SyntheticLoader"
    name: str = "synthetic"
    needs_data: bool = False  # reads nothing
    num_batches: int = 4  # distinct pre-built batches cycled through (kept on the device)
    samples_per_epoch: int = 12800  # virtual dataset size, for epochs and the sharding contract

    def check(self) -> None:
        self.at_least("num_batches", 1)
        self.at_least("samples_per_epoch", 1)


@dataclass
class NativeLoaderConfig(LoaderConfig):
    """torchvision ImageFolder + DataLoader."""

    WORKERS_MAKE_BATCHES: ClassVar[bool] = True

    _target_: str = "benchmarks.loaders.native.NativeLoader"
    name: str = "native"
    num_workers: int = LOADER_CPUS  # worker processes: the rank's CPUs less one (0: load in the training process)
    pin_memory: bool = True  # page-locked batches, copied to the GPU without blocking the host
    persistent_workers: bool = True  # workers live across epochs
    prefetch_factor: int = 2  # batches each worker prepares ahead (PyTorch's default)
    shuffle: bool = True
    augment: bool = True  # RandomResizedCrop + flip; False: resize + centre crop (deterministic)
    timeout_s: float = 120.0  # a stuck worker fails the run instead of hanging it

    def check(self) -> None:
        self.at_least("num_workers", 0)
        self.at_least("prefetch_factor", 1)
        self.at_least("timeout_s", 0, hint=" (seconds a worker may take per batch; 0: no limit)")

    def cpu_workers(self) -> tuple[str, int] | None:
        return self.key("num_workers"), self.num_workers


@dataclass
class NativeGpuLoaderConfig(NativeLoaderConfig):
    """Plain PyTorch, JPEGs decoded on the GPU: DataLoader workers read the encoded bytes; decoding
    (gpu_decoder: torchvision.io.decode_jpeg on CUDA or nvImageCodec; nvJPEG either way), random
    resized crop, flip and normalisation run batched on the run's device, on a stream of their own,
    prefetch_batches ahead of training. On a CPU run the same steps run on the CPU."""

    _target_: str = "benchmarks.loaders.native_gpu.NativeGpuLoader"
    name: str = "native_gpu"
    pin_memory: bool = False  # the encoded bytes go to nvJPEG, which stages them itself
    prefetch_batches: int = 2  # batches decoded ahead on the device (their own stream)
    # share of each batch's JPEGs (its first round(share x batch)) the DataLoader workers decode on the CPU
    # themselves, taking that decode work off the GPU training shares; the rest go to nvJPEG
    cpu_decode_share: float = 0.0
    # the library that decodes the rest on the GPU (GpuJpegDecoder says what each does)
    gpu_decoder: GpuJpegDecoder = GpuJpegDecoder.torchvision
    # gpu_decoder=nvimgcodec: share of those JPEGs for the hardware decoder (the rest: nvJPEG's CUDA decoder,
    # on the SMs), DALI's hw_decoder_load; 1 is what torchvision does (every baseline JPEG on the hardware)
    hw_decoder_load: float = 1.0

    def check(self) -> None:
        super().check()
        self.at_least("prefetch_batches", 1)
        self._share(
            "cpu_decode_share",
            "the share of each batch the DataLoader workers decode on the CPU; 0: all on the GPU",
            0.25,
        )
        self._share("hw_decoder_load", "the share of the GPU's JPEGs for its hardware decoder; DALI's here: 0.65", 0.65)
        if self.gpu_decoder is GpuJpegDecoder.torchvision and self.hw_decoder_load != 1.0:
            raise ConfigError(
                f"{self.key('hw_decoder_load')}={self.hw_decoder_load} needs {self.key('gpu_decoder')}=nvimgcodec: "
                "torchvision's decode_jpeg sends every baseline JPEG to the hardware decoder (1.0, its only "
                f"split); pass {self.key('gpu_decoder')}=nvimgcodec or leave {self.key('hw_decoder_load')}=1.0"
            )

    def check_device(self, device: str) -> None:
        if self.gpu_decoder is GpuJpegDecoder.nvimgcodec and device != "cuda":
            raise ConfigError(
                f"{self.key('gpu_decoder')}=nvimgcodec decodes on a GPU (nvImageCodec's hardware JPEG decoder) "
                f"but system.device={device}; use {self.key('gpu_decoder')}=torchvision (on a CPU run it "
                "decodes on the CPU) or a GPU system, e.g. system=h200"
            )

    def _share(self, name: str, what: str, example: float) -> None:
        share = getattr(self, name)
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0.0 <= share <= 1.0:
            raise ConfigError(
                f"{self.key(name)}={share!r} must be between 0 and 1 ({what}), e.g. {self.key(name)}={example}"
            )


@dataclass
class DaliLoaderConfig(LoaderConfig):
    """NVIDIA DALI: read, decode, crop, flip and normalise in a DALI pipeline."""

    _target_: str = "benchmarks.loaders.dali.DaliLoader"
    name: str = "dali"
    reader: DaliReader = DaliReader.file
    decoder_device: DecoderDevice = DecoderDevice.auto
    hw_decoder_load: float = 0.65  # share of images for the hardware JPEG decoder (mixed only)
    # DALI CPU worker threads per rank: the rank's CPUs less one (Huffman decoding of the mixed decoder runs here)
    num_threads: int = LOADER_CPUS
    prefetch_queue_depth: int = 4  # batches DALI prepares ahead (docs/dali.md: why 4)
    shuffle: bool = True  # reader random_shuffle (global list shuffle + a buffer of initial_fill samples)
    augment: bool = True  # random resized crop + flip; False: resize 256/224 + centre crop
    seed: int | None = None  # None: run.seed; each rank adds its rank (augmentations differ per rank)
    stick_to_shard: bool = False  # False: shards rotate over ranks each epoch (every rank sees all data)
    initial_fill: int = 1024  # reader shuffle buffer, in samples
    # GPU: training reads DALI's own output buffers, handed over on torch's stream (no copy, no host wait);
    # False: a copy per batch
    zero_copy: bool = True

    def check(self) -> None:
        if not 0.0 <= self.hw_decoder_load <= 1.0:
            raise ConfigError(
                f"loader.hw_decoder_load={self.hw_decoder_load} must be between 0 and 1 (0.65 on A100/H100/H200)"
            )
        for name in ("num_threads", "prefetch_queue_depth", "initial_fill"):
            self.at_least(name, 1)

    def cpu_workers(self) -> tuple[str, int] | None:
        return self.key("num_threads"), self.num_threads


# every loader option's config (benchmarks/schema.py registers them as <name>_schema)
CONFIGS: dict[str, type[LoaderConfig]] = {
    c.name: c for c in (SyntheticLoaderConfig, NativeLoaderConfig, NativeGpuLoaderConfig, DaliLoaderConfig)
}
