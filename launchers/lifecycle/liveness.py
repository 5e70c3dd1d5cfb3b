"""Who runs a run directory, and whether that owner still lives. Torch-free; benchmarks/rundir/'s `state`
reads it (a directory without summary.json is `running` or `dead`, never just incomplete).

- The claim: the launching process (`ddlbench run`, or `python -m launchers.slurm launch` in a Slurm job)
  creates <run dir>/owner.json exclusively (O_CREAT | O_EXCL, atomic on local file systems and on NFS v3+,
  Lustre and GPFS): {host, pid, pid_start, started, slurm_job_id, heartbeat_every_s}. Of two launches of
  one directory exactly one creates it; the other is told who holds it (`Taken`).
- The heartbeat: while the run lives, its launching process sets owner.json's modification time every
  HEARTBEAT_EVERY_S (`Heartbeat`, a daemon thread of launchers/lifecycle/supervise.py run_launcher).
- The verdict (`judge`, pure): an owner on this host whose pid is gone (or was reused: its start time
  differs) is dead at once; any owner whose heartbeat is older than dead_after_s() (DEAD_AFTER_S, or
  DDLBENCH_DEAD_AFTER_S) is dead; else it is running. A rank of the run still alive on this host (its pid
  from its rank log's header) keeps it running whatever its owner, and so does a run that wrote a failed
  summary while its processes here still end (`finishing`). A directory without owner.json (a run of an
  older ddlbench, ranks started by hand) is judged by its newest file's age alone.
- Nothing outlives its owner: a rank stops once its launcher is gone (`exit_when_orphaned`); the supervisor's
  reaper kills the launcher's process group once the supervisor is gone.

Why a heartbeat file and not an advisory lock (flock/fcntl): a lock's meaning depends on the file system
under the run root. flock on NFS is emulated with fcntl locks (Linux >= 2.6.12) and held by the server's
lock manager, whose recovery after a client dies waits out a grace period and is often disabled on
clusters (nolock mounts); Lustre grants flock only when mounted with -o flock (localflock makes it
node-local, noflock refuses it); GPFS honours fcntl locks across nodes but not everywhere flock. A lock
that one mount honours and another silently ignores would let two processes into one directory. An
exclusively created file and a modification time are honoured by all of them; the price is a limit to wait
out (DEAD_AFTER_S) when the owner's host is another, and a tolerance for clock skew between hosts (the limit
minus the refresh interval: 55 s by default).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.errors import ConfigError

OWNER = "owner.json"
HEARTBEAT_EVERY_S = 5.0  # how often the owner refreshes owner.json's modification time
DEAD_AFTER_S = 60.0  # a heartbeat older than this: the owner is gone (another host's clock may be off by seconds)
DEAD_AFTER_ENV = "DDLBENCH_DEAD_AFTER_S"


def dead_after_s(environ: Mapping[str, str] | None = None) -> float:
    """The heartbeat age beyond which an owner is dead: DDLBENCH_DEAD_AFTER_S, else DEAD_AFTER_S."""
    value = (os.environ if environ is None else environ).get(DEAD_AFTER_ENV)
    try:
        return float(value) if value else DEAD_AFTER_S
    except ValueError:
        raise ConfigError(f"{DEAD_AFTER_ENV}={value} is no number of seconds; unset it or write e.g. 60") from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Life:
    """What a directory without a summary is: `running` or `dead`, why, and its heartbeat's age."""

    state: str
    reason: str
    age_s: float | None
    owner: dict | None

    def says(self) -> str:
        """One phrase for a table or an error: who holds it and how fresh its heartbeat is."""
        age = "" if self.age_s is None else f", last heartbeat {self.age_s:.0f} s ago"
        return f"{self.reason}{age}"


class Taken(ConfigError):
    """The directory has an owner already (another launch created owner.json first)."""

    def __init__(self, run_dir: Path, owner: dict | None) -> None:
        super().__init__(f"run directory {run_dir} is held by {who(owner)}")
        self.run_dir, self.owner = run_dir, owner


