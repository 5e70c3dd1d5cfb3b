"""Node-local staging (data.stage=node_local): before the loaders are built, one process per node (local rank 0)
copies the data set from the shared file system to the node's own disk (system.local_scratch), and the loaders read
that copy. As MLPerf HPC counts it, the copy is part of the time to train: it happens inside the rank's startup.

Where the copy goes: <scratch>/ddlbench-[<Slurm job id>-]<run directory's name>-<6 hex of its path>/<data.path's name> (and data.val_path's beside it),
the same name on every node, so no node needs to tell another. The copy is a pool of NUM_STREAMS threads over the files
(shutil.copyfile: sendfile(2) on Linux), then a marker file (MARKER) holding what was copied, written last: a
directory without it is no finished copy. Every rank that reads the copy registers (a shared flock on a READER
file, which the kernel drops when the process dies); at the run's end, success or failure, `release` takes its
rank off, and the last to leave deletes the folder, so a failed rank never pulls the copy from under a sibling
still reading it, and a killed one never keeps it. Copies that no live process reads are swept by the next
staging on the same scratch (`sweep_stale`).

The plan-time check (`check_fits`, from `campaign plan|submit` through validate.check_staging_fits) compares
the data set's bytes (walked once per folder, each file rounded up to a 4 KiB block) with
system.local_scratch_gb. Torch-free.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from omegaconf import DictConfig

from benchmarks.errors import ConfigError
from benchmarks.schema import staging_enabled

NUM_STREAMS = (
    8  # parallel copies per node: enough to keep a parallel file system's servers busy, few enough for its MDS
)
MARKER = ".ddlbench-staged.json"
READER = ".ddlbench-reader-{rank}"  # one per rank reading the copy: the last to leave deletes it
PREFIX = "ddlbench-"
GB = 1e9
BLOCK_BYTES = 4096  # the smallest a file takes on the scratch's file system
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")  # $NAME or ${NAME} in system.local_scratch


class StagingError(RuntimeError):
    """A node's copy failed (its disk filled up, a file could not be read): the run stops, every rank with it."""


@dataclass(frozen=True, slots=True)
class NodeStaging:
    """What one node copied: the rank that copied (the node's local rank 0), the staged folders (source -> copy),
    files, bytes and seconds (copy and marker)."""

    rank: int
    host: str
    root: str
    paths: dict[str, str]
    num_files: int
    staged_bytes: int
    staging_s: float

    @property
    def gb_s(self) -> float:
        return self.staged_bytes / GB / self.staging_s if self.staging_s > 0 else 0.0


def scratch_root(local_scratch: str | None, *, environ: dict[str, str] | None = None) -> Path:
    """system.local_scratch with its environment variables ($SLURM_TMPDIR, ${TMPDIR}) expanded on this node."""
    environ = os.environ if environ is None else environ
    if not local_scratch:
        raise ConfigError(
            "data.stage=node_local needs system.local_scratch (the node's own disk); pass "
            "system.local_scratch=/tmp (or in the system profile local_scratch: $TMPDIR), or data.stage=none"
        )
    unset = [name for name in _variables(local_scratch) if not environ.get(name)]
    if unset:
        raise StagingError(
            f"system.local_scratch={local_scratch}: ${unset[0]} is not set on {socket.gethostname()}; set it in "
            "the job or pass system.local_scratch=<a folder on the node's own disk>"
        )
    expanded = VARIABLE.sub(lambda m: environ[m[1] or m[2]], local_scratch)
    return Path(os.path.expanduser(expanded))


def scratch_mount(local_scratch: str | None, *, environ: dict[str, str] | None = None) -> Path | None:
    """The folder a container binds so that a node's ranks share its copy (each rank of a Slurm step runs in a
    container of its own, with its own /tmp): system.local_scratch expanded here, or, where it names a variable
    set on the nodes only, the fixed folder above the first variable; None where nothing is fixed ($TMPDIR)."""
    if not local_scratch:
        return None
    try:
        return scratch_root(local_scratch, environ=environ)
    except StagingError:
        fixed = local_scratch.split("$", 1)[0]
        folder = fixed if fixed.endswith("/") else os.path.dirname(fixed)
        return Path(folder) if folder.strip("/") else None


