"""The run directory: its identity, its name, its record formats and its state. Torch-free.

Everything that says which configuration a number belongs to lives here, and only here: the app
names its directory with it, `campaign` and `stash` plan with it, the Slurm launch checks it, and
analysis groups runs with it.

- The run key (`identity`) is every resolved setting of the run (config.yaml, flattened to dotted
  keys) plus its world size and node count, minus the few keys that never change a measurement
  (NOT_IDENTITY: where the run is written, which repeat it is, progress output). Two runs with the same
  key are repeats of one cell; any other difference makes another cell.
- The directory name is readable and exact: `<framework>-<loader>-<model>-<precision>-g<W>-n<N>-b<B>-
  <cell hash>-r<repeat>`; the hash (`cell_hash`) is 8 hex digits of SHA-256 over the key.
- STEP_FIELDS is the per-step record the loop writes to rank<R>.jsonl and analysis reads.
- `end_record` is what each rank writes when it stops (end_rank<R>.json: its peak device memory, its error).
- `completed_summary`, `failed_summary`, `interrupted_summary` build summary.json; `state` reads it.
- `throughput` is THE throughput definition (docs/analysis.md), over the rank logs.
"""

from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks import liveness

SCHEMA_VERSION = 1
SUMMARY = "summary.json"
META = "meta.json"
CONFIG = "config.yaml"
HASH_DIGITS = 8

# settings that never change what is measured: where a run is written, which repeat it is, what it
# prints and keeps (run.keep_trace: the raw trace beside its breakdown), the campaign grid that planned
# it, the Slurm bookkeeping of its job (account, time limit, node cap) and the hosts it ran on. system.ranks_per_node is the
# local layout: the run key holds world_size and num_nodes instead, which is what the ranks really were.
NOT_IDENTITY = (
    "run.repeat",
    "run.dir",
    "run.root",
    "run.log_every",
    "run.save_params",
    "run.keep_trace",
    "run.stash_role",  # which of a Stash study's paired runs it is: the pairing, not the cell
    "campaign",
    "experiment",
    "hydra",
    "system.ranks_per_node",
    "system.account",
    "system.time_limit",
    "system.max_nodes",
    "system.network",  # a description of the machine for `ddlbench predict`, not a setting of the run
    "system.hosts",  # which machines ran it: the run key holds how many (num_nodes), as under Slurm
    "system.hostfile",
    "system.python",  # which interpreter path started the ranks: where the software is, not what was run
    "run.hang_timeout_s",  # when a stuck run is stopped: not what it measures
    # the image the ranks ran in is their software environment, as the package versions are: recorded in meta.json
    # (`container`: runtime, its version, image, digest) and compared from there, not a setting that parts cells
    "system.container",
    "system.mllog",  # MLPerf's submission keys (who, which platform, which division): a label, not a setting
    # where a node's staged copy goes and how large that disk is (data.stage=node_local): where, not what; the
    # cell holds data.stage itself
    "system.local_scratch",
    "system.local_scratch_gb",
)
# settings added after runs were recorded without them, each with the value at which a run runs as those did:
# at that value the setting is left out of the run key (and of the tables' settings: analysis/load/runs.py), so a
# run made before the setting existed and one made with it at that value are one cell; any other value is a cell
# of its own (run.stop_on_nan=true all-reduces a flag every step, which costs throughput)
AS_BEFORE: dict[str, Any] = {
    "run.stop_on_nan": False,
    "data.stage": "none",  # reading data.path itself, as every run did before node-local staging
    "model.compile_mode": "default",  # torch.compile's own default, as model.compile=true ran before the key
    "optim.fused": False,  # torch's foreach kernels, as every run did before the key
}


def as_before(key: str, value: Any) -> bool:
    """Whether `key` is a setting added later (AS_BEFORE) holding the value that runs as before it existed."""
    # isinstance: a Choice (a str Enum) of a composed config is its value's str, as config.yaml has it
    return key in AS_BEFORE and isinstance(value, type(AS_BEFORE[key])) and value == AS_BEFORE[key]


