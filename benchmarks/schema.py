"""The root config and the run-wide groups (run, system, data, optim, precision), and the registration of
every schema in Hydra's ConfigStore. Torch-free.

The adapters' own groups are declared next to the adapters, torch-free (benchmarks/adapter_config.py
says why): framework options in benchmarks/frameworks/configs.py, loaders in
benchmarks/loaders/configs.py, the model in benchmarks/models/configs.py. Each option YAML in conf/
starts with `defaults: [<schema>, _self_]`, so a misspelt key is rejected by Hydra with the key
named, a value of the wrong type likewise, and a value outside a closed set (a `Choice`) with the
allowed values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from benchmarks.adapter_config import Choice
from benchmarks.data.coldcache import CacheEvict, CacheState
from benchmarks.frameworks import configs as framework_configs
from benchmarks.loaders import configs as loader_configs
from benchmarks.models.configs import ModelConfig
from benchmarks.optim_configs import OptimConfig
from launchers.programs import SlurmLauncher


class AmpDtype(Choice):
    """The autocast dtype of precision=amp_*; fp32 runs have none (null)."""

    bfloat16 = "bfloat16"
    float16 = "float16"


class TraceMode(Choice):
    """run.trace: the sampled profiler window. auto = on for GPU runs, off on CPU (a CPU rank's profiler
    costs more of a small step, and the phase timers already see gloo's collectives there)."""

    auto = "auto"
    on = "on"
    off = "off"

    def enabled(self, device_type: str) -> bool:
        return device_type == "cuda" if self is TraceMode.auto else self is TraceMode.on


class Device(Choice):
    """system.device: where the ranks compute."""

    cpu = "cpu"
    cuda = "cuda"


@dataclass
class PrecisionConfig:
    name: str = MISSING
    amp_dtype: AmpDtype | None = None  # None: fp32, no autocast
    channels_last: bool = False


class ContainerRuntime(Choice):
    """system.container.runtime: what the ranks run inside (launchers/container.py); none: the host's own Python."""

    none = "none"
    apptainer = "apptainer"
    singularity = "singularity"
    pyxis = "pyxis"
    podman = "podman"


@dataclass
class ContainerConfig:
    """system.container: the image every rank runs in (docs/containers.md). The software environment, like the
    package versions: recorded in meta.json (`container`), never part of a run's identity (cell_identity.NOT_IDENTITY)."""

    runtime: ContainerRuntime = ContainerRuntime.none
    # apptainer, singularity: a .sif file; podman: an image reference (localhost/ddlbench:25.01); pyxis: an enroot
    # URI (nvcr.io#nvidia/pytorch:25.01-py3) or a .sqsh file
    image: str | None = None
    # host[:container[:opts]] paths besides the ones bound for the run (the run root, the project, data.path)
    binds: list[str] = field(default_factory=list)
    # names of the launching environment's variables passed in (podman passes none unless named; `NAME*` a prefix)
    env: list[str] = field(default_factory=list)
    args: list[str] = field(default_factory=list)  # extra flags of the runtime's run command (apptainer exec, ...)
    python: str = "python3"  # the Python inside the image that runs the launcher and the ranks


class Division(Choice):
    """system.mllog.submission_division: MLPerf's divisions (the checker sets its init time limit by it)."""

    closed = "closed"
    open = "open"


@dataclass
class MllogSubmissionConfig:
    """system.mllog: the submission keys an MLPerf log carries, which a site's profile knows and a run does not
    (benchmarks/mllog.py writes them where set; `results --check-mllog` lists those missing apart, docs/mfu.md).
    Not part of a run's identity (cell_identity.NOT_IDENTITY)."""

    submission_org: str | None = None  # who submits (e.g. the site or project)
    submission_platform: str | None = None  # the system, as MLPerf names it (e.g. 8xNVIDIA H100 SXM)
    submission_division: Division | None = None


@dataclass
class SystemConfig:
    name: str = MISSING
    device: Device = Device.cpu
    ranks_per_node: int = 1  # processes per node (= GPUs per node on GPU systems)
    # sbatch --gres=gpu:N; `devices`: the system.device values that use the key (validate refuses it elsewhere)
    gpus_per_node: int = field(default=0, metadata={"devices": (Device.cuda,)})
    cpus_per_rank: int = 1
    partition: str | None = None
    account: str | None = None  # sbatch --account
    account_required: bool = False  # the site bills every job to a project: campaign submit refuses without account
    prelude: list[str] = field(default_factory=list)  # shell lines a batch job runs before ddlbench (module load ...)
    # the Python a batch job's step (and, without a container, its ranks) runs on the nodes: a path they see
    # (a venv on a shared file system); None: the submitting interpreter (launchers/node_python.py warns when
    # that lies on the submitting host's own disk)
    python: str | None = None
    exclusive: bool = False  # sbatch --exclusive: whole nodes for each job
    env: dict[str, str] = field(default_factory=dict)  # set for every rank (NCCL_*, OMP_NUM_THREADS, ...)
    container: ContainerConfig = field(default_factory=ContainerConfig)  # the image the ranks run in
    mllog: MllogSubmissionConfig = field(default_factory=MllogSubmissionConfig)  # MLPerf's submission keys
    # --- batch systems (slurm/run.sh, ddlbench campaign) ---
    launcher: SlurmLauncher = SlurmLauncher.srun  # how ranks start in a Slurm job (launchers/programs/): srun, one
    # task per rank, or mpirun
    mpi: str = "pmix"  # srun --mpi=<plugin>; see `srun --mpi=list` on the site
    cpu_bind: str | None = None  # srun --cpu-bind=<value> (cores, map_ldom:...); local runs: cores (each rank binds
    # itself to its share of the node's CPUs) or None (no binding; srun: the site's default)
    time_limit: str = "00:30:00"  # sbatch --time for one campaign job
    max_nodes: int | None = None  # campaign cells needing more nodes are reported impossible
    master_addr_suffix: str = ""  # appended to the first host name (JUWELS: "i" selects the InfiniBand address)
    sbatch_args: list[str] = field(default_factory=list)  # extra sbatch flags, e.g. [--constraint=a100]
    mpirun_args: list[str] = field(default_factory=list)  # extra mpirun flags (launcher: mpirun)
    # --- several hosts without a scheduler (`ddlbench run` on the first; launchers/hosts.py) ---
    hosts: list[str] = field(default_factory=list)  # ranks_per_node ranks on each, e.g. [node1,node2]
    hostfile: str | None = None  # or the hosts as lines '<host> slots=<ranks per host>'
    # --- node-local staging (data.stage=node_local; launchers/lifecycle/staging.py) ---
    # the node's own disk the data set is copied to: a path, or an environment variable expanded on the node
    # ('$SLURM_TMPDIR', '$TMPDIR'); null: data.stage=node_local is refused
    local_scratch: str | None = None
    local_scratch_gb: float | None = None  # its size per node, for planning (campaign plan refuses what won't fit)
    # the network, for `ddlbench predict` where no commbench file is given (analysis/predict/network.py): per level
    # (intra: one node, inter: across nodes) the bus bandwidth and the latency of one latency step, as
    # {intra,inter}_busbw_gb_s and {intra,inter}_latency_us; never part of a run's identity
    network: dict[str, float] = field(default_factory=dict)


@dataclass
class CampaignConfig:
    """A sweep (experiment files' `campaign:` key): every combination of `axes` x `gpus` x repeats."""

    gpus: list[int] = MISSING  # world sizes (ranks = GPUs on GPU systems)
    axes: dict[str, list[Any]] = field(default_factory=dict)  # override group/key -> values, e.g. framework: [ddp]
    repeats: int = 1


class Stage(Choice):
    """data.stage: where the loaders read the data set from."""

    none = "none"  # data.path itself (the shared file system)
    node_local = "node_local"  # a copy on each node's local scratch, made at the run's start


def staging_enabled(data) -> bool:
    """Whether a run stages its data (data.stage=node_local): the one test of it."""
    return str(data.get("stage", Stage.none)) == Stage.node_local


@dataclass
class DataConfig:
    path: str | None = None  # ImageFolder root (JPEG) or TFRecord folder, for loaders that read
    # page-cache state of data.path when the run starts (Stash disk stall): warm (as found) | cold (evicted first)
    cache: CacheState = CacheState.warm
    # how a cold cache is made: auto (drop_caches where permitted, else fadvise) | drop_caches | fadvise
    cache_evict: CacheEvict = CacheEvict.auto
    # where the loaders read it: none (data.path) | node_local (each node's copy on system.local_scratch, made
    # at the run's start and counted in its startup_s: docs/staging.md)
    stage: Stage = Stage.none
    # validation (benchmarks/evaluate.py): a held-out folder of the same layout, or a share of data.path
    # held out by a fixed permutation (the same split in every run); one of the two, or neither
    val_path: str | None = None
    val_split: float = 0.0


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
    # the sampled trace window (benchmarks/profiling.py): run.trace_steps profiled steps after the measured
    # ones on every rank, reduced on the rank to breakdown_rank<R>.json; not measured. Ignored when
    # run.profile_steps sets a window
    trace: TraceMode = TraceMode.auto
    trace_steps: int = 5
    keep_trace: bool = False  # keep the sampled window's raw trace/rank<R>.pt.trace.json.gz too
    telemetry_hz: float = 0.0  # NVML/psutil samples per second into telemetry_rank<R>.jsonl; 0: off
    # evaluate on the validation set every N optimizer steps (0: only after the last step, where there is
    # a validation set); top-1 / top-5 over all ranks into <run dir>/eval.jsonl, not in the throughput
    eval_every_steps: int = 0
    eval_every_epochs: int = 0  # or at the end of every N-th epoch (one cadence: the other is 0)
    # stop at the first evaluation whose top-1 (a fraction) reaches it, once the warm-up steps are done;
    # summary.json records time_to_target_s, samples_to_target, steps_to_target (summary_schema.TARGET_FIELDS)
    target_top1: float | None = None
    # a rank whose step does not advance for this many seconds stops the run as `hung`, every rank's stacks in
    # its directory (launchers/lifecycle/watchdog.py); null: derived (HANG_FACTOR x the median step, at least
    # HANG_FLOOR_S: 300 s on a GPU, 60 s on a CPU; before the first steps and in an evaluation, HANG_START_S:
    # 1200 s / 300 s); 0: never
    hang_timeout_s: float | None = None
    # end the run (failed) at the first NaN or infinite loss on any rank: one scalar all-reduce per step, a sync
    # that costs throughput, so benchmarks leave it off; off, a diverged run completes and names the step
    stop_on_nan: bool = False
    # set by `ddlbench stash run` (gpu1, node, nodes, warm, cold): the run is one of a Stash study's paired
    # runs, which the report pairs into stalls; not a setting of the run (cell_identity.NOT_IDENTITY)
    stash_role: str | None = None


@dataclass
class Config:
    framework: Any = MISSING  # an option of benchmarks/frameworks/configs.py, through conf/framework/*.yaml
    loader: Any = MISSING  # an option of benchmarks/loaders/configs.py, through conf/loader/*.yaml
    model: ModelConfig = MISSING
    precision: PrecisionConfig = MISSING
    system: SystemConfig = MISSING
    experiment: Any = None
    campaign: CampaignConfig | None = None  # only `ddlbench campaign` reads it
    optim: OptimConfig = field(default_factory=OptimConfig)
    data: DataConfig = field(default_factory=DataConfig)
    run: RunConfig = field(default_factory=RunConfig)


def register() -> None:
    """Put every schema in the ConfigStore (idempotent): the root, each adapter option's config as
    <option>_schema (framework and loader) or model_schema, and the run-wide groups."""
    if not OmegaConf.has_resolver(loader_configs.LOADER_CPUS_RESOLVER):
        OmegaConf.register_new_resolver(loader_configs.LOADER_CPUS_RESOLVER, loader_configs.loader_cpus)
    cs = ConfigStore.instance()
    if "config_schema.yaml" in cs.repo:  # storing turns every dataclass into a config again: 0.1 s a call
        return
    cs.store(name="config_schema", node=Config)
    for group, options in (("framework", framework_configs.CONFIGS), ("loader", loader_configs.CONFIGS)):
        for option, node in options.items():
            cs.store(group=group, name=f"{option}_schema", node=node)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="precision", name="precision_schema", node=PrecisionConfig)
    cs.store(group="system", name="system_schema", node=SystemConfig)
