"""A rank's hang watchdog (run.hang_timeout_s): a thread that sees where the rank is and stops it when it has
not moved on within the limit.

The loop feeds it through the step timer (`Watchdog.watch`): each phase mark stores one tuple (step, phase,
when), nothing more. Every few seconds the thread rewrites progress_rank<R>.json in place (rundir.
PROGRESS_FIELDS: a heartbeat, and where the rank is). When the step and phase have not changed within the
limit (a collective whose peer is stopped or dead, a loader that never yields), the thread:

- marks its progress record hung and creates hang.json (the first rank to notice; launchers/lifecycle/supervise.py
  polls that one file, then writes the `hung` summary with every rank's last step and phase);
- dumps this rank's Python stacks into stacks_rank<R>.txt (faulthandler, which needs no GIL; py-spy's too
  where it is installed), and asks the ranks of this host to dump theirs (SIGUSR1, which each rank's
  faulthandler answers even while its main thread is stuck in C++; a stopped process answers nothing);
- on NCCL, writes the flight recorder's ring of the last collectives to nccl_trace_rank<R>.pkl; NCCL's own
  dump on its timeout (TORCH_NCCL_DUMP_ON_TIMEOUT) is set up too (`flight_recorder_env`);
- after GRACE_S (the other ranks' watchdogs, stuck in the same collective, dump theirs), ends the process
  with HUNG_EXIT: the main thread may be stuck in C++ where no exception reaches it.

The default limit (run.hang_timeout_s=null) is derived: HANG_FACTOR x the median of the last steps' host
intervals, at least HANG_FLOOR_S; before MIN_STEPS steps are done, in an evaluation and after the last step,
HANG_START_S (process groups, cuDNN autotuning, torch.compile, a validation pass take longer than a step).
Torch-free: the flight recorder imports torch when it dumps.
"""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchmarks.rundir import run_files
from benchmarks.validate import check_hang_timeout_s

# where a rank can be: setup (before the first step), a step's phases in the step timer's order, between steps
# (logging, the measured window's barrier, the profiler), an evaluation, conclude (after the last step)
PHASES = ("setup", "data", "forward", "backward", "optimizer", "between steps", "evaluation", "conclude")
STEP_PHASES = ("data", "forward", "backward", "optimizer", "between steps")  # the limit follows the steps here
HANG_FACTOR = 20  # a step 20x slower than the median is no step
MIN_STEPS = 5  # host intervals needed before the limit follows the steps
HANG_FLOOR_S = {"cuda": 300.0, "cpu": 60.0}  # the derived limit's least: NCCL's start, a loader's first epoch
HANG_START_S = {"cuda": 1200.0, "cpu": 300.0}  # before the steps, in an evaluation, after the last step
RECENT_STEPS = 50  # the median is over this many last steps
GRACE_S = 2.0  # after a rank dumped its stacks: the other ranks' watchdogs dump theirs before it ends
HUNG_EXIT = 124  # the exit code of a rank, and of `ddlbench run`, that hung (timeout(1)'s)
HANG_MARK = "hang.json"  # the first rank that saw the hang: what the supervisor polls
NCCL_TRACE = "nccl_trace_rank"  # <run dir>/nccl_trace_rank<R>: the NCCL flight recorder's dump (pickle)
DUMP_SIGNAL = signal.SIGUSR1  # a rank's faulthandler dumps its stacks on it
PY_SPY_TIMEOUT_S = 30.0


def poll_s(limit_s: float) -> float:
    """How often the thread looks (and rewrites the progress record): a tenth of the limit, 0.2-5 s."""
    return min(5.0, max(0.2, limit_s / 10))


def stale_after_s(beat_every_s: float) -> float:
    """A rank whose progress record is older than this did not answer: stopped, killed, or its host gone."""
    return 3 * beat_every_s + 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    """The hang limit of each phase: `fixed_s` (run.hang_timeout_s) everywhere, or derived from the steps."""

    fixed_s: float | None
    floor_s: float
    start_s: float

    def limit_s(self, phase: str, step_intervals_s: list[float]) -> float:
        if self.fixed_s is not None:
            return self.fixed_s
        if phase not in STEP_PHASES or len(step_intervals_s) < MIN_STEPS:
            return self.start_s
        return max(self.floor_s, HANG_FACTOR * statistics.median(step_intervals_s))