def who(owner: Mapping[str, Any] | None) -> str:
    """'pid 123 on host n1 (Slurm job 77), since 2026-12-05T01:00:00+0000' of an owner record."""
    if not owner:
        return "an unknown process (no owner.json)"
    job = f" (Slurm job {owner['slurm_job_id']})" if owner.get("slurm_job_id") else ""
    return f"pid {owner.get('pid')} on {owner.get('host')}{job}, since {owner.get('started')}"


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (state first); None where /proc does not say."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _pid_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22): tells a reused pid
    from the owner; None where /proc is not there."""
    fields = _stat(pid)
    return None if fields is None else int(fields[19])


def pid_alive(pid: int, pid_start: int | None = None) -> bool:
    """The process `pid` of this host exists and, where its start time was recorded, is the same process."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, under another user
    fields = _stat(int(pid))
    if fields is not None and fields[0] in ("Z", "X"):
        return False  # killed, not yet reaped (a container's init may take its time)
    if pid_start is not None:
        now = _pid_start(int(pid))
        return now is None or now == pid_start
    return True


def owner_record(*, environ: Mapping[str, str] | None = None) -> dict:
    """This process as a run's owner."""
    environ = os.environ if environ is None else environ
    array = environ.get("SLURM_ARRAY_JOB_ID")
    job = f"{array}_{environ['SLURM_ARRAY_TASK_ID']}" if array and environ.get("SLURM_ARRAY_TASK_ID") else None
    return {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "pid_start": _pid_start(os.getpid()),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "started_s": time.time(),
        "heartbeat_every_s": HEARTBEAT_EVERY_S,
        "slurm_job_id": job or environ.get("SLURM_JOB_ID"),
    }


