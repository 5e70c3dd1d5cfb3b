"""Interference, measured: what else ran on a run's hosts and GPUs during its measured window, and whether its
figures can be trusted for it. Each host's local rank 0 starts an `Observer` (a sampler thread) before the
loop; after the loop it cuts its samples to the measured window, judges them (`judge`, pure) and writes
interference_rank<R>.json; rank 0 gathers every host's record into summary.json's `interference` (the
verdicts with their evidence) and `interference_marks` (analysis/caveats.py's words: "shared host", "GPU
shared", "throttled"). docs/reliability.md says what is seen, how, the thresholds and what is not seen.

The run's own processes on a host: its local ranks (their pids from the rank logs' headers), everything they
started (loader workers) and their ancestors (the launcher, the supervisor), each on its own. Another ddlbench
run: a process of `python -m benchmarks[.commbench]` that is not the run's own. NVML through
benchmarks/telemetry.py only (its `host_gpus`): the run's GPUs are those its processes compute on.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import psutil

from benchmarks import telemetry
from benchmarks.rundir import run_files

SHARED_HOST, GPU_SHARED, THROTTLED = "shared host", "GPU shared", "throttled"
# other processes' CPU time, as CPUs busy on average over the window, from which they count: below it, the
# daemons and shells of an idle node (a few hundredths of a CPU) and the sampler's own jitter
FOREIGN_CPUS_MIN = 0.5
# ... and only where they competed: the host left less idle CPU than they took (a node whose other work fit in
# CPUs the run left idle did not slow the run's CPU side)
# a clock-event reason counts when it held in at least this share of the window's samples (a power cap touched
# once at a step's peak is the GPU's normal boost behaviour; a cap that holds is a slower GPU)
THROTTLE_SHARE_MIN = 0.25
# runnable threads beyond the CPUs: the host's run queue (/proc/stat procs_running) averaged over the window
RUNNABLE_PER_CPU_MAX = 1.5
INTERVAL_S = 0.5  # between samples; Slurm's queue and the process table every SLOW_EVERY samples
SLOW_EVERY = 4
# Slurm's queue at most this often (and at the observer's first and last sample): every node's rank 0 asking the
# controller every 2 s would load a large machine's slurmctld; a job that comes and goes in between still shows
# in the host's CPU time
SLURM_EVERY_S = 30.0
ROLE_MODULES = ("benchmarks", "benchmarks.commbench")  # `python -m <module>`: a ddlbench rank
# ... or the rank program by its path: a CPU run's ranks fork from torchrun's agent (--run-path <this file>), so
# their command line is the agent's
RANK_PROGRAM = os.path.join("benchmarks", "__main__.py")
# NVML's clock-event reason bits (nvmlClocksEventReason*) and the word for each that slows a GPU
REASONS = {0x4: "power cap", 0x80: "power brake", 0x20: "thermal (software)", 0x40: "thermal (hardware)",
           0x8: "hardware slowdown"}  # fmt: skip
ADVICE = {
    SHARED_HOST: "ask for whole nodes (sbatch --exclusive; a campaign's benchmark jobs one node each) and run alone",
    GPU_SHARED: "ask for the GPUs alone (--exclusive, nvidia-smi -c EXCLUSIVE_PROCESS) and check nvidia-smi first",
    THROTTLED: "check power limits and cooling (nvidia-smi -q -d PERFORMANCE) or run on another node",
}


def record_path(run_dir: Path, rank: int) -> Path:
    return run_dir / f"interference_rank{rank}.json"


# --- judging (pure) ------------------------------------------------------------------------------------------


def window_samples(samples: list[dict], start_t_s: float, end_t_s: float) -> list[dict]:
    """The samples that bracket [start, end]: the last one at or before the start to the first one at or after
    the end (all of them where none came before the start)."""
    before = [k for k, s in enumerate(samples) if s["t_s"] <= start_t_s]
    after = [k for k, s in enumerate(samples) if s["t_s"] >= end_t_s]
    first = before[-1] if before else 0
    last = after[0] if after else len(samples) - 1
    return samples[first : last + 1]


def _own_cpu_s(first: dict, last: dict) -> float:
    """The run's processes' CPU seconds between two samples: each process's growth (one that started in between
    counts from zero; one that ended counts to its last reading, kept in `last`)."""
    return sum(max(0.0, cpu - first["own_cpu_s"].get(pid, 0.0)) for pid, cpu in last["own_cpu_s"].items())


def judge(samples: list[dict], *, cpus: int, host: str) -> dict:
    """One host's verdicts over its window's samples (window_samples): each with its evidence (what, how much,
    when). `samples`: t_s, host_busy_cpu_s, own_cpu_s {pid: s}, runnable; where sampled, others [{pid, command}],
    slurm_jobs [{job, user, start}], gpus [{index, uuid, foreign_pids, reasons, ecc_uncorrected, xids}]."""
    record: dict[str, Any] = {"host": host, "cpus": cpus, "verdicts": {}}
    if len(samples) < 2:
        record["note"] = "fewer than two samples in the measured window: nothing judged"
        return record
    first, last = samples[0], samples[-1]
    span_s = max(1e-9, last["t_s"] - first["t_s"])
    busy_s = max(0.0, last["host_busy_cpu_s"] - first["host_busy_cpu_s"])
    own_s = _own_cpu_s(first, last)
    foreign_cpus = max(0.0, busy_s - own_s) / span_s
    idle_cpus = max(0.0, cpus - busy_s / span_s)
    runnable = [s["runnable"] for s in samples if s.get("runnable") is not None]
    runnable_mean = sum(runnable) / len(runnable) if runnable else None
    record |= {
        "start_t_s": first["t_s"], "end_t_s": last["t_s"], "num_samples": len(samples),
        "own_cpus": round(own_s / span_s, 3), "foreign_cpus": round(foreign_cpus, 3),
        "idle_cpus": round(idle_cpus, 3),
        "runnable_mean": None if runnable_mean is None else round(runnable_mean, 2),
    }  # fmt: skip
    shared: list[str] = []
    if foreign_cpus >= FOREIGN_CPUS_MIN and idle_cpus < foreign_cpus:
        shared.append(f"other processes used {foreign_cpus:.1f} of {cpus} CPUs ({idle_cpus:.1f} idle)")
    if runnable_mean is not None and runnable_mean > RUNNABLE_PER_CPU_MAX * cpus and shared:
        shared.append(f"{runnable_mean:.1f} runnable threads on {cpus} CPUs")
    others = {o["pid"]: o for s in samples for o in s.get("others", [])}
    if others:
        pids = ", ".join(str(pid) for pid in sorted(others)[:3]) + (", ..." if len(others) > 3 else "")
        shared.append(f"another ddlbench run ({len(others)} processes: pid {pids})")
    jobs = {j["job"]: j for s in samples for j in s.get("slurm_jobs", [])}
    if jobs:
        shared.append("Slurm jobs " + ", ".join(f"{j} ({v['user']})" for j, v in sorted(jobs.items())[:5]))
    if shared:
        record["verdicts"][SHARED_HOST] = {
            "detail": f"{host}: " + ", ".join(shared),
            "other_ddlbench": list(others.values()),
            "slurm_jobs": list(jobs.values()),
        }
    record["verdicts"] |= _gpu_verdicts(samples, host=host)
    return record


def _gpu_verdicts(samples: list[dict], *, host: str) -> dict:
    """GPU shared (another process computing on a run's GPU) and throttled (a slowing clock-event reason in at
    least THROTTLE_SHARE_MIN of the samples, an XID event, uncorrected ECC errors counted in the window)."""
    verdicts: dict[str, Any] = {}
    per_gpu: dict[int, list[dict]] = {}
    for sample in samples:
        for gpu in sample.get("gpus", []):
            per_gpu.setdefault(gpu["index"], []).append({"t_s": sample["t_s"], **gpu})
    foreign, slowed = [], []
    for index, seen in sorted(per_gpu.items()):
        pids = sorted({p for g in seen for p in g.get("foreign_pids", [])})
        if pids:
            when = [g["t_s"] for g in seen if g.get("foreign_pids")]
            foreign.append({"gpu": index, "pids": pids, "first_t_s": min(when), "last_t_s": max(when)})
        for bit, word in REASONS.items():
            held = [g["t_s"] for g in seen if g.get("reasons") is not None and g["reasons"] & bit]
            if held and len(held) >= THROTTLE_SHARE_MIN * len(seen):
                slowed.append({"gpu": index, "reason": word, "share": round(len(held) / len(seen), 2),
                               "first_t_s": min(held)})  # fmt: skip
        xids = sorted({x for g in seen for x in g.get("xids", [])})
        if xids:
            slowed.append({"gpu": index, "reason": f"XID {', '.join(map(str, xids))}"})
        ecc = [g["ecc_uncorrected"] for g in seen if g.get("ecc_uncorrected") is not None]
        if len(ecc) >= 2 and ecc[-1] > ecc[0]:
            slowed.append({"gpu": index, "reason": f"{ecc[-1] - ecc[0]} uncorrected ECC errors"})
    if foreign:
        said = ", ".join(f"GPU {f['gpu']}: pid {', '.join(map(str, f['pids']))}" for f in foreign)
        verdicts[GPU_SHARED] = {"detail": f"{host} {said}", "gpus": foreign}
    if slowed:
        said = ", ".join(
            f"GPU {s['gpu']} {s['reason']}" + (f" in {s['share']:.0%} of samples" if "share" in s else "")
            for s in slowed
        )
        verdicts[THROTTLED] = {"detail": f"{host} {said}", "gpus": slowed}
    return verdicts


def marks_text(records: Iterable[Mapping[str, Any]]) -> str:
    """The hosts' verdicts as analysis/caveats.py's marks text: 'word: detail, detail; word: ...' ('' none)."""
    words: dict[str, list[str]] = {}
    for record in records:
        for word, verdict in record.get("verdicts", {}).items():
            words.setdefault(word, []).append(verdict["detail"])
    return "; ".join(
        f"{w}: {' | '.join(words[w]).replace('; ', ', ')}" for w in (SHARED_HOST, GPU_SHARED, THROTTLED) if w in words
    )


def summary_fields(run_dir: Path) -> dict:
    """summary.json's `interference` (every host's record) and `interference_marks` (marks_text), from the
    interference_rank<R>.json files the hosts' observers wrote; {} where none did."""
    records = []
    for path in sorted(run_dir.glob("interference_rank*.json")):
        with contextlib.suppress(OSError, ValueError):
            records.append(json.loads(path.read_text()))
    if not records:
        return {}
    return {"interference": {"hosts": records}, "interference_marks": marks_text(records)}


