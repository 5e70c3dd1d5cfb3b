"""Dataclass schemas for every config group, registered in Hydra's ConfigStore.

Each option YAML in conf/ starts with `defaults: [<group>_schema, _self_]`, so a misspelt key is
rejected by Hydra with the key named, and a value of the wrong type likewise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING


@dataclass
class FrameworkConfig:
    _target_: str = MISSING
    name: str = MISSING
    # how `ddlbench run` starts ranks on one machine: torchrun | horovodrun | mpirun | deepspeed
    local_launcher: str = "torchrun"


@dataclass
class DDPConfig(FrameworkConfig):
    backend: str = "auto"  # auto: nccl on GPU, gloo on CPU
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = True
    static_graph: bool = False
    find_unused_parameters: bool = False


@dataclass
class HorovodConfig(FrameworkConfig):
    fusion_threshold_mb: float = 64.0
    cycle_time_ms: float = 1.0
    fp16_compression: bool = False
    adasum: bool = False
    backward_passes_per_step: int = 1
    hierarchical_allreduce: bool = False
    controller: str = "gloo"  # gloo | mpi (how the local launcher starts ranks)
    timeline: bool = False


@dataclass
class DeepSpeedConfig(FrameworkConfig):
    zero_stage: int = 0
    reduce_bucket_size: int = 500_000_000
    allgather_bucket_size: int = 500_000_000
    overlap_comm: bool = False
    contiguous_gradients: bool = True
    gradient_accumulation_steps: int = 1
    initial_scale_power: int = 16  # fp16 dynamic loss scaling starts at 2**this
    wall_clock_breakdown: bool = False


@dataclass
class LoaderConfig:
    _target_: str = MISSING
    name: str = MISSING
    needs_data: bool = True  # synthetic reads nothing


@dataclass
class SyntheticLoaderConfig(LoaderConfig):
    num_batches: int = 4  # distinct pre-built batches cycled through (kept on the device)
    samples_per_epoch: int = 12800  # virtual dataset size, for epochs and the sharding contract


@dataclass
class NativeLoaderConfig(LoaderConfig):
    num_workers: int = 2
    pin_memory: bool = True
    persistent_workers: bool = True
    prefetch_factor: int = 2
    shuffle: bool = True
    augment: bool = True  # RandomResizedCrop + flip; False: resize + centre crop (deterministic)
    timeout_s: float = 120.0  # a stuck worker fails the run instead of hanging it


@dataclass
class DaliLoaderConfig(LoaderConfig):
    reader: str = "file"  # file | tfrecord
    decoder_device: str = "auto"  # auto: mixed on GPU, cpu otherwise
    hw_decoder_load: float = 0.65
    num_threads: int = 4
    prefetch_queue_depth: int = 2
    shuffle: bool = True
    augment: bool = True


@dataclass
class ModelConfig:
    arch: str = MISSING  # resnet | vgg | mobilenet_v2 | simple_cnn
    depth: int | None = None  # resnet: 18|34|50|101|152; vgg: 11|13|16|19
    num_classes: int = 1000
    image_size: int = 224
    compile: bool = False  # torch.compile the model


@dataclass
class PrecisionConfig:
    name: str = MISSING
    amp_dtype: str | None = None  # None (fp32) | bfloat16 | float16
    channels_last: bool = False


@dataclass
class SystemConfig:
    name: str = MISSING
    device: str = "cpu"  # cpu | cuda
    ranks_per_node: int = 1  # processes per node (= GPUs per node on GPU systems)
    gpus_per_node: int = 0
    cpus_per_rank: int = 1
    partition: str | None = None
    account: str | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class OptimConfig:
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4


@dataclass
class DataConfig:
    path: str | None = None  # ImageFolder root (JPEG) or TFRecord folder, for loaders that read


@dataclass
class RunConfig:
    root: str = "runs"
    campaign: str = "default"
    repeat: int = 0
    per_gpu_batch: int = 32
    warmup_steps: int = 5
    steps: int = 20  # measured steps after warm-up; ignored when epochs is set
    epochs: int | None = None
    seed: int = 0
    log_every: int = 10  # rank-0 progress line every N steps; 0: none
    save_params: bool = False  # write params_rank<R>.pt at the end (equivalence tests)
    dir: str | None = None  # explicit run directory; default derived from the config


@dataclass
class Config:
    framework: Any = MISSING
    loader: Any = MISSING
    model: ModelConfig = MISSING
    precision: PrecisionConfig = MISSING
    system: SystemConfig = MISSING
    experiment: Any = None
    optim: OptimConfig = field(default_factory=OptimConfig)
    data: DataConfig = field(default_factory=DataConfig)
    run: RunConfig = field(default_factory=RunConfig)


def register() -> None:
    """Put every schema in the ConfigStore (idempotent)."""
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)
    for group, name, node in [
        ("framework", "ddp_schema", DDPConfig),
        ("framework", "horovod_schema", HorovodConfig),
        ("framework", "deepspeed_schema", DeepSpeedConfig),
        ("loader", "synthetic_schema", SyntheticLoaderConfig),
        ("loader", "native_schema", NativeLoaderConfig),
        ("loader", "dali_schema", DaliLoaderConfig),
        ("model", "model_schema", ModelConfig),
        ("precision", "precision_schema", PrecisionConfig),
        ("system", "system_schema", SystemConfig),
    ]:
        cs.store(group=group, name=name, node=node)
