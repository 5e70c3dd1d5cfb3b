"""Run a launcher (torchrun, horovodrun, mpirun, deepspeed, srun) and stand by its run directory.

- Its output passes through line by line. Once the run is interrupted, the rest goes to
  <run dir>/interrupt.log: the ranks' and launchers' tracebacks of an interruption are kept, not shown.
- Ctrl-C or SIGTERM (Slurm's time limit, `kill`) interrupts the run: the launcher and its ranks are
  signalled (SIGINT, then SIGTERM after `grace_s`, then SIGKILL), the run is marked `interrupted` and one
  line says so. A retry of the same cell is allowed: `ddlbench run` moves an interrupted or failed run
  into <campaign>/attic/.
- The run's owner: this process holds <run dir>/owner.json (claimed here unless `ddlbench run` did) and
  refreshes it every few seconds while the launcher lives (launchers/lifecycle/liveness.py); a local launcher's
  process group is killed by a small reaper process once this process is gone, however it went (kill -9
  included), and a rank whose launcher is gone stops (liveness.exit_when_orphaned): nothing outlives its
  owner to write into a directory that a retry has taken.
- A launcher that exits non-zero while no summary.json was written (rank 0 killed, by the OOM killer
  for one) leaves a failed summary written here, under every launcher.
- A launcher that is `python -m <module>` of this interpreter, whose package this process has imported
  already (torchrun: torch), may start as a fork of this process that runs the module as `python -m`
  would (Launcher.forks): the same program with the same argv and environment, without a fresh Python
  and torch (3.6 s of every local run on the 2-core CPU machine). A CPU run's ranks may fork from it in
  turn (JobShape.fork_ranks, launchers/lifecycle/forked_rank.py).
"""

from __future__ import annotations

import atexit
import json
import os
import re
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback
import warnings
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.errors import ConfigError
from benchmarks.rundir import run_files, summary_schema
from launchers.lifecycle import beats, fault_report, liveness, watchdog
from launchers.lifecycle.forked_rank import as_fresh_interpreter

INTERRUPT_LOG = "interrupt.log"
INTERRUPTED_EXIT = 130
# the launcher's and ranks' output from the first traceback on (or from a hang): kept here, not shown; only
# ddlbench's own "[ddlbench] " lines still pass, and one line says what failed where
FAULT_LOG = "fault.log"
# a line that opens a traceback (Python's, Hydra's note before it, torch elastic's record of a failed rank) or
# says that the launcher is stopping the ranks that are left (torch's multiprocessing, a rank's SIGTERM)
FAULT_START = re.compile(
    rb"Traceback \(most recent call last\):|Error executing job with overrides|\] failed \(exitcode: "
    rb"|\] Terminating process \d+ via signal|^ddlbench: interrupted \(SIGTERM\)|exited on signal \d+"
)
OWN_LINE = b"[ddlbench] "
KEPT_LINES = 2000  # what the fault log keeps in memory when it cannot be written (a full disk)
HUNG_EXIT = watchdog.HUNG_EXIT
# once a rank saw a hang: the seconds its ranks have to dump their stacks and exit before the launcher is stopped
HANG_GRACE_S = watchdog.GRACE_S + 3.0