# keys of the run key that are not config settings
SIZE_KEYS = ("world_size", "num_nodes")

# the per-step record of rank<R>.jsonl (after a header line {"kind": "header", "schema_version", ...}):
# field -> type. warmup and profiled steps are logged but not measured.
STEP_FIELDS: dict[str, str] = {
    "step": "int64",
    "epoch": "int64",
    "step_in_epoch": "int64",
    "samples": "int64",
    "warmup": "bool",
    "profiled": "bool",
    "comm_s": "float64",
    "comm_exposed_s": "float64",
    "data_s": "float64",
    "fwd_s": "float64",
    "bwd_s": "float64",
    "opt_s": "float64",
    "step_s": "float64",
    "host_data_s": "float64",
    "host_step_s": "float64",
    "loss": "float64",  # the step's training loss (read once the step is done: no extra wait)
    "lr": "float64",  # the learning rate the step ran with (optim.schedule)
}
REQUIRED_STEP_FIELDS = ("step", "samples", "warmup", "step_s")
# eval.jsonl (benchmarks/evaluate.py, rank 0): one line per evaluation of the validation set
EVAL_FILE = "eval.jsonl"
EVAL_FIELDS: dict[str, str] = {
    "step": "int64",
    "epoch": "int64",
    "samples": "int64",
    "top1": "float64",
    "top5": "float64",
    "loss": "float64",
    "eval_s": "float64",
}
# written since evaluations carry the training progress (older eval.jsonl files lack them): the global
# training samples before the evaluation, seconds since the first training step (MLPerf's clock), and the
# epochs done (steps / steps per epoch: 2.5 is half-way through the third); `epoch` is the 0-based epoch
# of the last step before it
EVAL_OPTIONAL_FIELDS: dict[str, str] = {"train_samples": "int64", "train_s": "float64", "epochs": "float64"}
# mllog.txt (benchmarks/mllog.py, rank 0): MLPerf-style :::MLLOG events
MLLOG_FILE = "mllog.txt"
# end_rank<R>.json (end_record), written by each rank when it stops: field -> type; the peaks are null on a CPU
END_FIELDS: dict[str, str] = {
    "rank": "int64",
    "status": "str",
    "error": "str",
    "out_of_memory": "bool",
    "peak_allocated_bytes": "int64",
    "peak_reserved_bytes": "int64",
}
# summary.json's memory fields: the largest peak over the ranks, and each rank's (lists in rank order)
MEMORY_FIELDS = ("peak_allocated_bytes", "peak_reserved_bytes")
MEMORY_BY_RANK_FIELDS = tuple(f"{name}_by_rank" for name in MEMORY_FIELDS)
# a run directory's state (`state`): its summary's status, or, without a summary, whether its owner still lives
# (benchmarks/liveness.py: `running`, or `dead` once its launching process is gone or its heartbeat is stale)
STATES = ("completed", "failed", "interrupted", "hung", "running", "dead", "missing")
# what a run moved out of its cell's place into <campaign>/attic/ says (move_aside): when, by whom, why
ATTIC_REASON = "attic_reason.txt"
# the states of a run that ended without completing and said why in its summary: a retry of its cell moves it
# into <campaign>/attic/ (move_aside) and runs the cell again
RETRIED_STATES = frozenset({"failed", "interrupted", "hung"})
# progress_rank<R>.json (benchmarks/watchdog.py): the rank's step and phase, rewritten in place every few
# seconds while it runs; stacks_rank<R>.txt: its Python stacks, dumped when the run hung (read by people)
PROGRESS_FIELDS: dict[str, str] = {
    "rank": "int64",
    "host": "str",
    "pid": "int64",
    "step": "int64",  # the step the rank is in (0-based; the steps before it are done)
    "phase": "str",  # benchmarks/watchdog.py PHASES
    "beat": "float64",  # when the rank last wrote the file (time.time())
    "since": "float64",  # when it entered this step and phase (time.time())
    "limit_s": "float64",  # the hang limit in force then
    "hung": "bool",  # the rank saw no progress within limit_s
}