# --- sampling --------------------------------------------------------------------------------------------------


def _host_busy_cpu_s() -> float:
    times = psutil.cpu_times()
    # guest time is in user already; steal is another virtual machine's, not a process of this host
    skipped = ("idle", "iowait", "guest", "guest_nice", "steal")
    return sum(times) - sum(getattr(times, name, 0.0) for name in skipped)


def _runnable() -> int | None:
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("procs_running"):
                return max(0, int(line.split()[1]) - 1)  # less the sampler itself
    return None


def is_ddlbench_run(cmdline: list[str]) -> bool:
    """A process of a ddlbench run: a rank (`python -m benchmarks[.commbench]`, or a Python whose argv names the
    rank program's file), or `ddlbench run` / `ddlbench campaign run` itself, whose command line a CPU run's
    torchrun agent and ranks keep, as they fork from it (their process name is torch's pt_elastic)."""
    if _module_of(cmdline) in ROLE_MODULES:
        return True
    if not cmdline or not os.path.basename(cmdline[0]).startswith("python"):
        return False
    if any(arg.endswith(RANK_PROGRAM) for arg in cmdline[1:]):
        return True
    args = cmdline[1:]
    if _module_of(cmdline) == "ddlbench":
        args = args[args.index("-m") + 2 :]
    elif args and os.path.basename(args[0]) == "ddlbench":
        args = args[1:]
    else:
        return False
    return args[:1] == ["run"] or args[:2] == ["campaign", "run"]