def _variables(text: str) -> list[str]:
    return [a or b for a, b in VARIABLE.findall(text)]


def run_name(run_dir: Path, *, environ: dict[str, str] | None = None) -> str:
    """The run's name on the nodes' scratch: its directory's name, after the Slurm job's id where there is one (two
    campaigns may run one cell on one node at once; /tmp is shared by every job there)."""
    job = (os.environ if environ is None else environ).get("SLURM_JOB_ID")
    # the directory's name is the cell's and its repeat's: two campaigns (run roots) may run one cell at once
    where = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:6]
    return f"{job}-{run_dir.name}-{where}" if job else f"{run_dir.name}-{where}"


def run_folder(scratch: Path, run_name: str) -> Path:
    """The run's own folder on a node's scratch: the same name on every node of the run."""
    return scratch / f"{PREFIX}{run_name}"


def staged_paths(sources: list[str], folder: Path) -> dict[str, str]:
    """Each source folder -> where its copy goes under `folder` (its name; a repeated name gets its index)."""
    out, names = {}, set()
    for i, source in enumerate(sources):
        name = Path(source).resolve().name or "data"
        name = name if name not in names else f"{name}-{i}"
        names.add(name)
        out[source] = str(folder / name)
    return out


def walk(root: Path):
    """(folder, its file names) for every folder under root, following links to folders once each (a link to a
    parent would loop); an unreadable folder raises OSError: a copy without it would silently lack its files
    (a class folder missing, the labels shifted)."""
    seen: set[tuple[int, int]] = set()

    def fail(error: OSError) -> None:
        raise error

    for folder, subfolders, names in os.walk(root, followlinks=True, onerror=fail):
        here = os.stat(folder)
        if (here.st_dev, here.st_ino) in seen:
            subfolders.clear()
            continue
        seen.add((here.st_dev, here.st_ino))
        subfolders.sort()
        yield Path(folder), sorted(names)


def copy_tree(source: Path, dest: Path, *, streams: int = NUM_STREAMS) -> tuple[int, int]:
    """Copy the tree at `source` to `dest` (which must not exist) with `streams` files in flight; (files, bytes).
    The folders are made first, then `streams` threads take the files one by one (no task per file up front: a
    data set has millions); the first failure stops the others and is raised as a StagingError naming the file."""
    files: list[tuple[Path, Path]] = []
    try:
        for folder, names in walk(source):
            target = dest / folder.relative_to(source)
            target.mkdir(parents=True, exist_ok=target != dest)
            files += [(folder / name, target / name) for name in names]
    except OSError as error:
        if not dest.exists():
            raise StagingError(f"data staging: {source} is not a folder the node can read") from error
        raise StagingError(
            f"data staging on {socket.gethostname()}: cannot list {error.filename or source} "
            f"({error.strerror or error}); the copy would lack its files"
        ) from error
    if not files and not dest.exists():
        raise StagingError(f"data staging: {source} is not a folder the node can read")
    queue, lock, failed = iter(files), threading.Lock(), []
    copied = [0] * max(1, streams)

    def stream(k: int) -> None:
        while not failed:
            with lock:
                pair = next(queue, None)
            if pair is None:
                return
            try:
                shutil.copyfile(*pair)
                copied[k] += pair[1].stat().st_size
            except Exception as error:  # noqa: BLE001 - any failure stops the copy, named
                failed.append((pair, error))

    with ThreadPoolExecutor(max_workers=len(copied), thread_name_prefix="ddlbench-stage") as pool:
        list(pool.map(stream, range(len(copied))))
    if failed:
        (src, dst), error = failed[0]
        said = getattr(error, "strerror", None) or str(error)
        raise StagingError(f"data staging on {socket.gethostname()}: copying {src} to {dst} failed ({said})") from error
    return len(files), sum(copied)