# --- identity ----------------------------------------------------------------------------------


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> {"a.b.c": value}; lists stay lists."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def is_identity_key(key: str) -> bool:
    return not any(key == k or key.startswith(f"{k}.") for k in NOT_IDENTITY)


def identity(settings: Mapping[str, Any], *, world_size: int, num_nodes: int) -> dict[str, Any]:
    """The run key: the identity settings (a resolved config, nested or already flattened) + the run's size."""
    flat = flatten(settings) if any(isinstance(v, Mapping) for v in settings.values()) else dict(settings)
    key = {k: v for k, v in flat.items() if is_identity_key(k) and not as_before(k, v)}
    key.update(world_size=int(world_size), num_nodes=int(num_nodes))
    return dict(sorted(key.items()))


def _canonical(value: Any) -> Any:
    # 2 and 2.0 are one setting (YAML and Hydra may disagree on which they write)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def key_hash(key: Mapping[str, Any]) -> str:
    """HASH_DIGITS hex digits of SHA-256 over the key as canonical JSON (sorted keys)."""
    text = json.dumps(
        {k: _canonical(v) for k, v in sorted(key.items())}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_DIGITS]


def cell_hash(settings: Mapping[str, Any], *, world_size: int, num_nodes: int) -> str:
    return key_hash(identity(settings, world_size=world_size, num_nodes=num_nodes))


# strong scaling holds the global batch, not the per-GPU one (DeepSpeed's micro batch mirrors run.per_gpu_batch)
PER_GPU_BATCH_KEYS = ("run.per_gpu_batch", "framework.train_micro_batch_size_per_gpu")


def group_hash(settings: Mapping[str, Any], *, world_size: int, mode: str = "weak") -> str:
    """The scaling curve a run belongs to: its run key without the size (weak scaling), or without the
    size and the per-GPU batch but with the global batch (strong scaling)."""
    key = {k: v for k, v in identity(settings, world_size=0, num_nodes=0).items() if k not in SIZE_KEYS}
    if mode == "strong":
        batch = key.get("run.per_gpu_batch")
        key = {k: v for k, v in key.items() if k not in PER_GPU_BATCH_KEYS}
        key["global_batch"] = None if batch is None else int(batch) * int(world_size)
    elif mode != "weak":
        raise ValueError(f"mode={mode!r}: use 'weak' or 'strong'")
    return key_hash(key)


def model_name(
    arch: str,
    depth: int | None,
    *,
    width: float | None = None,
    batch_norm: bool | None = None,
    residual: bool = True,
    size: str | None = None,
) -> str:
    """The name used in run directories and tables, from every key that shapes the network
    (benchmarks/models/configs.py): resnet50, resnet50_nobn, resnet50_noskip, vgg16, vgg16_bn,
    shufflenet_v2_x1_0, mobilenet_v2, bert_base, bert_large, retinanet. None is a record without the key:
    the family's own network (ResNet with BatchNorm, VGG without). Keys a family ignores do not show."""
    arch = str(arch)
    if arch == "bert" and size is not None:
        return f"{arch}_{size}"
    if arch == "shufflenet_v2" and width is not None:
        return f"{arch}_x{str(float(width)).replace('.', '_')}"
    if arch not in ("resnet", "vgg") or depth is None:
        return arch
    if arch == "vgg":
        return f"vgg{depth}{'_bn' if batch_norm else ''}"
    return f"resnet{depth}{'_nobn' if batch_norm is False else ''}{'_noskip' if residual is False else ''}"


def model_name_of(model: Mapping[str, Any]) -> str:
    """model_name of a model section (config.yaml's `model:`, a composed cfg.model)."""
    return model_name(
        model["arch"],
        model.get("depth"),
        width=model.get("width"),
        batch_norm=model.get("batch_norm"),
        residual=model.get("residual", True),
        size=model.get("size"),
    )