class _Interrupted(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _raise_on(signum, _frame) -> None:
    raise _Interrupted(signal.Signals(signum).name)


class _Output:
    """Copies the launcher's stderr to ours until the run is interrupted (then into the run's interrupt.log)
    or a traceback starts (then into its fault.log: ddlbench's own lines still pass); what the run directory
    cannot take (a full disk, no directory) is kept in `unwritten`."""

    def __init__(self, stream, run_dir: Path) -> None:
        self.stream, self.run_dir = stream, run_dir
        self.quiet = threading.Event()
        self.faulted = threading.Event()
        self.unwritten: deque[bytes] = deque(maxlen=KEPT_LINES)
        self.log_path: Path | None = None
        self.thread = threading.Thread(target=self._copy, daemon=True, name="launcher-stderr")
        self.thread.start()

    def _copy(self) -> None:
        log = None
        for line in iter(self.stream.readline, b""):
            if not self.quiet.is_set() and not self.faulted.is_set() and FAULT_START.search(line):
                self.faulted.set()
            if not self.quiet.is_set() and (not self.faulted.is_set() or line.startswith(OWN_LINE)):
                try:
                    sys.stderr.buffer.write(line)
                    sys.stderr.buffer.flush()
                except (OSError, ValueError):  # our stderr is gone (a closed pipe): keep draining theirs
                    self.quiet.set()
                continue
            if log is None and not self.unwritten and self.run_dir.is_dir():
                self.log_path = self.run_dir / (INTERRUPT_LOG if self.quiet.is_set() else FAULT_LOG)
                try:
                    log = open(self.log_path, "ab")
                except OSError:
                    self.log_path = None
            try:
                if log is None:
                    raise OSError
                log.write(line)
                log.flush()
            except (OSError, ValueError):
                self.unwritten.append(line)
        if log is not None:
            try:
                log.close()
            except OSError:
                pass

    def join(self, timeout_s: float) -> None:
        self.thread.join(timeout_s)


class _Forked:
    """`python -m MODULE ARGS` as a fork of this process running the module: what subprocess.Popen offers
    run_launcher (pid, stderr, wait, send_signal). The child resets what this process set (signal handlers,
    Python's stdout and stderr, warnings filters, exit handlers, the environment) to what a fresh
    `python -m` has, runs the module as __main__, and exits with its code."""

    def __init__(self, module: str, args: Sequence[str], *, env: Mapping[str, str], own_group: bool) -> None:
        read_fd, write_fd = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        with warnings.catch_warnings():
            # Python >= 3.12 warns that a fork of a threaded process may deadlock: the child runs only the
            # launcher's own code (no lock of another thread of ours is taken), as multiprocessing's fork does
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(read_fd)
            _run_module_here(module, args, env=env, own_group=own_group, stderr_fd=write_fd)
        os.close(write_fd)
        self.pid, self.returncode, self.args = pid, None, [sys.executable, "-m", module, *args]
        self.stderr = os.fdopen(read_fd, "rb")

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            pid, status = os.waitpid(self.pid, 0 if deadline is None else os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
            elif time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            else:
                time.sleep(0.05)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)


def _run_module_here(module: str, args: Sequence[str], *, env: Mapping[str, str], own_group: bool, stderr_fd: int):
    """In the forked child: become `python -m module args` with `env`, stderr into stderr_fd; exit with the
    module's code, as the interpreter would (an uncaught exception: its traceback and 1; Ctrl-C: killed by
    SIGINT)."""
    code = 1
    try:
        if own_group:
            os.setsid()
        os.dup2(stderr_fd, 2)
        os.close(stderr_fd)
        as_fresh_interpreter()
        os.environ.clear()
        os.environ.update(env)
        sys.argv = [module, *args]
        sys.modules.pop(module, None)  # run afresh as __main__, as `python -m` does
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        if exit_.code is None or isinstance(exit_.code, int):
            code = exit_.code or 0
        else:
            print(exit_.code, file=sys.stderr)
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            if code == -signal.SIGINT:  # as the interpreter ends on Ctrl-C: killed by SIGINT
                signal.signal(signal.SIGINT, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGINT)
            os._exit(code & 0xFF)


def _start(argv: Sequence[str], *, env: Mapping[str, str], own_group: bool, fork: bool):
    """The launcher's process: a fork that runs its module (fork, argv `python -m <module> ...` of this
    interpreter, the module's package imported here already), else a fresh process."""
    argv = list(argv)
    if fork and argv[:2] == [sys.executable, "-m"] and len(argv) > 2 and argv[2].split(".")[0] in sys.modules:
        return _Forked(argv[2], argv[3:], env=env, own_group=own_group)
    return subprocess.Popen(argv, env=dict(env), stderr=subprocess.PIPE, start_new_session=own_group)


def run_launcher(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    run_dir: Path,
    own_group: bool = True,
    fork: bool = False,
    grace_s: float = 10.0,
    name: str | None = None,
    cleanup: Sequence[str] | None = None,
    **summary_extra,
) -> int:
    """Run `argv` to its end; the exit code (INTERRUPTED_EXIT after an interruption). own_group: the
    launcher and its ranks get a process group of their own, which this process signals (local
    launchers); else only the launcher is signalled (srun passes signals on to its tasks). fork: the
    launcher may run as a fork of this process (Launcher.forks; see the module's docstring). name: how a
    failure's summary names the launcher (default: argv[0]'s file name). cleanup: a command run once the launcher
    is gone, however it went (by the reaper too): what removes a container its killed client left running
    (launchers/container.py stop_argv)."""
    stopping = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)  # SIGHUP: the terminal or ssh session went away
    previous = {s: signal.getsignal(s) for s in stopping}
    interrupted, process, output, reaper = None, None, None, None
    hang = None
    heartbeat = liveness.Heartbeat(run_dir).hold()  # this process owns run_dir; Taken if another does
    _reserve(run_dir)
    try:
        for s in stopping:
            signal.signal(s, _raise_on)
        process = _start(argv, env=env, own_group=own_group, fork=fork)
        reaper = (
            _reaper(process.pid, cleanup=cleanup) if own_group else None
        )  # started after the fork: the launcher holds no pipe
        heartbeat.start()
        output = _Output(process.stderr, run_dir)
        code, hang = _wait(process, run_dir=run_dir, own_group=own_group, output=output)
    except _Interrupted as signalled:
        interrupted = signalled.name
        for s in stopping:  # a second signal does not cut the clean-up short
            signal.signal(s, signal.SIG_IGN)
        if process is None:
            raise KeyboardInterrupt from None  # before the launcher started: nothing ran
        output.quiet.set()
        code = _stop(process, own_group=own_group, grace_s=grace_s)
    finally:
        if process is not None and own_group:
            _kill_group(process.pid)  # no rank outlives its launcher
        if process is not None and cleanup:
            _clean_up(cleanup)  # nor its container
        _stop_reaper(reaper)
        heartbeat.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
    output.join(5.0)
    fault_report.drop_empty_stacks(run_dir)
    summary = run_files.read_summary(run_dir) if run_dir.is_dir() else None
    if interrupted is not None and summary is not None and summary.get("status") == "completed":
        interrupted, code = None, 0  # the run had finished: its result stands
    if interrupted is None and hang is not None:
        return fault_report.write_up_hang(run_dir, summary, hang, extra=summary_extra)
    if interrupted is not None:
        if run_dir.is_dir() and (summary is None or summary.get("status") != "interrupted"):
            # what a rank wrote (a collective's error once its peers stopped) follows from the interruption
            extra = {"rank_error": summary["error"]} if summary and summary.get("error") else {}
            run_files.write_json_atomic(
                run_dir / run_files.SUMMARY, summary_schema.interrupted_summary(interrupted, **extra, **summary_extra)
            )
        where = f"; its logs are in {run_dir} ({INTERRUPT_LOG}: the ranks' last words)" if run_dir.is_dir() else ""
        print(
            f"[ddlbench] interrupted ({interrupted}): the run is marked interrupted{where}; `ddlbench run` with the "
            "same overrides (or `campaign submit`) runs the cell again",
            file=sys.stderr,
            flush=True,
        )
        return INTERRUPTED_EXIT
    if code != 0 and run_dir.is_dir():
        written = fault_report.write_up_failure(
            run_dir, summary, launcher=name or Path(argv[0]).name, code=code, extra=summary_extra
        )
        rank0_error = summary.get("error") if summary and summary.get("status") == "failed" else None
        line = fault_report.fault_text(run_dir, rank0_error=rank0_error, written=written, output=output)
        print(f"ddlbench: error: the run failed: {line}", file=sys.stderr, flush=True)
    return code


