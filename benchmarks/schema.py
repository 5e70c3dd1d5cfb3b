"""Dataclass schemas for every config group, registered in Hydra's ConfigStore.

Each option YAML in conf/ starts with `defaults: [<group>_schema, _self_]`, so a misspelt key is
rejected by Hydra with the key named, and a value of the wrong type likewise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import II, MISSING


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
    wrap_single_rank: bool = False  # wrap in DDP even at world size 1 (measures DDP's own overhead)
    # time the all-reduce in a comm hook (total + exposed): auto = on CPU only (it costs a few % on a GPU:
    # docs/breakdown.md); off: DDP's own hook
    comm_timer: str = "auto"


@dataclass
class HorovodConfig(FrameworkConfig):
    fusion_threshold_mb: float = 64.0
    cycle_time_ms: float = 1.0
    fp16_compression: bool = False
    adasum: bool = False
    backward_passes_per_step: int = 1
    hierarchical_allreduce: bool = False
    # auto: what the launcher set up (horovodrun --gloo: Gloo; mpirun/srun: MPI) | gloo | mpi
    controller: str = "auto"
    timeline: bool = False  # Horovod timeline (rank 0): HOROVOD_TIMELINE or ./horovod_timeline.json
    # time the exposed wait in synchronize(): auto = on CPU only (on CUDA it costs a stream sync per step)
    comm_timer: str = "auto"


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
    # max global gradient norm; 0 = no clipping, as DDP and Horovod (DeepSpeed's own default is 1.0)
    gradient_clipping: float = 0.0
    # per-step collective time from DeepSpeed's comms logger, which blocks after every collective:
    # auto = on for CPU (gloo blocks anyway), off on GPU; on | off
    comm_timer: str = "auto"
    # autocast: fp32 weights + torch.autocast, as DDP (ZeRO-0 keeps channels_last weights);
    # engine: DeepSpeed's bf16/fp16 weights with fp32 master copies (flattened, NCHW)
    mixed_precision: str = "autocast"
    # with mixed_precision=autocast: fp32 reduces every gradient in fp32, as DDP; autocast lets DeepSpeed
    # reduce Conv/Linear gradients in the autocast dtype at ZeRO >= 1 (its default: half the bytes)
    reduce_dtype: str = "fp32"
    # DeepSpeed's name for the per-GPU batch: follows run.per_gpu_batch (one source of truth)
    train_micro_batch_size_per_gpu: int = II("run.per_gpu_batch")


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
    reader: str = "file"  # file (ImageFolder JPEGs) | tfrecord (data.path/*.tfrecord + .idx DALI index files)
    decoder_device: str = "auto"  # auto: mixed on GPU, cpu otherwise | mixed | cpu
    hw_decoder_load: float = 0.65  # share of images for the hardware JPEG decoder (mixed only)
    num_threads: int = 4  # DALI CPU worker threads per rank
    prefetch_queue_depth: int = 4  # batches DALI prepares ahead
    shuffle: bool = True  # reader random_shuffle (global list shuffle + a buffer of initial_fill samples)
    augment: bool = True  # random resized crop + flip; False: resize 256/224 + centre crop
    seed: int | None = None  # None: run.seed; each rank adds its rank (augmentations differ per rank)
    stick_to_shard: bool = False  # False: shards rotate over ranks each epoch (every rank sees all data)
    initial_fill: int = 1024  # reader shuffle buffer, in samples
    zero_copy: bool = True  # GPU: the model reads DALI's output buffers (DLPack); False: a copy per batch


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
    env: dict[str, str] = field(default_factory=dict)  # set for every rank (NCCL_*, OMP_NUM_THREADS, ...)
    # --- batch systems (slurm/run.sh, ddlbench campaign) ---
    launcher: str = "srun"  # how ranks start in a Slurm job: srun (one task per rank) | mpirun
    mpi: str = "pmix"  # srun --mpi=<plugin>; see `srun --mpi=list` on the site
    cpu_bind: str | None = None  # srun --cpu-bind=<value> (cores, map_ldom:...); local runs: cores (each rank binds
    # itself to its share of the node's CPUs) or None (no binding; srun: the site's default)
    time_limit: str = "00:30:00"  # sbatch --time for one campaign job
    max_nodes: int | None = None  # campaign cells needing more nodes are reported impossible
    master_addr_suffix: str = ""  # appended to the first host name (JUWELS: "i" selects the InfiniBand address)
    sbatch_args: list[str] = field(default_factory=list)  # extra sbatch flags, e.g. [--constraint=a100]
    mpirun_args: list[str] = field(default_factory=list)  # extra mpirun flags (launcher: mpirun)


@dataclass
class CampaignConfig:
    """A sweep (experiment files' `campaign:` key): every combination of `axes` x `gpus` x repeats."""
    gpus: list[int] = MISSING  # world sizes (ranks = GPUs on GPU systems)
    axes: dict[str, list[Any]] = field(default_factory=dict)  # override group/key -> values, e.g. framework: [ddp]
    repeats: int = 1


@dataclass
class OptimConfig:
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4


@dataclass
class DataConfig:
    path: str | None = None  # ImageFolder root (JPEG) or TFRecord folder, for loaders that read
    # page-cache state of data.path when the run starts (Stash disk stall): warm (as found) | cold (evicted first)
    cache: str = "warm"
    # how a cold cache is made: auto (drop_caches where permitted, else fadvise) | drop_caches | fadvise
    cache_evict: str = "auto"


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
    # torch.profiler window [first, last] (global step indexes, inclusive): traces in <run dir>/trace/
    profile_steps: list[int] | None = None
    telemetry_hz: float = 0.0  # NVML/psutil samples per second into telemetry_rank<R>.jsonl; 0: off


@dataclass
class Config:
    framework: Any = MISSING
    loader: Any = MISSING
    model: ModelConfig = MISSING
    precision: PrecisionConfig = MISSING
    system: SystemConfig = MISSING
    experiment: Any = None
    campaign: CampaignConfig | None = None  # only `ddlbench campaign` reads it
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