def dir_name(settings: Mapping[str, Any], *, world_size: int, num_nodes: int, repeat: int) -> str:
    """<framework>-<loader>-<model>-<precision>-g<W>-n<N>-b<B>-<cell hash>-r<repeat> of a resolved config."""
    flat = flatten(settings)
    model = model_name_of({k.removeprefix("model."): v for k, v in flat.items() if k.startswith("model.")})
    return (
        f"{flat['framework.name']}-{flat['loader.name']}-{model}-{flat['precision.name']}-g{world_size}"
        f"-n{num_nodes}-b{flat['run.per_gpu_batch']}-{cell_hash(flat, world_size=world_size, num_nodes=num_nodes)}"
        f"-r{repeat}"
    )


def run_dir(settings: Mapping[str, Any], *, world_size: int, num_nodes: int) -> Path:
    """run.dir when set, else <run.root>/<run.campaign>/<dir_name> (the same on every host of a job)."""
    flat = flatten(settings)
    if flat.get("run.dir"):
        return Path(flat["run.dir"])
    name = dir_name(flat, world_size=world_size, num_nodes=num_nodes, repeat=int(flat["run.repeat"]))
    return Path(flat["run.root"]) / str(flat["run.campaign"]) / name


# --- state and summaries ---------------------------------------------------------------------


def holds_a_run(path: Path) -> bool:
    """Anything a run writes is there: it is never written over."""
    return path.is_dir() and any(p.name in (SUMMARY, META, CONFIG) or p.name.startswith("rank") for p in path.iterdir())


ATTIC = "attic"  # <campaign>/attic/: failed or interrupted runs moved out of their cell's place


def move_aside(path: Path, attic: Path, *, reason: str | None = None) -> Path:
    """Move a run directory that did not complete (failed, interrupted, hung, dead) into `attic` as
    <name>.<timestamp> (never lost, never counted in its cell's place), with ATTIC_REASON saying when, by
    whom and why; return where it went."""
    import socket
    import time

    attic.mkdir(parents=True, exist_ok=True)
    target = attic / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}"
    k = 1
    while target.exists():
        k += 1
        target = attic / f"{path.name}.{time.strftime('%Y%m%dT%H%M%S')}-{k}"
    path.rename(target)
    why = reason or state(target)
    try:
        (target / ATTIC_REASON).write_text(
            f"{now_iso()}: moved from {path} by pid {os.getpid()} on {socket.gethostname()}: {why}\n"
        )
    except OSError:
        pass  # kept without its note (a full disk): the move is what matters
    return target


def life(path: Path) -> liveness.Life:
    """Who holds a run directory without a summary and whether it lives (benchmarks/liveness.py)."""
    return liveness.examine(path)


def reap(path: Path, attic: Path, dead: liveness.Life) -> Path | None:
    """Move a dead run (`dead`: its life as judged) into `attic` with its reason; None when, looked at again,
    it is not the same dead run any more (another launch took its place meanwhile), so nothing moved."""
    if (path / SUMMARY).exists() or liveness.read_owner(path) != dead.owner:
        return None
    try:
        return move_aside(path, attic, reason=f"dead: {dead.says()}")
    except FileNotFoundError:
        return None  # another launch moved it first