def stage_node(
    sources: list[str], *, scratch: Path, run_name: str, rank: int, streams: int = NUM_STREAMS
) -> NodeStaging:
    """This node's copy of every source folder under its run folder, then the marker (local rank 0 calls it),
    registered as the copy's first reader before the marker is written. A folder left by an earlier, killed
    attempt of the same run is removed first: it is this run's own; so are other runs' copies nobody reads any
    more (sweep_stale; not counted in the staging time)."""
    folder = run_folder(scratch, run_name)
    with contextlib.suppress(OSError):
        sweep_stale(scratch)
    began = time.perf_counter()
    try:
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        paths = staged_paths(sources, folder)
        num_files = staged_bytes = 0
        for source, copy in paths.items():
            files, size = copy_tree(Path(source), Path(copy), streams=streams)
            num_files, staged_bytes = num_files + files, staged_bytes + size
    except FileExistsError as error:
        raise StagingError(
            f"data staging to {folder} on {socket.gethostname()}: another node made the same folder meanwhile, so "
            "system.local_scratch is shared between nodes; set it to a disk of each node's own ($TMPDIR, /dev/shm), "
            "or name the node in it (e.g. <dir>/$SLURMD_NODENAME)"
        ) from error
    except OSError as error:
        raise StagingError(
            f"data staging to {folder} on {socket.gethostname()} failed: {error.strerror or error}; check "
            "system.local_scratch (it must be a writable folder on the node with room for the data set)"
        ) from error
    record = NodeStaging(
        rank=rank,
        host=socket.gethostname(),
        root=str(folder),
        paths=paths,
        num_files=num_files,
        staged_bytes=staged_bytes,
        staging_s=time.perf_counter() - began,
    )
    register(folder, rank)
    (folder / MARKER).write_text(json.dumps(asdict(record)))
    return record


# how often the ranks ask whether every node's copy is done: one all-reduce per poll, so a copy longer than the
# process group's timeout (10 minutes: a data set from a busy parallel file system) never times a collective out
POLL_S = 30.0


def stage(
    sources: list[str],
    *,
    local_scratch: str | None,
    run_dir: Path,
    rank: int,
    local_rank: int,
    reduce,
    streams: int = NUM_STREAMS,
    poll_s: float = POLL_S,
) -> NodeStaging:
    """Every rank calls it, once its process group is up. Local rank 0 of each node copies (in a thread) while
    every rank polls: one all-reduce (`reduce`: the framework's all_reduce_scalar) every poll_s, or as soon as
    this node's copy ends, says whether a node failed or is still copying; the last copy to end completes the last
    poll, so no rank waits longer than the slowest node. A failed copy raises on every rank (on its own node with
    its cause, elsewhere naming it); a rank that cannot see its node's copy too. The copying rank's record goes to
    the run directory (record_name) for the summary."""
    outcome: dict[str, BaseException] = {}
    copier = None
    if local_rank == 0:

        def copy() -> None:
            try:
                record = stage_node(
                    sources, scratch=scratch_root(local_scratch), run_name=run_name(run_dir), rank=rank, streams=streams
                )
                (run_dir / record_name(rank)).write_text(json.dumps(asdict(record)))
            except (StagingError, ConfigError, OSError) as raised:
                outcome["error"] = raised
            except Exception as raised:  # noqa: BLE001 - a node that failed must say so, not look done
                outcome["error"] = StagingError(f"data staging failed on {socket.gethostname()}: {raised!r}")

        copier = threading.Thread(target=copy, name="ddlbench-stage", daemon=True)
        copier.start()
    while True:  # every rank takes the same turns: each poll is one collective of all of them
        if copier is not None:
            copier.join(timeout=poll_s)
        copying = copier is not None and copier.is_alive()
        said = float(rank + 1) if "error" in outcome else 0.5 if copying else 0.0
        state = reduce(said, "max")  # >= 1: a node failed (its copying rank + 1); 0.5: one still copies
        if state != 0.5:
            break
    if "error" in outcome:
        raise outcome["error"]
    if state >= 1:
        raise StagingError(
            f"data staging failed on the node of rank {int(state) - 1} (that rank says why); every rank stops"
        )
    try:
        staged, blind = read_marker(scratch_root(local_scratch), run_name(run_dir)), None
        with contextlib.suppress(OSError):  # unregistered, the copy may go before this rank's end: no worse
            register(Path(staged.root), rank)
    except (StagingError, ConfigError) as error:
        staged, blind = None, error
    unseen = reduce(float(rank + 1) if blind is not None else 0.0, "max")
    if blind is not None:
        raise blind
    if unseen:
        raise StagingError(f"data staging: rank {int(unseen) - 1} does not see its node's copy (it says why)")
    assert staged is not None
    return staged