def _reserve(run_dir: Path) -> None:
    """Space for the run's summary (run_files.reserve_space), taken before anything starts: a directory that takes
    no file, or has no room, refuses the run in one line."""
    try:
        run_files.reserve_space(run_dir)
    except OSError as error:
        raise ConfigError(
            f"the run directory {run_dir} cannot be written ({error.strerror or error}: "
            f"{error.filename or run_dir}); free space there, fix its permissions, or choose another run.root"
        ) from None


def _wait(process, *, run_dir: Path, own_group: bool, output: _Output) -> tuple[int, dict | None]:
    """(the launcher's exit code, the hang a rank saw or None). Once a rank's watchdog saw a hang
    (launchers/lifecycle/watchdog.py HANG_MARK), where each rank was is read at once (a stopped rank's record grows
    old), and the launcher and its ranks get HANG_GRACE_S to dump their stacks and exit: a stopped rank never
    does, and torchrun waits 30 s for a rank that ignores its SIGTERM. A rank whose own beat stopped (frozen:
    the only rank, every rank of a host; launchers/lifecycle/beats.py) is judged here, from outside: the run
    is then stopped after watchdog.GRACE_S, its frozen ranks of this host killed outright."""
    hang, deadline, judge = None, None, beats.BeatJudge(gone=beats.gone_here)
    while True:
        try:
            return process.wait(timeout=1.0), hang
        except subprocess.TimeoutExpired:
            pass
        if hang is None and (mark := watchdog.hang_noticed(run_dir)) is not None:
            progress = watchdog.where_ranks_were(run_files.read_progress(run_dir), at=time.time())
            watchdog.spy_on_silent(run_dir, progress)  # a stopped rank's stacks, where py-spy is installed
            hang, deadline = {"mark": mark, "ranks": progress}, time.monotonic() + HANG_GRACE_S
            output.faulted.set()  # the ranks' and launcher's words on their way out go to the fault log
        elif hang is None and (frozen := beats.notice(run_dir, judge)) is not None:
            # a rank's beat stopped (beats.py): no watchdog of a frozen rank can say so; the answering ranks of
            # this host dump their stacks meanwhile
            hang, deadline = frozen, time.monotonic() + watchdog.GRACE_S
            output.faulted.set()
        elif deadline is not None and time.monotonic() > deadline:
            beats.kill_frozen_here(hang)
            if own_group:
                _kill_group(process.pid)
                return process.wait(), hang
            return _stop(process, own_group=False, grace_s=5.0), hang