def read_summary(path: Path) -> dict | None:
    """summary.json of a run directory, or None when there is none or it is unreadable."""
    try:
        summary = json.loads((path / SUMMARY).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return summary if isinstance(summary, dict) else None


def state(path: Path | None) -> str:
    """completed | failed | interrupted | hung (its summary's status) | running | dead (no summary: whether its
    owner lives, benchmarks/liveness.py) | missing (no run there)."""
    if path is None or not path.is_dir():
        return "missing"
    if (path / SUMMARY).exists():
        summary = read_summary(path)
        status = None if summary is None else summary.get("status")
        if status != "completed" and liveness.finishing(path):
            return "running"  # its processes here still end (and write): not yet to be moved or retried
        return status if status in ("completed", "interrupted", "hung") else "failed"
    if not taken(path):
        return "missing"
    return life(path).state


def taken(path: Path) -> bool:
    """A run is there, or a launch has claimed the directory (owner.json) for one: no other run goes there."""
    return holds_a_run(path) or (path / liveness.OWNER).exists()


# summary.json: every field the summaries below write but schema_version and cell_hash (read on their own),
# and what each must be, as analysis/load/values.py KINDS checks it: the one schema of the file
SUMMARY_FIELDS: dict[str, str] = {
    "status": "text",
    "finished": "text",
    "error": "text",
    "framework": "name",
    "loader": "name",
    "model": "name",
    "precision": "name",
    "campaign": "name",
    "sample_unit": "name",  # what throughput_img_s counts: images or sequences (absent before: images)
    "world_size": "size",
    "num_nodes": "size",
    "per_gpu_batch": "size",
    "global_batch": "size",
    "warmup_steps": "count",
    "repeat": "count",
    "measured_steps": "count",
    "measured_samples": "count",
    "time_s": "number",
    "wall_s": "number",
    "throughput_img_s": "number",
    "per_gpu_img_s": "number",
    "last_loss": "number",
    "runtime_s": "number",
    # device memory (memory_summary; null on CPU runs) and a failed run's cause
    "num_processes": "size",
    "peak_allocated_bytes": "count",
    "peak_reserved_bytes": "count",
    "peak_allocated_bytes_by_rank": "counts",
    "peak_reserved_bytes_by_rank": "counts",
    "out_of_memory": "flag",
    # time to accuracy (TARGET_FIELDS; absent, or null, without run.target_top1 and in older summaries)
    "target_top1": "fraction",
    "target_reached": "flag",
    "time_to_target_s": "seconds",
    "samples_to_target": "count",
    "steps_to_target": "count",
    # the slowest rank's seconds from its process start (run_here: its call) to its first training step: imports,
    # data staging (data.cache=cold), process group, model and loader builds; time to train = this + time_to_target_s
    "startup_s": "seconds",
    # the first step whose loss was NaN or infinite on any rank and the part of the run it was in (warm-up,
    # measured, trace window): absent (or null) when every loss was finite, and in older summaries
    "nonfinite_loss_step": "count",
    "nonfinite_loss_phase": "text",
    # how close to the hardware (app._efficiency): forward + backward FLOPs of one sample (benchmarks/flops.py),
    # FLOPs x per_gpu_img_s in TFLOPS, the GPU's peak for the run's math (benchmarks/peaks.py) and their ratio;
    # null with mfu_note saying why (a CPU, a GPU or math without a peak row, a model not countable)
    "model_flops_per_sample": "number",
    "achieved_tflops_per_gpu": "number",
    "peak_tflops": "number",
    "mfu": "number",
    "mfu_note": "text",
    # the measured window's energy (energy_fields): GPUs summed over ranks (NVML), the hosts' RAPL packages;
    # null with energy_note saying why
    "energy_j": "number",
    "energy_j_per_sample": "number",
    "avg_power_w": "number",
    "host_energy_j": "number",
    "energy_note": "text",
    # data.stage=node_local (benchmarks/data/staging.py): the slowest node's copy in seconds (in startup_s), the
    # bytes each node copied, the slowest node's GB/s and every node's seconds in node order; absent otherwise
    "staging_s": "seconds",
    "staging_bytes": "count",
    "staging_gb_s_per_node": "number",
    "staging_s_by_node": "numbers",
    # the measured window's start and end on rank 0, Unix time: the report cuts telemetry samples to it
    "window_start_t_s": "number",
    "window_end_t_s": "number",
}


def energy_fields(energy: Mapping[str, Any], *, measured_samples: int | None, wall_s: float | None) -> dict:
    """summary.json's energy of the measured window from its summed joules (`energy`: gpu_j, host_j, note):
    joules per sample (global samples) and the GPUs' average watts together."""
    gpu_j, host_j = energy.get("gpu_j"), energy.get("host_j")
    return {
        "energy_j": gpu_j,
        "energy_j_per_sample": gpu_j / measured_samples if gpu_j is not None and measured_samples else None,
        "avg_power_w": gpu_j / wall_s if gpu_j is not None and wall_s else None,
        "host_energy_j": host_j,
        "energy_note": energy.get("note") or None,
    }


def now_iso() -> str:
    import time

    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def completed_summary(
    *,
    key: Mapping[str, Any],
    measured: Mapping[str, Any],
    wall_s: float,
    last_loss: float,
    warmup_steps: int,
    repeat: int,
    names: Mapping[str, Any],
    runtime_s: float | None = None,
    num_processes: int | None = None,
    memory: Mapping[str, Any] | None = None,
    target: Mapping[str, Any] | None = None,
) -> dict:
    """summary.json of a completed run: the run key's hash, the names tables show, and `measured`
    (throughput() over the rank logs); wall_s is the measured window's wall time, kept for reference;
    runtime_s the slowest rank's time from its process start to its last step (start-up included: the
    denominator of the breakdown's "share of runtime"). world_size counts GPUs (processes x devices per
    process: FrameworkConfig.local_layout), num_processes the rank logs (default one per GPU); `memory`
    is memory_summary() of the ranks' end records (null on CPUs); `target` the time-to-accuracy fields
    (TARGET_FIELDS) of a run with run.target_top1. `names` holds `sample_unit` ("images" or "sequences":
    the model's task, benchmarks/models/configs.py SAMPLE_UNITS), what throughput_img_s and per_gpu_img_s
    count (the field names stay as they were; summaries without it counted images)."""
    world = int(key["world_size"])
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "completed",
        "finished": now_iso(),
        "cell_hash": key_hash(key),
        **names,
        "world_size": world,
        "num_nodes": int(key["num_nodes"]),
        "global_batch": int(names["per_gpu_batch"]) * world,
        "warmup_steps": warmup_steps,
        **measured,
        "wall_s": wall_s,
        "last_loss": last_loss,
        "repeat": repeat,
        **({"runtime_s": runtime_s} if runtime_s is not None else {}),
        "num_processes": world if num_processes is None else int(num_processes),
        **(memory_summary([]) if memory is None else memory),
        **(dict(target) if target else {}),
    }