def read_marker(scratch: Path, run_name: str) -> NodeStaging:
    """The node's finished copy (every rank reads it once the copies are done), or StagingError: no marker."""
    marker = run_folder(scratch, run_name) / MARKER
    try:
        return NodeStaging(**json.loads(marker.read_text()))
    except (OSError, ValueError, TypeError) as error:
        raise StagingError(
            f"data staging: {marker} is missing on {socket.gethostname()}: local rank 0 of this node did not "
            "finish its copy (do the node's ranks see one system.local_scratch?)"
        ) from error


# the reader files this process holds a shared lock on (one per rank; the copying rank's since its copy ended)
_held: dict[Path, int] = {}


def register(folder: Path, rank: int) -> None:
    """Mark `rank` a reader of the copy in `folder`: a shared flock(2) on its READER file, held until release().
    The kernel drops the lock of a process that dies however it dies, so a killed rank never holds a copy."""
    path = folder / READER.format(rank=rank)
    if path in _held:
        return
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    with contextlib.suppress(OSError):  # a file system without flock (Lustre's noflock): the file alone registers
        fcntl.flock(fd, fcntl.LOCK_SH)
    _held[path] = fd


def in_use(folder: Path) -> bool:
    """Whether a live process still reads the copy in `folder` (holds a lock on one of its READER files)."""
    for path in folder.glob(READER.format(rank="*")):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # gone meanwhile: its rank left
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return True  # no flock here: a reader's file is all there is to go by, and it is there
        finally:
            os.close(fd)  # closing drops the probe's own lock
    return False


def release(scratch: Path, run_name: str, *, rank: int, local_rank: int) -> None:
    """At a rank's end, whatever happened: take it off the copy's readers; the last reader to leave deletes the
    run's folder on this node's scratch. A rank that never registered leaves the copy to its readers, except local
    rank 0, whose own copy it is (it deletes a copy nobody reads: a failed or unfinished one). A rank killed
    outright holds no lock any more, so the last of its siblings to leave still deletes the copy; where every
    rank of a node was killed, the next staging on that node's scratch sweeps it (sweep_stale)."""
    folder = run_folder(scratch, run_name)
    mine = folder / READER.format(rank=rank)
    registered = mine in _held
    if registered:
        os.close(_held.pop(mine))
        with contextlib.suppress(OSError):
            mine.unlink()
    if not (registered or local_rank == 0):
        return
    with contextlib.suppress(OSError):
        if in_use(folder):
            return  # a sibling still reads it
    shutil.rmtree(folder, ignore_errors=True)


def sweep_stale(scratch: Path) -> list[Path]:
    """Delete the finished copies (a MARKER) on this scratch that no live process reads: what runs whose every
    rank on this node was killed left behind (a job killed at its time limit on a shared /tmp or /dev/shm). A
    copy being made has no marker yet, and a finished one is locked by its copier from before its marker on."""
    swept = []
    for folder in scratch.glob(PREFIX + "*"):
        with contextlib.suppress(OSError):
            if (folder / MARKER).exists() and not in_use(folder):
                shutil.rmtree(folder, ignore_errors=True)
                swept.append(folder)
    return swept


