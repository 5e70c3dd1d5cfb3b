"""The settings of every framework adapter (ddp, dp, fsdp, horovod, deepspeed) and their launch facts. Torch-free.

Kept apart from the adapter modules (which import torch at their top) so that Hydra's ConfigStore,
validate(), campaign planning and analysis (analysis/stash.py reads DDP's bucket default here) use
them without torch: see benchmarks/adapter_config.py. Each dataclass is the one home of its
defaults, its `name` and its adapter class (`_target_`); conf/framework/<name>.yaml only makes the option
selectable (its defaults list) and says in a comment what it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from omegaconf import II, MISSING, DictConfig, OmegaConf

from benchmarks.adapter_config import AdapterConfig, Choice, is_unset
from benchmarks.errors import ConfigError
from benchmarks.gradients import Bucket, Gradient, buckets
from launchers.programs import LocalLauncher  # how `ddlbench run` starts the ranks: launchers/programs/

MiB = 1024 * 1024
DDP_FIRST_BUCKET_BYTES = 1 * MiB  # torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES


class Rendezvous(Choice):
    """How a framework's ranks find each other (FrameworkConfig.RENDEZVOUS, a launch fact).

    torch: the adapter creates a torch.distributed group from the launcher's rank variables
    (benchmarks/distenv.py), so any launcher starts it and several such frameworks share one group
    (commbench sweeps them in one launch). own: the library joins its ranks itself (hvd.init():
    horovodrun's Gloo rendezvous or MPI), so only its own launchers start it, alone."""

    torch = "torch"
    own = "own"


class CommTimer(Choice):
    """framework.comm_timer: time the framework's collectives (total and exposed) per step.

    auto times them on CPU runs only: on CUDA every framework's timer costs throughput (docs/breakdown.md,
    docs/horovod.md), and the trace window (run.trace, on by default there) gives the breakdown instead."""

    auto = "auto"
    on = "on"
    off = "off"

    def enabled(self, device_type: str) -> bool:
        """Whether to time collectives on a device of this type ('cpu', 'cuda')."""
        return device_type == "cpu" if self is CommTimer.auto else self is CommTimer.on


class HorovodController(Choice):
    """Horovod's controller and CPU operations: auto = what the launcher set up (horovodrun --gloo:
    Gloo; mpirun/srun: MPI)."""

    auto = "auto"
    gloo = "gloo"
    mpi = "mpi"


class MixedPrecision(Choice):
    """DeepSpeed under precision=amp_*: autocast = fp32 weights + torch.autocast, as DDP (ZeRO-0 keeps
    channels_last weights); engine = DeepSpeed's bf16/fp16 weights with fp32 master copies (flattened, NCHW)."""

    autocast = "autocast"
    engine = "engine"


class ReduceDtype(Choice):
    """DeepSpeed with mixed_precision=autocast: fp32 reduces every gradient in fp32, as DDP; autocast lets
    DeepSpeed reduce Conv/Linear gradients in the autocast dtype at ZeRO >= 1 (its default: half the bytes)."""

    fp32 = "fp32"
    autocast = "autocast"


class ShardUnit(Choice):
    """framework.shard_unit (FSDP2): which modules get their own fully_shard group (one all-gather and one
    reduce-scatter each). children: every direct child of the model that holds parameters (ResNet's
    conv1, bn1, layer1-4, fc), then the root for the rest; blocks: every block of the model's repeated
    stacks (the members of a ModuleList or Sequential of at least two modules of one class: BERT's encoder
    layers, ResNet's residual blocks; a model without such a stack has none), then the root; root: the
    whole model as one group."""

    children = "children"
    blocks = "blocks"
    root = "root"


class FSDPMixedPrecision(Choice):
    """FSDP2 under precision=amp_*: policy = MixedPrecisionPolicy(param_dtype=the amp dtype): sharded fp32
    weights, all-gathered and computed in bf16/fp16 (torch.autocast stays on, as for every framework);
    autocast = fp32 weights all-gathered in fp32, torch.autocast alone, as DDP."""

    policy = "policy"
    autocast = "autocast"


class FSDPReduceDtype(Choice):
    """framework.reduce_dtype (FSDP2 with mixed_precision=policy): fp32 reduce-scatters gradients in fp32,
    as DDP; param reduces them in the amp dtype (half the bytes)."""

    fp32 = "fp32"
    param = "param"


@dataclass
class FrameworkConfig(AdapterConfig):
    """What every framework option has: the adapter class (`_target_`), its name and its local launcher."""

    GROUP: ClassVar[str] = "framework"
    # launch facts, read torch-free by the launchers: how the ranks find each other (a property of the
    # library) and which launcher starts them on one machine (a setting, framework.local_launcher)
    RENDEZVOUS: ClassVar[Rendezvous] = Rendezvous.torch
    # one process drives every local GPU (torch.nn.DataParallel) instead of one process per GPU
    SINGLE_PROCESS: ClassVar[bool] = False
    _target_: str = MISSING
    name: str = MISSING
    local_launcher: LocalLauncher = LocalLauncher.torchrun

    @classmethod
    def local_layout(cls, *, device: str, ranks_per_node: int) -> tuple[int, int]:
        """(processes, devices per process) on one node of system.ranks_per_node GPUs (or CPU ranks).

        One device per process, except a SINGLE_PROCESS framework: one process driving ranks_per_node
        GPUs, or the one CPU device (DataParallel has nothing to split over on a CPU). The run's world
        size, the g<W> of its directory name, is processes x devices: the GPUs it trains on."""
        if not cls.SINGLE_PROCESS:
            return ranks_per_node, 1
        return 1, ranks_per_node if device == "cuda" else 1

    def gradient_messages(self, gradients: Sequence[Gradient], *, amp: bool) -> list[Bucket]:
        """The messages this framework sends for the gradients of one step (given in the order backward
        completes them; amp: the run computes under autocast), each ready when its last gradient is: what
        analysis/predict/ times and analysis/stash.py counts."""
        raise ValueError(f"no gradient messages for framework {self.name}")

    def shards_tensors(self) -> bool:
        """Whether the optimizer sees flattened or sharded tensors instead of the model's layers."""
        return False


@dataclass
class DDPConfig(FrameworkConfig):
    """PyTorch DistributedDataParallel."""

    _target_: str = "benchmarks.frameworks.ddp.DDP"
    name: str = "ddp"
    backend: str = "auto"  # auto: nccl on GPU, gloo on CPU; else any torch.distributed backend name
    bucket_cap_mb: float = 25.0
    gradient_as_bucket_view: bool = True
    static_graph: bool = False
    find_unused_parameters: bool = False
    wrap_single_rank: bool = False  # wrap in DDP even at world size 1 (measures DDP's own overhead)
    # on: an all-reduce comm hook timing every bucket (total + exposed); off: DDP's own hook
    comm_timer: CommTimer = CommTimer.auto
    # torch.distributed.optim.ZeroRedundancyOptimizer: each rank keeps the optimizer state of 1/W of the
    # parameters and broadcasts its updated shard after step() (ZeRO-1 beside DDP's all-reduce)
    zero_optimizer: bool = False

    def gradient_messages(self, gradients: Sequence[Gradient], *, amp: bool) -> list[Bucket]:
        """DDP's buckets: greedy in ready order, the first capped at 1 MiB so the first all-reduce starts
        early (torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES), the others at bucket_cap_mb."""
        cap = int(self.bucket_cap_mb * MiB)
        return buckets(gradients, cap_bytes=cap, first_cap_bytes=min(cap, DDP_FIRST_BUCKET_BYTES))


@dataclass
class DPConfig(FrameworkConfig):
    """torch.nn.DataParallel: one process drives system.ranks_per_node GPUs (scatter the batch, replicate
    the model every step, gather outputs on GPU 0); on a CPU one process and no split."""

    SINGLE_PROCESS: ClassVar[bool] = True
    _target_: str = "benchmarks.frameworks.dp.DP"
    name: str = "dp"


@dataclass
class FSDPConfig(FrameworkConfig):
    """PyTorch FSDP2 (torch.distributed.fsdp.fully_shard): parameters, gradients and optimizer state sharded
    over the ranks; all-gather before forward/backward, reduce-scatter after backward."""

    _target_: str = "benchmarks.frameworks.fsdp.FSDP"
    name: str = "fsdp"
    backend: str = "auto"  # auto: nccl on GPU, gloo on CPU; else any torch.distributed backend name
    # True: free the all-gathered parameters after forward and gather them again for backward (ZeRO-3);
    # False: keep them until backward ends (ZeRO-2: more memory, one all-gather fewer per step)
    reshard_after_forward: bool = True
    shard_unit: ShardUnit = ShardUnit.children
    mixed_precision: FSDPMixedPrecision = FSDPMixedPrecision.policy
    reduce_dtype: FSDPReduceDtype = FSDPReduceDtype.fp32

    def shards_tensors(self) -> bool:
        return True

    def gathers_half(self, *, amp: bool) -> bool:
        """Whether parameters are all-gathered in the amp dtype, 2 bytes an element: a precision policy under
        AMP (benchmarks/frameworks/fsdp.py mixed_precision_policy)."""
        return amp and self.mixed_precision == FSDPMixedPrecision.policy

    def reduces_half(self, *, amp: bool) -> bool:
        """Whether gradients are reduce-scattered in the amp dtype: the policy with reduce_dtype=param."""
        return self.gathers_half(amp=amp) and self.reduce_dtype == FSDPReduceDtype.param


@dataclass
class HorovodConfig(FrameworkConfig):
    """Horovod 0.28.1: gradients all-reduced by hvd.DistributedOptimizer."""

    RENDEZVOUS: ClassVar[Rendezvous] = Rendezvous.own  # hvd.init(): horovodrun's Gloo rendezvous, or MPI
    _target_: str = "benchmarks.frameworks.horovod.Horovod"
    name: str = "horovod"
    local_launcher: LocalLauncher = LocalLauncher.horovodrun  # or mpirun (MPI controller)
    fusion_threshold_mb: float = 128.0  # Horovod's own default since 0.21 (HOROVOD_FUSION_THRESHOLD)
    cycle_time_ms: float = 1.0
    fp16_compression: bool = False
    adasum: bool = False
    backward_passes_per_step: int = 1
    hierarchical_allreduce: bool = False
    controller: HorovodController = HorovodController.auto
    timeline: bool = False  # Horovod timeline (rank 0): HOROVOD_TIMELINE or ./horovod_timeline.json
    # on: the exposed wait in synchronize() (on CUDA after a stream sync per step)
    comm_timer: CommTimer = CommTimer.auto

    def check(self) -> None:
        self.at_least("backward_passes_per_step", 1)
        self.at_least("fusion_threshold_mb", 0)
        if self.cycle_time_ms <= 0:
            raise ConfigError(f"framework.cycle_time_ms={self.cycle_time_ms} must be > 0 (Horovod's default: 1.0)")

    def gradient_messages(self, gradients: Sequence[Gradient], *, amp: bool) -> list[Bucket]:
        """Tensor fusion: gradients fused up to fusion_threshold_mb."""
        return buckets(gradients, cap_bytes=max(1, int(self.fusion_threshold_mb * MiB)))


@dataclass
class DeepSpeedConfig(FrameworkConfig):
    """DeepSpeed's engine with ZeRO stages 0-3."""

    _target_: str = "benchmarks.frameworks.deepspeed.DeepSpeed"
    name: str = "deepspeed"
    zero_stage: int = 0  # 0: all-reduce after backward, 1: + sharded optimizer state, 2: + gradients, 3: + parameters
    reduce_bucket_size: int = 500_000_000  # elements per gradient reduce bucket (ZeRO >= 1)
    allgather_bucket_size: int = 500_000_000  # elements per parameter all-gather bucket (ZeRO 1-2)
    # reduce (ZeRO-1/2) or reduce-scatter (ZeRO-3) gradients during backward; None: DeepSpeed's own default,
    # which overlaps at ZeRO-3 only (DeepSpeedZeroConfig.overlap_comm_valid)
    overlap_comm: bool | None = None
    contiguous_gradients: bool = True
    gradient_accumulation_steps: int = 1
    initial_scale_power: int = 16  # fp16 dynamic loss scaling starts at 2**this
    wall_clock_breakdown: bool = False
    # max global gradient norm; 0 = no clipping, as DDP and Horovod (DeepSpeed's own default is 1.0)
    gradient_clipping: float = 0.0
    # on: DeepSpeed's comms logger, which blocks after every collective (gloo on CPU blocks anyway)
    comm_timer: CommTimer = CommTimer.auto
    mixed_precision: MixedPrecision = MixedPrecision.autocast
    reduce_dtype: ReduceDtype = ReduceDtype.fp32
    # DeepSpeed's name for the per-GPU batch: follows run.per_gpu_batch (one source of truth)
    train_micro_batch_size_per_gpu: int = II("run.per_gpu_batch")

    ZERO_STAGES: ClassVar[tuple[int, ...]] = (0, 1, 2, 3)

    def shards_tensors(self) -> bool:
        return self.zero_stage >= 1  # the optimizer sees flat partitions of the parameters

    def halves_conv_linear(self, *, amp: bool) -> bool:
        """Whether Conv/Linear gradients are reduced in the autocast dtype (2 bytes an element): under AMP with
        mixed_precision=autocast, reduce_dtype=autocast and ZeRO >= 1 (ZeRO-0 reduces fp32; ds_config in
        benchmarks/frameworks/deepspeed.py)."""
        return amp and self.mixed_precision == "autocast" and self.reduce_dtype == "autocast" and self.zero_stage >= 1

    def gradient_messages(self, gradients: Sequence[Gradient], *, amp: bool) -> list[Bucket]:
        """The reduce bucket of reduce_bucket_size elements; with halves_conv_linear one bucket per
        communication dtype (ZeRO's ipg_buckets), each of reduce_bucket_size elements."""
        elements = self.reduce_bucket_size
        if not self.halves_conv_linear(amp=amp):
            return buckets(gradients, cap_bytes=elements * 4)
        half = [Gradient(g.name, g.bytes // 2, g.ready_fraction, True) for g in gradients if g.lower_precision_safe]
        full = [g for g in gradients if not g.lower_precision_safe]
        both = buckets(half, cap_bytes=elements * 2) + buckets(full, cap_bytes=elements * 4)
        return sorted(both, key=lambda b: b.ready_fraction)

    # DeepSpeed's stage3_param_persistence_threshold, which the adapter leaves at its default: at ZeRO-3 a
    # parameter of at most this many elements is kept whole on every rank (gathered once, after each step)
    # instead of being gathered before each forward and backward
    ZERO3_PERSISTENCE_ELEMENTS: ClassVar[int] = 100_000

    def zero3_persists(self, elements: int) -> bool:
        """Whether ZeRO-3 keeps a parameter of this many elements whole (ZERO3_PERSISTENCE_ELEMENTS)."""
        return self.zero_stage == 3 and elements <= self.ZERO3_PERSISTENCE_ELEMENTS

    def fp32_weights(self, *, amp: bool) -> bool:
        """Whether the engine keeps fp32 weights: no mixed precision, or autocast over fp32 weights
        (mixed_precision=engine holds bf16/fp16 weights)."""
        return not amp or self.mixed_precision == "autocast"

    def overlaps_comm(self) -> bool:
        """Whether ZeRO reduces gradients during backward: overlap_comm as set, else DeepSpeed's default."""
        return self.zero_stage == 3 if self.overlap_comm is None else self.overlap_comm

    def reduce_note(self) -> str:
        """When the gradients are reduced, in words (meta.json, rank 0's first line)."""
        if self.zero_stage == 0:
            return "gradients are all-reduced after backward (not overlapped with it)"
        overlap = "overlapped with backward" if self.overlaps_comm() else "not overlapped (overlap_comm=false)"
        return f"gradients are reduced in buckets during backward, {overlap}"

    def check(self) -> None:
        if self.zero_stage not in self.ZERO_STAGES:
            raise ConfigError(
                f"framework.zero_stage={self.zero_stage} is not allowed; choose 0, 1, 2 or 3 "
                "(e.g. framework.zero_stage=1)"
            )
        for name in (
            "gradient_accumulation_steps",
            "reduce_bucket_size",
            "allgather_bucket_size",
            "train_micro_batch_size_per_gpu",
        ):
            self.at_least(name, 1)
        if self.gradient_clipping < 0:
            raise ConfigError(f"framework.gradient_clipping={self.gradient_clipping} must be >= 0 (0 = no clipping)")


# every framework option's config, in the order `ddlbench` lists them (benchmarks/schema.py registers them)
CONFIGS: dict[str, type[FrameworkConfig]] = {
    c.name: c for c in (DDPConfig, DPConfig, FSDPConfig, HorovodConfig, DeepSpeedConfig)
}


def framework_config(framework: Mapping[str, Any]) -> FrameworkConfig:
    """The typed config of a framework node: a composed config's, or a run's recorded one (a plain mapping,
    perhaps of an older run that lacks some keys: those take their defaults). Interpolations left in it
    (${run.per_gpu_batch}) keep their field's default."""
    if isinstance(framework, DictConfig):
        framework = OmegaConf.to_container(framework, resolve=False)
    cls = CONFIGS[str(framework["name"])]
    given = {f.name: framework[f.name] for f in fields(cls) if f.name in framework and not is_unset(framework[f.name])}
    return cls(**given)


def node_layout(cfg: Any) -> tuple[int, int]:
    """(processes, devices per process) on each node for a composed config: its framework's
    FrameworkConfig.local_layout over system.device and system.ranks_per_node (cmd_run, the app, Slurm)."""
    return CONFIGS[cfg.framework.name].local_layout(device=cfg.system.device, ranks_per_node=cfg.system.ranks_per_node)