def limits_of(hang_timeout_s: float | None, *, device_type: str) -> Limits | None:
    """run.hang_timeout_s as Limits: null derives them for the device, 0 turns the watchdog off (None)."""
    check_hang_timeout_s(hang_timeout_s)
    if hang_timeout_s == 0:
        return None
    kind = "cuda" if device_type == "cuda" else "cpu"
    return Limits(
        fixed_s=None if hang_timeout_s is None else float(hang_timeout_s),
        floor_s=HANG_FLOOR_S[kind],
        start_s=HANG_START_S[kind],
    )


def flight_recorder_env(run_dir: Path) -> dict[str, str]:
    """The NCCL flight recorder's settings (torch's documented names): a ring of the last collectives, dumped
    into the run directory when NCCL's own watchdog times out (files nccl_trace_rank<R>)."""
    prefix = str(Path(run_dir).resolve() / NCCL_TRACE)
    return {
        "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "TORCH_FR_DUMP_TEMP_FILE": prefix,
        "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix,  # the older name of TORCH_FR_DUMP_TEMP_FILE
    }


def set_up_flight_recorder(run_dir: Path) -> None:
    """flight_recorder_env() into this process's environment before its NCCL process group starts; a
    setting the user made wins."""
    for name, value in flight_recorder_env(run_dir).items():
        os.environ.setdefault(name, value)


class WatchedTimer:
    """A step timer that tells the watchdog each phase as the loop marks it (benchmarks/timing.py's protocol)."""

    MARKED = ("forward", "backward", "optimizer", "optimizer")  # the phase after each of the step's 4 marks

    def __init__(self, timer, watchdog: Watchdog) -> None:
        self.timer, self.watchdog, self._marks = timer, watchdog, 0

    def start_step(self) -> None:
        self._marks = 0
        self.watchdog.enter("data")
        self.timer.start_step()

    def mark(self) -> None:
        self.timer.mark()
        self.watchdog.enter(self.MARKED[min(self._marks, len(self.MARKED) - 1)])
        self._marks += 1

    def cancel_step(self) -> None:
        self.timer.cancel_step()
        self.watchdog.enter("between steps")

    def end_step(self) -> None:
        self.timer.end_step()
        self.watchdog.step_done()

    def pop_ready(self) -> list[dict[str, float]]:
        return self.timer.pop_ready()

    def flush(self) -> list[dict[str, float]]:
        return self.timer.flush()