def record_name(rank: int) -> str:
    """The run directory's file of one node's staging, named by the rank that copied (its local rank 0): unique
    whatever the launcher's placement of ranks on nodes; rank 0 sums them up."""
    return f"staging_rank{rank}.json"


def summary_fields(records: list[NodeStaging]) -> dict:
    """summary.json's staging fields (summary_schema.SUMMARY_FIELDS) from every node's record: the slowest node's
    seconds (the ranks all wait for it), the bytes per node, the slowest node's GB/s and each node's seconds."""
    if not records:
        return {}
    slowest = max(records, key=lambda r: r.staging_s)
    return {
        "staging_s": slowest.staging_s,
        "staging_bytes": slowest.staged_bytes,
        "staging_gb_s_per_node": slowest.gb_s,
        "staging_s_by_node": [r.staging_s for r in sorted(records, key=lambda r: r.rank)],
    }


def read_records(run_dir: Path) -> list[NodeStaging]:
    """Every node's record in the run directory (rank 0, after the last barrier), in the copying ranks' order; a
    record that cannot be read is left out (the summary then holds the nodes it could read)."""
    records = []
    for path in run_dir.glob(record_name(0).replace("0", "*")):
        with contextlib.suppress(OSError, ValueError, TypeError):
            records.append(NodeStaging(**json.loads(path.read_text())))
    return sorted(records, key=lambda r: r.rank)


def dataset_bytes(path: str) -> int:
    """The bytes of every file under `path`, walked once per folder and modification time (a campaign asks for
    one data set in many cells)."""
    root = os.path.abspath(path)
    try:
        changed_ns = os.stat(root).st_mtime_ns
    except OSError:
        changed_ns = None
    return _walk_bytes(root, changed_ns)


@functools.lru_cache(maxsize=64)
def _walk_bytes(root: str, _changed_ns: int | None) -> int:
    """The bytes the copy takes: each file rounded up to a 4 KiB block, as ext4, xfs and tmpfs store it (a set of
    small images takes several times its apparent size). A file the copy could not read (a dangling link) raises
    here too: better at plan time than at the run's start."""
    total = 0
    for folder, names in walk(Path(root)):
        for name in names:
            total += -(-os.stat(folder / name).st_size // BLOCK_BYTES) * BLOCK_BYTES
    return total


def check_fits(sources: list[str], *, local_scratch_gb: float | None) -> None:
    """ConfigError when the data set (every staged folder) is larger than the profile's scratch per node."""
    if local_scratch_gb is None:
        return
    missing = [s for s in sources if not os.path.isdir(s)]
    if missing:
        raise ConfigError(
            f"data.stage=node_local: data.path={missing[0]} does not exist here, so its size cannot be checked "
            f"against system.local_scratch_gb={local_scratch_gb:g}; plan where the data set is, or fix data.path"
        )
    try:
        size_gb = sum(dataset_bytes(s) for s in sources) / GB
    except OSError as error:
        raise ConfigError(
            f"data.stage=node_local: {error.filename or sources[0]} in the data set cannot be read "
            f"({error.strerror or error}), and the copy at the run's start would fail on it; fix or remove it"
        ) from None
    if size_gb > local_scratch_gb:
        raise ConfigError(
            f"data.stage=node_local: the data set ({', '.join(sources)}) is {size_gb:.3g} GB but "
            f"system.local_scratch_gb={local_scratch_gb:g} GB per node; use data.stage=none, a smaller data set "
            "or a profile with more local scratch"
        )


def staged_sources(cfg: DictConfig) -> list[str]:
    """The folders data.stage=node_local copies to each node: data.path, and data.val_path where set."""
    return [str(p) for p in (cfg.data.path, cfg.data.val_path) if p]


def check_staging_fits(cfg: DictConfig) -> None:
    """What the submit host can tell before a staged run starts (campaign plan and submit): its data set fits
    system.local_scratch_gb (walked once per folder; not checked where the size is null)."""
    if not staging_enabled(cfg.data):
        return
    check_fits(staged_sources(cfg), local_scratch_gb=cfg.system.local_scratch_gb)
