"""A cold page cache for data.path (Stash disk/fetch stall): evict the dataset before the run reads it.

Methods, in the order `auto` tries them:
  drop_caches  `echo 1 > /proc/sys/vm/drop_caches` (root, and only where /proc/sys is writable): the
               whole machine's clean page cache goes, as after a reboot;
  fadvise      posix_fadvise(POSIX_FADV_DONTNEED) on every file under data.path after fdatasync: only
               the dataset's pages go (no root needed; clean pages only, which a dataset's are).
Either way the dataset's residency is measured with mincore(2) before and after, so a method that
silently did nothing (a filesystem that ignores fadvise) is visible in meta.json (`cache_evict`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from pathlib import Path
from typing import Any

from benchmarks.adapter_config import Choice
from benchmarks.errors import ConfigError


class CacheState(Choice):
    """data.cache: the page-cache state of data.path when the run starts."""

    warm = "warm"  # as found
    cold = "cold"  # evicted first


class CacheEvict(Choice):
    """data.cache_evict: how a cold cache is made (the module's docstring)."""

    auto = "auto"
    drop_caches = "drop_caches"
    fadvise = "fadvise"


CACHE_STATES = tuple(state.value for state in CacheState)
EVICT_METHODS = tuple(method.value for method in CacheEvict)
DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def check(cache: str, method: str) -> None:
    """ConfigError for a data.cache or data.cache_evict value that does not exist."""
    if cache not in CACHE_STATES:
        raise ConfigError(f"data.cache={cache} is not a cache state; use data.cache=warm or data.cache=cold")
    if method not in EVICT_METHODS:
        raise ConfigError(f"data.cache_evict={method} is not a method; use one of {', '.join(EVICT_METHODS)}")


def dataset_files(path: Path) -> list[Path]:
    """Every regular file below path (or path itself), sorted."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file())


_libc = None
_PROT_READ, _MAP_SHARED = 1, 1


def _libc_calls():
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
        _libc = libc
    return _libc


def resident_bytes(files: list[Path]) -> int | None:
    """Bytes of these files in the page cache now (mincore(2) over a read-only mapping, which itself
    reads nothing); None where libc's mmap/mincore are not available."""
    try:
        libc = _libc_calls()
    except (OSError, AttributeError):
        return None
    page = mmap.PAGESIZE
    total = 0
    for path in files:
        size = path.stat().st_size
        if size == 0:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            address = libc.mmap(None, size, _PROT_READ, _MAP_SHARED, fd, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                return None
            try:
                vec = (ctypes.c_ubyte * ((size + page - 1) // page))()
                if libc.mincore(address, size, vec) != 0:
                    return None
                total += sum(v & 1 for v in vec) * page
            finally:
                libc.munmap(address, size)
        finally:
            os.close(fd)
    return total


def _drop_caches() -> str | None:
    """Drop the machine's clean page cache; None on success, else why not."""
    if os.geteuid() != 0:
        return "not root"
    try:
        os.sync()
        with open(DROP_CACHES, "w") as f:
            f.write("1\n")
    except OSError as error:
        return f"{DROP_CACHES}: {error.strerror or error}"
    return None


def _fadvise(files: list[Path]) -> None:
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # dirty pages (a freshly written dataset) are not dropped by DONTNEED
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def evict(path: Path, *, method: str = "auto") -> dict[str, Any]:
    """Evict the files under `path` from the page cache; returns what was done (for meta.json)."""
    check("cold", method)
    files = dataset_files(path)
    size = sum(p.stat().st_size for p in files)
    before = resident_bytes(files)
    used, refused = method, None
    if method in ("auto", "drop_caches"):
        refused = _drop_caches()
        if refused is None:
            used = "drop_caches"
        elif method == "drop_caches":
            raise ConfigError(
                f"data.cache_evict=drop_caches is not permitted here ({refused}); use data.cache_evict=fadvise or auto"
            )
        else:
            used = "fadvise"
    if used == "fadvise":
        _fadvise(files)
    after = resident_bytes(files)
    return {
        "method": used,
        "drop_caches_refused": refused,
        "num_files": len(files),
        "dataset_bytes": size,
        "resident_before_bytes": before,
        "resident_after_bytes": after,
    }


def prepare(data, *, needs_data: bool, local_rank: int) -> dict[str, Any] | None:
    """The run's hook: with data.cache=cold, local rank 0 of every node evicts data.path (the caller
    barriers after this so no rank reads first). None when nothing was done."""
    check(data.cache, data.cache_evict)
    if data.cache != "cold" or not needs_data or not data.path:
        return None
    if local_rank != 0:
        return {"method": "by local rank 0"}
    return evict(Path(data.path), method=data.cache_evict)


def warm(path: Path) -> dict[str, Any]:
    """Read every file under path once so a warm-cache run finds the dataset in DRAM (Stash's warm side;
    a dataset larger than free memory cannot be all warm: `resident_after_bytes` says how much is)."""
    files = dataset_files(path)
    total = 0
    for file in files:
        with open(file, "rb") as f:
            while chunk := f.read(1 << 20):
                total += len(chunk)
    return {"num_files": len(files), "bytes_read": total, "resident_after_bytes": resident_bytes(files)}