class Watchdog:
    """One rank's watchdog thread (see the module's docstring). `enter(phase)` and `step_done()` are what the
    rank calls; they store one tuple and append one float."""

    def __init__(
        self,
        run_dir: Path,
        *,
        rank: int,
        limits: Limits,
        on_hang: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.run_dir, self.rank, self.limits = Path(run_dir), rank, limits
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.on_hang = on_hang if on_hang is not None else self._end_process
        self.clock = clock
        self._now = clock()
        self._where = (0, "setup", self._now, time.time())  # step, phase, since (clock), since (wall)
        self._intervals: deque[float] = deque(maxlen=RECENT_STEPS)
        self._last_step_end: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fd: int | None = None
        self._stacks = None
        self._written = 0
        self._hung = False  # a hung record stays hung

    # --- what the rank calls -----------------------------------------------------------------------

    def enter(self, phase: str) -> None:
        self._where = (self._where[0], phase, self.clock(), time.time())

    def step_done(self) -> None:
        now = self.clock()
        if self._last_step_end is not None:
            self._intervals.append(now - self._last_step_end)
        self._last_step_end = now
        self._where = (self._where[0] + 1, "between steps", now, time.time())

    def watch(self, timer) -> WatchedTimer:
        """The loop's step timer, feeding this watchdog at each phase."""
        return WatchedTimer(timer, self)

    def around(self, evaluation):
        """An evaluation callable (loop.Evaluation) that tells the watchdog it is evaluating (HANG_START_S)."""
        if evaluation is None:
            return None

        def evaluate(*args):
            self.enter("evaluation")
            try:
                return evaluation(*args)
            finally:
                self.enter("between steps")

        return evaluate

    def start(self) -> Watchdog:
        """Open the progress record and the stacks file, register the stack dump on DUMP_SIGNAL, start the thread."""
        self._fd = os.open(
            run_files.progress_path(self.run_dir, self.rank), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644
        )
        self._stacks = open(run_files.stacks_path(self.run_dir, self.rank), "a")
        faulthandler.register(DUMP_SIGNAL, file=self._stacks, all_threads=True, chain=False)
        self._beat()
        self._thread = threading.Thread(target=self._run, daemon=True, name="ddlbench-watchdog")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread; the progress record stays (its last step and phase, marked `ended`: the
        supervisor's judge, launchers/lifecycle/beats.py, no longer waits for its beat), an empty stacks file
        does not."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10.0)
        self._beat(hung=self._hung, ended=True)
        if self._stacks is not None:
            faulthandler.unregister(DUMP_SIGNAL)
            empty = self._stacks.tell() == 0
            self._stacks.close()
            if empty:
                run_files.stacks_path(self.run_dir, self.rank).unlink(missing_ok=True)
            self._stacks = None
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # --- the thread --------------------------------------------------------------------------------

    def check(self) -> float | None:
        """One look: the progress record rewritten; the seconds without progress when they passed the limit
        (the hang is then handled), else None."""
        step, phase, since, _ = self._where
        limit = self.limits.limit_s(phase, list(self._intervals))
        stuck_s = self.clock() - since
        if stuck_s <= limit:
            self._beat(limit)
            return None
        self._beat(limit, hung=True)
        self._handle_hang(step=step, phase=phase, stuck_s=stuck_s, limit_s=limit)
        return stuck_s

    def _run(self) -> None:
        while not self._stop.wait(poll_s(self.limits.limit_s(self._where[1], list(self._intervals)))):
            try:
                if self.check() is not None:
                    return
            except Exception:  # a watchdog that fails must not fail the run: it stops watching
                return

    def record(self, *, limit_s: float | None = None, hung: bool = False, ended: bool = False) -> dict:
        step, phase, _, since_wall = self._where
        limit = limit_s if limit_s is not None else self.limits.limit_s(phase, list(self._intervals))
        return {
            "rank": self.rank,
            "host": self.host,
            "pid": self.pid,
            "step": step,
            "phase": phase,
            "beat": time.time(),
            "beat_every_s": poll_s(limit),
            "since": since_wall,
            "limit_s": limit,
            "hung": hung,
            "ended": ended,
        }

    def _beat(self, limit_s: float | None = None, *, hung: bool = False, ended: bool = False) -> None:
        """The progress record rewritten in place (no rename: no metadata traffic on a shared file system;
        a reader that meets a half-written record skips it), padded over the previous one."""
        if self._fd is None:
            return
        self._hung = self._hung or hung
        data = (json.dumps(self.record(limit_s=limit_s, hung=hung, ended=ended), separators=(",", ":")) + "\n").encode()
        padded = data.rstrip(b"\n").ljust(max(self._written, len(data)) - 1) + b"\n"
        try:
            os.pwrite(self._fd, padded, 0)
            self._written = len(padded)
        except OSError:
            pass  # a full disk: the heartbeat stops, the run's own writes report it

    def _handle_hang(self, *, step: int, phase: str, stuck_s: float, limit_s: float) -> None:
        mark = {"rank": self.rank, "host": self.host, "step": step, "phase": phase, "stuck_s": round(stuck_s, 1)}
        mark["limit_s"] = limit_s
        try:
            with open(self.run_dir / HANG_MARK, "x") as f:  # the first rank that saw it
                json.dump(mark, f)
        except OSError:
            pass
        self.dump_stacks(
            f"rank {self.rank} on {self.host} (pid {self.pid}): no progress for {stuck_s:.1f} s "
            f"(limit {limit_s:g} s) at step {step} in {phase}"
        )
        self._dump_flight_recorder()
        self._ask_peers_to_dump()
        self.on_hang()

    def dump_stacks(self, title: str) -> None:
        """This process's Python stacks, every thread's, into stacks_rank<R>.txt; py-spy's view (native
        frames of a stuck collective too) after them where py-spy is installed."""
        if self._stacks is None:
            return
        try:
            self._stacks.write(f"=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {title}\n")
            self._stacks.flush()
            faulthandler.dump_traceback(file=self._stacks, all_threads=True)
            self._stacks.flush()
            if (py_spy := shutil.which("py-spy")) is not None:
                spied = subprocess.run(
                    [py_spy, "dump", "--pid", str(self.pid)],
                    capture_output=True,
                    text=True,
                    timeout=PY_SPY_TIMEOUT_S,
                    check=False,
                )
                self._stacks.write(f"--- py-spy dump --pid {self.pid}\n{spied.stdout}{spied.stderr}\n")
                self._stacks.flush()
        except (OSError, ValueError, subprocess.SubprocessError):
            pass

    def _dump_flight_recorder(self) -> None:
        """The NCCL flight recorder's ring (its last collectives, each rank's view of which one it waits in)."""
        try:
            import torch.distributed as dist

            if not (dist.is_available() and dist.is_initialized() and dist.get_backend() == "nccl"):
                return
            from torch._C._distributed_c10d import _dump_nccl_trace

            (self.run_dir / f"{NCCL_TRACE}{self.rank}.pkl").write_bytes(_dump_nccl_trace())
        except Exception as error:  # a private API that moves between torch versions: said, never fatal
            if self._stacks is not None:
                self._stacks.write(f"--- no NCCL flight recorder dump: {type(error).__name__}: {error}\n")
                self._stacks.flush()

    def _ask_peers_to_dump(self) -> None:
        """DUMP_SIGNAL to this host's other ranks whose progress record is fresh (a live process of this run,
        not a pid reused since)."""
        now = time.time()
        for rank, record in run_files.read_progress(self.run_dir).items():
            if rank == self.rank or record.get("host") != self.host or not isinstance(record.get("pid"), int):
                continue
            if now - float(record.get("beat", 0)) > stale_after_s(float(record.get("beat_every_s", 5.0))) + 60:
                continue
            try:
                os.kill(record["pid"], DUMP_SIGNAL)
            except OSError:
                pass

    def _end_process(self) -> None:
        time.sleep(GRACE_S)
        os._exit(HUNG_EXIT)


def spy_on_silent(run_dir: Path, ranks: Mapping[str, Mapping]) -> None:
    """py-spy's stacks of the ranks of this host that did not answer (a stopped process cannot dump its own),
    into their stacks_rank<R>.txt; nothing where py-spy is not installed (the line says they did not answer)."""
    if (py_spy := shutil.which("py-spy")) is None:
        return
    host = socket.gethostname()
    for rank, where in ranks.items():
        if where.get("answered") or where.get("host") != host or not isinstance(where.get("pid"), int):
            continue
        try:
            spied = subprocess.run(
                # --nonblocking: read its memory without suspending it (a stopped process cannot be suspended)
                [py_spy, "dump", "--nonblocking", "--pid", str(where["pid"])],
                capture_output=True,
                text=True,
                timeout=PY_SPY_TIMEOUT_S,
                check=False,
            )
            with open(run_files.stacks_path(run_dir, int(rank)), "a") as f:
                f.write(f"=== rank {rank} did not answer; py-spy dump --nonblocking --pid {where['pid']}\n")
                f.write(f"{spied.stdout}{spied.stderr}\n")
        except (OSError, subprocess.SubprocessError):
            continue


def hang_noticed(run_dir: Path) -> dict | None:
    """The first hang a rank of the run saw (HANG_MARK), or None."""
    try:
        mark = json.loads((Path(run_dir) / HANG_MARK).read_text())
    except (OSError, ValueError):
        return None
    return mark if isinstance(mark, dict) else None


def where_ranks_were(progress: Mapping[int, Mapping], *, at: float) -> dict[str, dict]:
    """{rank: its step, phase, host, seconds in that phase and whether it answered} at time `at` (time.time()),
    from the ranks' progress records (run_files.read_progress)."""
    out = {}
    for rank, record in progress.items():
        beat, since = float(record.get("beat", 0.0)), float(record.get("since", 0.0))
        out[str(rank)] = {
            "step": record.get("step"),
            "phase": record.get("phase"),
            "host": record.get("host"),
            "pid": record.get("pid"),
            "in_phase_s": round(max(0.0, (beat if record.get("hung") else at) - since), 1),
            "saw_hang": bool(record.get("hung")),
            "answered": at - beat <= stale_after_s(float(record.get("beat_every_s", 5.0))),
        }
    return out


def hang_text(mark: Mapping, ranks: Mapping[str, Mapping], *, num_processes: int | None = None) -> str:
    """One line: how long no step advanced, and where each rank was (the first few; the silent ones first)."""
    silent = [r for r, w in ranks.items() if not w["answered"]]
    missing = [] if num_processes is None else [str(r) for r in range(num_processes) if str(r) not in ranks]
    order = silent + [r for r in ranks if r not in silent]
    parts = []
    for r in order[:4]:
        w = ranks[r]
        state = "did not answer (stopped, killed or its host is gone)" if r in silent else "waited"
        parts.append(f"rank {r} ({w['host']}) at step {w['step']} in {w['phase']}: {state}")
    if len(order) > 4:
        parts.append(f"{len(order) - 4} more")
    if missing:
        parts.append(f"rank(s) {', '.join(missing[:4])} never reported")
    return (
        f"no step advanced for {float(mark.get('stuck_s', 0)):.0f} s (limit {float(mark.get('limit_s', 0)):g} s, "
        f"run.hang_timeout_s): " + "; ".join(parts)
    )