def read_owner(run_dir: Path) -> dict | None:
    try:
        owner = json.loads((Path(run_dir) / OWNER).read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return owner if isinstance(owner, dict) else None


def claim(run_dir: Path) -> dict:
    """Make this process the owner of run_dir (created if absent): owner.json created exclusively. Taken,
    naming the holder, when another process created it first."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    record = owner_record()
    try:
        fd = os.open(run_dir / OWNER, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        raise Taken(run_dir, read_owner(run_dir)) from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(record, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError:
        (run_dir / OWNER).unlink(missing_ok=True)  # a full disk: no half-written claim is left to judge
        raise
    return record


def is_mine(owner: Mapping[str, Any] | None) -> bool:
    return bool(owner) and owner.get("host") == socket.gethostname() and owner.get("pid") == os.getpid()


def release(run_dir: Path) -> None:
    """Give up a claim that never launched (an error before the launch): owner.json goes, and the directory
    too when nothing else is in it."""
    run_dir = Path(run_dir)
    if is_mine(read_owner(run_dir)):
        (run_dir / OWNER).unlink(missing_ok=True)
        try:
            run_dir.rmdir()
        except OSError:
            pass  # something else is there: the directory stays


def last_write_s(run_dir: Path) -> float | None:
    """The heartbeat: owner.json's modification time; without one, the newest file's in the directory."""
    run_dir = Path(run_dir)
    try:
        return (run_dir / OWNER).stat().st_mtime
    except OSError:
        pass
    times = []
    for path in run_dir.iterdir() if run_dir.is_dir() else ():
        try:
            times.append(path.stat().st_mtime)
        except OSError:
            continue  # gone meanwhile
    return max(times, default=None)


def rank_pids(run_dir: Path, *, host: str) -> list[int]:
    """The pids of this run's ranks on `host` that still live: from the rank logs' header lines, each pid
    alive and started before its log was last written (else the pid was reused by another process); not
    this process (a rank run in it, as `ddlbench maxbatch` probes, has ended when it asks)."""
    pids = []
    for path in Path(run_dir).glob("rank*.jsonl"):
        try:
            with open(path, "rb") as f:
                header = json.loads(f.readline())
            written_s = path.stat().st_mtime
        except (OSError, ValueError):
            continue
        if not (isinstance(header, dict) and header.get("host") == host and isinstance(header.get("pid"), int)):
            continue
        started_s = _pid_started_s(header["pid"])
        if _alive_but_me(header["pid"], None) and (started_s is None or started_s <= written_s + 1.0):
            pids.append(header["pid"])
    return pids


def _pid_started_s(pid: int) -> float | None:
    """When process `pid` started (time.time()), from /proc; None where /proc does not say."""
    ticks = _pid_start(pid)
    try:
        boot_s = next(float(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime"))
    except (OSError, StopIteration, ValueError):
        return None
    return None if ticks is None else boot_s + ticks / os.sysconf("SC_CLK_TCK")


def judge(
    owner: Mapping[str, Any] | None,
    *,
    age_s: float | None,
    this_host: str,
    alive: Callable[[int, int | None], bool],
    limit_s: float,
    ranks_here: Sequence[int] = (),
) -> tuple[str, str]:
    """(`running` | `dead`, why) of a directory without a summary: pure, over its owner record, its
    heartbeat's age and, for an owner on this host, whether its pid lives; a rank of it still alive on this
    host (ranks_here: their pids, rank_pids) keeps it running whatever its owner (it may still write there)."""
    pid, host = (owner or {}).get("pid"), (owner or {}).get("host")
    held = f"held by pid {pid} on {host}" + (
        f" (Slurm job {owner['slurm_job_id']})" if owner and owner.get("slurm_job_id") else ""
    )
    owner_here = bool(owner) and host == this_host and isinstance(pid, int)
    if owner_here and alive(pid, owner.get("pid_start")):
        return "running", held
    if ranks_here:
        return "running", f"rank pid(s) {', '.join(map(str, sorted(ranks_here)))} on {this_host} still run"
    if owner_here:
        return "dead", f"its launching process (pid {pid} on {host}) is gone"
    if not owner:
        if age_s is None or age_s > limit_s:
            return "dead", f"no owner record and nothing written for more than {limit_s:.0f} s"
        return "running", "no owner record (ranks started by hand, or an older ddlbench); written recently"
    if age_s is not None and age_s > limit_s:
        return "dead", f"no heartbeat from pid {pid} on {host} for more than {limit_s:.0f} s"
    return "running", held


def examine(run_dir: Path, *, now_s: float | None = None) -> Life:
    """The Life of a run directory without a summary."""
    owner = read_owner(run_dir)
    written = last_write_s(run_dir)
    now_s = time.time() if now_s is None else now_s
    age_s = None if written is None else max(0.0, now_s - written)
    host = socket.gethostname()
    state, reason = judge(
        owner,
        age_s=age_s,
        this_host=host,
        alive=_alive_but_me,
        limit_s=dead_after_s(),
        ranks_here=rank_pids(run_dir, host=host),
    )
    return Life(state=state, reason=reason, age_s=age_s, owner=owner)


def _alive_but_me(pid: int, pid_start: int | None) -> bool:
    """pid_alive, but this process is not running the run it is asking about (`campaign run` and `run -m`
    launch cell after cell from one process: a run it launched earlier and that ended is not alive)."""
    return pid != os.getpid() and pid_alive(pid, pid_start)


def finishing(run_dir: Path) -> bool:
    """A run that wrote its summary but whose processes on this host still end (the owner writing up a failure,
    a rank writing its end record): not to be moved yet. Other hosts' processes are not seen."""
    owner = read_owner(run_dir)
    host = socket.gethostname()
    if owner and owner.get("host") == host and isinstance(owner.get("pid"), int):
        if _alive_but_me(owner["pid"], owner.get("pid_start")):
            return True
    return bool(rank_pids(run_dir, host=host))


class Heartbeat:
    """While entered: this process owns run_dir (claimed here unless it is already) and a daemon thread
    refreshes owner.json's modification time every `every_s`. Taken when another process owns it."""

    def __init__(self, run_dir: Path, *, every_s: float = HEARTBEAT_EVERY_S) -> None:
        self.path, self.every_s = Path(run_dir) / OWNER, every_s
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    def hold(self) -> Heartbeat:
        """Make sure this process owns the directory: claim it if nobody does; Taken if another process does."""
        owner = read_owner(self.path.parent)
        if owner is None:
            claim(self.path.parent)
        elif not is_mine(owner):
            raise Taken(self.path.parent, owner)
        return self

    def __enter__(self) -> Heartbeat:
        return self.hold()

    def start(self) -> None:
        """Start beating (after the launcher started: a fork of this process does not inherit the thread)."""
        self.thread = threading.Thread(target=self._beat, daemon=True, name="run-heartbeat")
        self.thread.start()

    def _beat(self) -> None:
        while not self.stopped.wait(self.every_s):
            try:
                os.utime(self.path)
            except OSError:
                pass  # the directory was moved or its file system went away: the verdict is the reader's

    def stop(self) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(1.0)

    def __exit__(self, *_exc) -> None:
        self.stop()


def exit_when_orphaned(*, every_s: float = 1.0, grace_s: float = 10.0) -> None:
    """In a rank: once its launcher is gone (this process was re-parented: a torchrun agent killed with
    SIGKILL, a supervisor killed whose reaper took the launcher), stop as on SIGTERM (the run is marked
    interrupted where rank 0 can still write), then SIGKILL after grace_s (a rank stuck in a collective): no
    rank outlives its launcher to write into a directory a retry has taken."""
    import signal

    parent = os.getppid()
    if parent == 1:
        return  # started by init itself (a container's entry point): there is no launcher to outlive

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True, name="orphan-watch").start()
