"""The Python that a job runs on the nodes (system.python), and whether the nodes can see it.

A batch job's step and its ranks run `system.python`, or, where it is unset, the interpreter that submitted
the job (`sys.executable`): a virtual environment on the submitting host. On a cluster that path must be on a
file system the compute nodes mount too (NFS, Lustre, GPFS, BeeGFS, ...). One on the login node's own disk
(ext4, xfs, tmpfs, an overlay) is not seen there, and the job would fail at its first line; `ddlbench doctor`
and `campaign submit` warn before anything is queued. The file system type is read from /proc/self/mountinfo:
the mount that holds the path, by the longest mount point above it.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

# file system types that several hosts mount at once: a path on one of them is seen by the compute nodes (not
# sshfs: a mount of one host's own, which the nodes do not have)
SHARED_FS = frozenset(
    {
        "nfs",
        "nfs4",
        "lustre",
        "gpfs",
        "beegfs",
        "cifs",
        "smb3",
        "ceph",
        "cephfs",
        "panfs",
        "wekafs",
        "glusterfs",
        "fuse.glusterfs",
        "fuse.ceph-fuse",
        "cvmfs",
        "fuse.cvmfs",
        "fuse.cvmfs2",
        "fuse.gcsfuse",
        "afs",
        "dvs",  # Cray's Data Virtualization Service
        "orangefs",
        "pvfs2",
        "quobyte",
        "fuse.quobyte",
    }
)


def node_python(system) -> str:
    """What the job's step and ranks run: system.python, or this interpreter."""
    return str(system.get("python") or sys.executable)


# the sources of FUSE mounts whose type says only "fuse": CernVM-FS mounts as fuse with source cvmfs2
SHARED_FUSE_SOURCES = frozenset({"cvmfs2"})
OCTAL = re.compile(rb"\\([0-7]{3})")


def _unescape(field: str) -> str:
    """A mountinfo path field: spaces, tabs, newlines and backslashes are octal escapes (\\040 ...); the rest,
    non-ASCII names included, stands as the kernel wrote it (UTF-8)."""
    if "\\" not in field:
        return field
    raw = OCTAL.sub(lambda m: bytes([int(m.group(1), 8)]), field.encode("utf-8", "surrogateescape"))
    return raw.decode("utf-8", "surrogateescape")


def filesystem_of(path: str, *, mountinfo: str | None = None) -> tuple[str, str]:
    """(file system type, mount point) of the mount that holds `path` (resolved); ("unknown", "") where
    /proc/self/mountinfo cannot be read (not Linux)."""
    if mountinfo is None:
        try:
            mountinfo = Path("/proc/self/mountinfo").read_text()
        except OSError:
            return "unknown", ""
    # the folder, resolved: a venv's bin/python is a link to its base interpreter (/usr/bin/python3.11), but the
    # nodes must see the venv itself (its site-packages)
    target = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))), os.path.basename(path))
    best = ("unknown", "")
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - " not in line or len(fields) < 5:
            continue
        mount_point = _unescape(fields[4])
        fstype, source = (line.split(" - ", 1)[1].split() + ["", ""])[:2]
        if fstype == "fuse" and source in SHARED_FUSE_SOURCES:
            fstype = "fuse." + source
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best[1]):
            best = (fstype, mount_point)
    return best


def only_this_host(nodes: list[str] | None) -> bool:
    """Whether every node the jobs may run on is this host (known nodes only)."""
    return nodes is not None and set(nodes) <= {socket.gethostname(), socket.gethostname().split(".")[0]}


def python_warning(system, *, nodes: list[str] | None, mountinfo: str | None = None) -> str | None:
    """One line when the nodes may not see the job's Python: it lies on this host's own file system and the
    job may run on another host. `nodes`: the hosts the job may run on, where known (a list of this host's
    name alone: no warning); None: unknown. No line for a shared file system, or inside a container image
    (the ranks run the image's Python; the job's step still runs this one, which is checked all the same)."""
    python = node_python(system)
    fstype, mount_point = filesystem_of(python, mountinfo=mountinfo)
    if fstype in SHARED_FS:
        return None
    if only_this_host(nodes):
        return None  # every node is this host (a single-machine cluster)
    key = "system.python" if system.get("python") else "the job's Python (system.python unset: this interpreter)"
    where = f"{fstype} at {mount_point}" if mount_point else fstype
    contained = str((system.get("container") or {}).get("runtime", "none")) != "none"
    other = " (it runs the job's step; the ranks run in the image)" if contained else " or run the ranks in an image"
    return (
        f"{key} {python} lies on this host's own file system ({where}): compute nodes may not see it; "
        f"set system.python=<a Python on a file system the nodes mount, e.g. a venv in your project folder>{other} "
        "(docs/slurm.md, a campaign at a centre)"
    )