# summary.json of a run with run.target_top1: the target (a fraction), whether an evaluation reached it, and
# at the first that did: seconds since the first training step (evaluations included), global training
# samples and optimizer steps before it (null when not reached)
TARGET_FIELDS = ("target_top1", "target_reached", "time_to_target_s", "samples_to_target", "steps_to_target")


def is_out_of_memory(error: BaseException | str) -> bool:
    """A device allocation failed: torch.OutOfMemoryError (CUDA's caching allocator), or a library's error
    that says so (NCCL, cuDNN: 'out of memory'). Torch-free: by the error's name and text."""
    name = "" if isinstance(error, str) else type(error).__name__
    return name == "OutOfMemoryError" or "out of memory" in str(error).lower()


def failed_summary(error: BaseException | str, **extra: Any) -> dict:
    """summary.json of a run that raised; out_of_memory tells a batch that did not fit from other failures."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "failed",
        "finished": now_iso(),
        "error": text,
        "out_of_memory": is_out_of_memory(error),
        **extra,
    }


# --- the rank's end record and its peak device memory ----------------------------------------


def end_path(run_dir: Path, rank: int) -> Path:
    """end_rank<R>.json: what rank R says when it stops (end_record), beside its rank log."""
    return Path(run_dir) / f"end_rank{rank}.json"


def end_record(*, rank: int, peaks: Mapping[str, int | None], error: BaseException | None = None) -> dict:
    """end_rank<R>.json: the rank's peak allocated and reserved device memory in bytes over the whole run
    (null on a CPU) and, when it failed, its error and whether it ran out of memory (END_FIELDS)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "rank": int(rank),
        "status": "completed" if error is None else "failed",
        "error": None if error is None else f"{type(error).__name__}: {error}"[:2000],
        "out_of_memory": error is not None and is_out_of_memory(error),
        **{name: peaks.get(name) for name in MEMORY_FIELDS},
    }


