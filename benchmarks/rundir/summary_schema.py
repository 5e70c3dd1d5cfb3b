"""summary.json: its one schema (SUMMARY_FIELDS), the summaries that write it (`completed_summary`,
`failed_summary`, `hung_summary`, `interrupted_summary`), each rank's end record (end_rank<R>.json: its peak
device memory, its error) and THE throughput definition (`throughput`, docs/analysis.md) over the rank logs.
Torch-free."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.rundir import cell_identity
from benchmarks.rundir.run_files import SCHEMA_VERSION, now_iso, read_step_records, read_summary

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
# (launchers/lifecycle/liveness.py: `running`, or `dead` once its launching process is gone or its heartbeat is stale)
STATES = ("completed", "failed", "interrupted", "hung", "running", "dead", "missing")

# the states of a run that ended without completing and said why in its summary: a retry of its cell moves it
# into <campaign>/attic/ (move_aside) and runs the cell again
RETRIED_STATES = frozenset({"failed", "interrupted", "hung"})

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
    # data.stage=node_local (launchers/lifecycle/staging.py): the slowest node's copy in seconds (in startup_s), the
    # bytes each node copied, the slowest node's GB/s and every node's seconds in node order; absent otherwise
    "staging_s": "seconds",
    "staging_bytes": "count",
    "staging_gb_s_per_node": "number",
    "staging_s_by_node": "numbers",
    # the measured window's start and end on rank 0, Unix time: the report cuts telemetry samples to it
    "window_start_t_s": "number",
    "window_end_t_s": "number",
    # what else ran on the run's hosts and GPUs in the measured window (launchers/lifecycle/interference.py):
    # every host's verdicts with their evidence, and their words as analysis/caveats.py reads them ('' none)
    "interference": "record",
    "interference_marks": "text",
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
        "cell_hash": cell_identity.key_hash(key),
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


def throughput_of_run(path: Path, *, world_size: int, num_processes: int | None = None) -> dict[str, float | int]:
    """throughput() over rank0..rank<P-1>.jsonl of a run directory (rank 0 calls it after the last barrier);
    P = num_processes, by default one per GPU (world_size)."""
    processes = world_size if num_processes is None else num_processes
    return throughput({r: read_step_records(path / f"rank{r}.jsonl") for r in range(processes)}, world_size=world_size)