def _module_of(cmdline: list[str]) -> str | None:
    """`python -m <module>`'s module (None for another program: srun and mpirun name it in their argv too)."""
    if not cmdline or not os.path.basename(cmdline[0]).startswith("python"):
        return None
    for k, arg in enumerate(cmdline[:-1]):
        if arg == "-m":
            return cmdline[k + 1]
    return None


class Observer:
    """The sampler thread of one host (its local rank 0): every INTERVAL_S the host's CPU time, the run's own
    processes' CPU time and the run queue; every SLOW_EVERY samples the other ddlbench processes, the other Slurm
    jobs on the node and, through NVML, the run's GPUs (foreign compute processes, clock-event reasons, XID and
    ECC). `rank_pids()` returns the pids of the host's ranks known so far (the rank logs' headers)."""

    def __init__(self, *, rank_pids, interval_s: float = INTERVAL_S, gpus: telemetry.HostGpus | None = None) -> None:
        self.rank_pids, self.interval_s, self.gpus = rank_pids, interval_s, gpus
        self.samples: list[dict] = []
        self.host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
        self.job = os.environ.get("SLURM_JOB_ID")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddlbench-interference", daemon=True)
        self._slurm_at = -math.inf  # when Slurm's queue was last asked (time.monotonic())
        self._last_cpu: dict[int, float] = {}  # a process's last reading: it stays counted once it ends

    def _own(self) -> tuple[set[int], dict[int, float]]:
        ranks, family = set(self.rank_pids()), set()
        for pid in ranks:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                family |= {p.pid for p in process.children(recursive=True)}
                family |= {p.pid for p in process.parents()}
        for pid in ranks | family:
            with contextlib.suppress(psutil.Error):
                times = psutil.Process(pid).cpu_times()
                own = times.user + times.system
                if pid in ranks:  # their reaped children (a loader worker that ended) counted in them
                    own += times.children_user + times.children_system
                self._last_cpu[pid] = own
        return ranks | family | {os.getpid()}, dict(self._last_cpu)

    def _others(self, own: set[int]) -> list[dict]:
        found = []
        for process in psutil.process_iter(["pid", "cmdline"]):
            cmdline = process.info.get("cmdline") or []
            if process.info["pid"] not in own and is_ddlbench_run(cmdline):
                found.append({"pid": process.info["pid"], "command": " ".join(cmdline[:6])[:160]})
        return found

    def _slurm_jobs(self) -> list[dict]:
        if shutil.which("squeue") is None:
            return []
        try:
            out = subprocess.run(
                ["squeue", "-h", "-t", "R", "-w", self.host, "-o", "%i|%u|%S"],
                capture_output=True, text=True, timeout=10, check=False,
            )  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            return []
        jobs = []
        for line in out.stdout.splitlines() if out.returncode == 0 else []:
            job, _, rest = line.partition("|")
            user, _, start = rest.partition("|")
            if job and job != self.job and not (self.job and job.startswith(f"{self.job}_")):
                jobs.append({"job": job, "user": user, "start": start})
        return jobs

    def sample(self, *, slow: bool, final: bool = False) -> dict:
        own, own_cpu = self._own()
        record: dict[str, Any] = {
            "t_s": time.time(), "host_busy_cpu_s": _host_busy_cpu_s(), "own_cpu_s": own_cpu, "runnable": _runnable(),
        }  # fmt: skip
        if slow:
            record["others"] = self._others(own)
            if final or time.monotonic() - self._slurm_at >= SLURM_EVERY_S:
                record["slurm_jobs"], self._slurm_at = self._slurm_jobs(), time.monotonic()
            if self.gpus is not None:
                record["gpus"] = self.gpus.snapshot(own)
        return record

    def _run(self) -> None:
        count = 0
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # an observer never stops the run it watches
                self.samples.append(self.sample(slow=count % SLOW_EVERY == 0))
            count += 1
            self._stop.wait(self.interval_s)

    def start(self) -> Observer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._stop.set()
            self._thread.join(timeout=30)
            with contextlib.suppress(Exception):
                self.samples.append(self.sample(slow=True, final=True))
        if self.gpus is not None:
            self.gpus.close()
            self.gpus = None

    def finish(self, run_dir: Path, *, rank: int, start_t_s: float | None, end_t_s: float | None) -> dict:
        """Stop, judge the measured window's samples and write interference_rank<R>.json; returns the record."""
        self.stop()
        cpus = psutil.cpu_count() or 1
        if start_t_s is None or end_t_s is None:
            record = {"host": self.host, "cpus": cpus, "verdicts": {}, "note": "the measured window did not end"}
        else:
            record = judge(window_samples(self.samples, start_t_s, end_t_s), cpus=cpus, host=self.host)
        run_files.write_json_atomic(record_path(run_dir, rank), record)
        return record


def local_rank_pids(run_dir: Path, *, rank: int, local_world_size: int):
    """A function returning the pids of this host's ranks (rank .. rank + local_world_size - 1: ranks are numbered
    node by node) from their rank logs' headers, read until every one has been seen."""
    known: dict[int, int] = {rank: os.getpid()}

    def pids() -> list[int]:
        for other in range(rank, rank + local_world_size):
            if other in known:
                continue
            with contextlib.suppress(OSError, ValueError, KeyError):
                with (run_dir / f"rank{other}.jsonl").open() as log:
                    known[other] = int(json.loads(log.readline())["pid"])
        return list(known.values())

    return pids


def start(run_dir: Path, *, rank: int, local_world_size: int, device) -> Observer:
    """The host's observer, started (its local rank 0 calls it before the loop)."""
    gpus = telemetry.host_gpus() if getattr(device, "type", "cpu") == "cuda" else None
    return Observer(rank_pids=local_rank_pids(run_dir, rank=rank, local_world_size=local_world_size), gpus=gpus).start()