def read_end_record(run_dir: Path, rank: int) -> dict | None:
    """Rank `rank`'s end record, or None when it wrote none (it was killed) or it is unreadable."""
    try:
        record = json.loads(end_path(run_dir, rank).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def memory_summary(ends: list[dict | None]) -> dict:
    """summary.json's memory fields from the ranks' end records (in rank order): the largest peak over the
    ranks (what a batch must fit in) and each rank's; null where no rank measured one (CPU runs)."""
    out: dict[str, Any] = {}
    for name, by_rank in zip(MEMORY_FIELDS, MEMORY_BY_RANK_FIELDS):
        values = [end.get(name) if end is not None else None for end in ends]
        values = [v if type(v) is int and v >= 0 else None for v in values]
        known = [v for v in values if v is not None]
        out[name] = max(known) if known else None
        out[by_rank] = values if known else None
    return out


def memory_of_run(path: Path, *, num_processes: int) -> dict:
    """memory_summary() over end_rank0..end_rank<P-1>.json (rank 0 calls it after the last barrier)."""
    return memory_summary([read_end_record(path, r) for r in range(num_processes)])


def ran_out_of_memory(path: Path) -> bool:
    """The run stopped because a rank ran out of device memory: its summary or any rank's end record says so
    (the launcher may kill rank 0 after another rank failed, before it writes a summary)."""
    summary = read_summary(path) or {}
    if summary.get("status") == "failed" and summary.get("out_of_memory") is True:
        return True
    ranks = (
        int(m.group(1)) for p in path.glob("end_rank*.json") if (m := re.fullmatch(r"end_rank(\d+)\.json", p.name))
    )
    return any((end := read_end_record(path, rank)) is not None and end.get("out_of_memory") is True for rank in ranks)


def progress_path(run_dir: Path, rank: int) -> Path:
    """progress_rank<R>.json: rank R's step and phase while it runs (PROGRESS_FIELDS)."""
    return Path(run_dir) / f"progress_rank{rank}.json"


def stacks_path(run_dir: Path, rank: int) -> Path:
    """stacks_rank<R>.txt: rank R's Python stacks, dumped when the run hung."""
    return Path(run_dir) / f"stacks_rank{rank}.txt"


def read_progress(run_dir: Path) -> dict[int, dict]:
    """{rank: its progress record} of the ranks that wrote one (a torn or unreadable file is left out)."""
    out = {}
    for path in Path(run_dir).glob("progress_rank*.json"):
        if (m := re.fullmatch(r"progress_rank(\d+)\.json", path.name)) is None:
            continue
        try:
            record = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(record, dict):
            out[int(m.group(1))] = record
    return dict(sorted(out.items()))


def hung_summary(error: str, *, ranks: Mapping[str, Any], **extra: Any) -> dict:
    """A run stopped because a rank's step did not advance within run.hang_timeout_s: `ranks` says where each
    rank was ({rank: {step, phase, host, ...}}); not a failure of the configuration, retried as one."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "hung",
        "finished": now_iso(),
        "error": error,
        "hung_ranks": dict(ranks),
        **extra,
    }


def interrupted_summary(signal_name: str, **extra: Any) -> dict:
    """A run stopped on purpose (Ctrl-C, scancel): not a failure of the configuration."""
    return {
        "schema_version": SCHEMA_VERSION,
        "status": "interrupted",
        "finished": now_iso(),
        "error": f"stopped by {signal_name}",
        **extra,
    }


# --- the throughput definition ----------------------------------------------------------------


def is_measured(record: Mapping[str, Any]) -> bool:
    """A step record that counts: not warm-up, not inside a profiler window."""
    return not record.get("warmup") and not record.get("profiled", False)


def throughput(
    records_by_rank: Mapping[int, Iterable[Mapping[str, Any]]], *, world_size: int | None = None
) -> dict[str, float | int]:
    """THE throughput of a run, from its step records (the same figure analysis computes):
    per measured step the slowest rank's step_s, time_s = their sum, throughput_img_s = global samples
    (images, or sequences: summary.json's sample_unit) over the measured steps / time_s, per_gpu_img_s = throughput_img_s / world_size (the GPUs; by default
    the ranks, one per GPU, but DataParallel's one process drives several)."""
    step_s: dict[int, float] = {}
    samples: dict[int, int] = {}
    for records in records_by_rank.values():
        for record in records:
            if is_measured(record):
                step = int(record["step"])
                step_s[step] = max(step_s.get(step, 0.0), float(record["step_s"]))
                samples[step] = samples.get(step, 0) + int(record["samples"])
    time_s = sum(step_s.values())
    total = sum(samples.values())
    thr = total / time_s if time_s > 0 else float("nan")
    ranks = max(1, len(records_by_rank) if world_size is None else int(world_size))
    return {
        "measured_steps": len(step_s),
        "measured_samples": total,
        "time_s": time_s,
        "throughput_img_s": thr,
        "per_gpu_img_s": thr / ranks,
    }


def read_step_records(path: Path) -> list[dict]:
    """The step records of one rank log (header and unreadable lines skipped)."""
    records = []
    with open(path, "rb") as f:
        for line in f:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if (
                isinstance(record, dict)
                and record.get("kind") != "header"
                and all(record.get(k) is not None for k in REQUIRED_STEP_FIELDS)
            ):
                records.append(record)
    return records


def throughput_of_run(path: Path, *, world_size: int, num_processes: int | None = None) -> dict[str, float | int]:
    """throughput() over rank0..rank<P-1>.jsonl of a run directory (rank 0 calls it after the last barrier);
    P = num_processes, by default one per GPU (world_size)."""
    processes = world_size if num_processes is None else num_processes
    return throughput({r: read_step_records(path / f"rank{r}.jsonl") for r in range(processes)}, world_size=world_size)


# <run dir>/.reserve: space taken before the run starts (reserve_space) and given back for its summary.json
# when the disk filled up meanwhile, so that a run that died of a full disk still says so
RESERVE = ".reserve"
RESERVE_BYTES = 256 * 1024


def reserve_space(run_dir: Path, nbytes: int = RESERVE_BYTES) -> None:
    """Make the run directory and RESERVE in it, nbytes of real blocks (zeros written, not a sparse file);
    OSError when the disk has no room for them (the run should not start)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / RESERVE
    try:
        with open(path, "wb") as f:
            f.write(bytes(nbytes))
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        path.unlink(missing_ok=True)
        raise


def release_reserve(run_dir: Path) -> bool:
    """Give RESERVE's space back; whether there was one."""
    try:
        (run_dir / RESERVE).unlink()
    except FileNotFoundError:
        return False
    return True


def _write_then_rename(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written temporary behind
        raise


def write_json_atomic(path: Path, obj: Any) -> None:
    """Write to a temporary file in the same directory, then rename: readers never see half a file. A
    summary.json that meets a full disk gets the run's reserved space (reserve_space) and is tried once more;
    once a summary is written, the reserve is given back."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"
    try:
        _write_then_rename(path, text)
    except OSError as error:
        if path.name != SUMMARY or error.errno != errno.ENOSPC or not release_reserve(path.parent):
            raise
        _write_then_rename(path, text)
    if path.name == SUMMARY:
        release_reserve(path.parent)