# the reaper: reads its stdin to the end (this process gone: the pipe's only writer closed), then kills the group
# and runs the clean-up command, if any (its argv as JSON)
_REAPER = (
    "import os, sys, json, subprocess\nsys.stdin.buffer.read()\ntry:\n    os.killpg(int(sys.argv[1]), 9)\n"
    "except OSError:\n    pass\nif len(sys.argv) > 2:\n    try:\n        subprocess.run(json.loads(sys.argv[2]), "
    "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)\n    except (OSError, subprocess.SubprocessError):\n"
    "        pass\n"
)


def _clean_up(argv: Sequence[str]) -> None:
    """Run the clean-up command (its output and failure ignored: nothing may be left to remove)."""
    try:
        subprocess.run(list(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
    except (OSError, subprocess.SubprocessError):
        pass


def _reaper(pgid: int, *, cleanup: Sequence[str] | None = None) -> subprocess.Popen | None:
    """A process in a session of its own that kills the launcher's process group `pgid` once this process is
    gone, however it went (kill -9 of ddlbench's process group included: the pipe it waits on closes), so
    that no launcher or rank trains on without its owner. None where it cannot start (the run goes on)."""
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _REAPER, str(pgid), *([json.dumps(list(cleanup))] if cleanup else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        return None


def _stop_reaper(reaper: subprocess.Popen | None) -> None:
    """The launcher's group is gone: end the reaper first, so that it kills nothing once the pipe closes."""
    if reaper is not None:
        reaper.kill()
        reaper.wait()
        reaper.stdin.close()


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stop(process, *, own_group: bool, grace_s: float) -> int:
    """The launcher's exit code (negative: a signal) after SIGINT, then SIGTERM after grace_s, then SIGKILL
    to its process group (local launchers); srun gets SIGTERM first (a single SIGINT only makes it print
    its tasks' state), which it passes on to its tasks."""
    steps = ((signal.SIGINT, grace_s), (signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0))
    if not own_group:
        steps = ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0))
    for sig, wait_s in steps:
        try:
            if own_group:
                os.killpg(process.pid, sig)
            else:
                process.send_signal(sig)
        except ProcessLookupError:
            pass
        try:
            return process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    return process.wait()


def announce(argv: Sequence[str], *, dry_run: bool, label: str = "") -> None:
    """The launch command: a dry run prints it bare on stdout (to read or to paste); a real launch says it on
    stderr, beside the ranks' output."""
    import shlex

    if dry_run:
        print(shlex.join(argv), flush=True)
    else:
        print(f"[ddlbench] {label}{shlex.join(argv)}", file=sys.stderr, flush=True)
