"""The Python a job runs on the nodes (system.python): where it is, and the warning when the nodes may not see
it (launchers/node_python.py); the submit and doctor lines that carry it."""

from __future__ import annotations

import socket

from omegaconf import OmegaConf

from launchers.node_python import filesystem_of, node_python, python_warning

MOUNTINFO = "\n".join(
    [
        "22 1 0:21 / / rw,relatime - ext4 /dev/vda rw",
        "30 22 0:40 / /p/project rw,relatime - lustre 10.0.0.1@o2ib:/fs rw",
        "31 22 0:41 / /home rw,relatime - nfs4 nfs:/home rw",
        r"32 22 0:42 / /scratch\040space rw,relatime - gpfs scratch rw",
        "33 22 0:43 / /tmp rw,relatime - tmpfs tmpfs rw",
    ]
)


def _system(**keys):
    return OmegaConf.create({"python": None, **keys})


def test_the_mount_holding_a_path_is_the_longest_above_it():
    assert filesystem_of("/p/project/venv/bin/python", mountinfo=MOUNTINFO) == ("lustre", "/p/project")
    assert filesystem_of("/home/me/venv/bin/python", mountinfo=MOUNTINFO) == ("nfs4", "/home")
    assert filesystem_of("/scratch space/x", mountinfo=MOUNTINFO) == ("gpfs", "/scratch space")
    assert filesystem_of("/opt/venv/bin/python", mountinfo=MOUNTINFO) == ("ext4", "/")
    assert filesystem_of("/homework/python", mountinfo=MOUNTINFO) == ("ext4", "/")  # not under /home


def test_a_python_on_a_shared_file_system_draws_no_warning():
    system = _system(python="/p/project/venv/bin/python")
    assert python_warning(system, nodes=None, mountinfo=MOUNTINFO) is None


def test_a_python_on_the_login_nodes_own_disk_is_warned_about_with_the_fix():
    line = python_warning(_system(python="/opt/venv/bin/python"), nodes=["jwb0001", "jwb0002"], mountinfo=MOUNTINFO)
    assert line is not None and "\n" not in line
    assert line.startswith("system.python /opt/venv/bin/python lies on this host's own file system (ext4 at /)")
    assert "set system.python=" in line and "run the ranks in an image" in line
    contained = _system(python="/opt/venv/bin/python", container={"runtime": "apptainer"})
    assert "the ranks run in the image" in python_warning(contained, nodes=None, mountinfo=MOUNTINFO)
    unset = python_warning(_system(), nodes=None, mountinfo=MOUNTINFO.replace("ext4", "tmpfs", 1))
    assert unset is not None and "system.python unset: this interpreter" in unset


def test_no_warning_when_every_node_is_this_host():
    system = _system(python="/opt/venv/bin/python")
    assert python_warning(system, nodes=[socket.gethostname()], mountinfo=MOUNTINFO) is None
    assert python_warning(system, nodes=None, mountinfo=MOUNTINFO) is not None  # nodes unknown: warned


def test_node_python_is_system_python_or_this_interpreter():
    import sys

    assert node_python(_system(python="/p/project/venv/bin/python")) == "/p/project/venv/bin/python"
    assert node_python(_system()) == sys.executable


def test_submit_exports_system_python_to_the_job():
    from launchers.campaign import plan
    from launchers.submit import sbatch_command

    overrides = ["experiment=slurm_smoke", "system=slurm_cpu", "system.python=/p/project/venv/bin/python"]
    cfg, cells = plan(overrides)
    argv = sbatch_command(cfg, cells[0], overrides)
    export = next(a for a in argv if a.startswith("--export="))
    assert "DDLBENCH_PYTHON=/p/project/venv/bin/python" in export.split(",")


def test_a_venvs_python_is_where_the_venv_is_not_where_its_link_points(tmp_path):
    """bin/python of a venv links to the base interpreter (/usr/bin/python3.11): the nodes must see the venv."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to("/usr/bin/python3")
    mountinfo = f"22 1 0:21 / / rw - ext4 /dev/vda rw\n30 22 0:40 / {tmp_path} rw - lustre fs rw"
    assert filesystem_of(str(venv_bin / "python"), mountinfo=mountinfo) == ("lustre", str(tmp_path))


def test_doctor_names_the_nodes_python_only_where_jobs_may_run_elsewhere(monkeypatch, tmp_path):
    """A local profile on a host with Slurm's commands but no controller answering: no line (the jobs run here);
    a profile with a partition: the line, the nodes being unknown off the cluster."""
    from ddlbench.doctor import _node_python
    from launchers import node_python, scheduler

    monkeypatch.setattr(scheduler, "available", lambda: True)
    monkeypatch.setattr(scheduler, "partition_nodes", lambda partition: None)
    monkeypatch.setattr(node_python, "filesystem_of", lambda path, mountinfo=None: ("ext4", "/"))
    cfg = OmegaConf.create({"system": {"python": str(tmp_path / "python")}})
    assert _node_python(cfg) == []
    cfg = OmegaConf.create({"system": {"python": str(tmp_path / "python"), "partition": "booster"}})
    (check,) = _node_python(cfg)
    assert check.warn and "compute nodes may not see it" in check.detail


def test_cvmfs_and_non_ascii_mount_points_are_read_as_the_kernel_wrote_them():
    mountinfo = "\n".join(
        [
            "22 1 0:21 / / rw,relatime - ext4 /dev/vda rw",
            "40 22 0:50 / /cvmfs/sft.cern.ch ro,nosuid - fuse cvmfs2 ro,user_id=0",
            r"41 22 0:51 / /proj/müller\040lab rw,relatime - nfs4 nfs:/proj rw",
            "42 22 0:52 / /home/me/remote rw - fuse.sshfs me@login:/ rw",
        ]
    )
    assert filesystem_of("/cvmfs/sft.cern.ch/venv/bin/python", mountinfo=mountinfo) == (
        "fuse.cvmfs2",
        "/cvmfs/sft.cern.ch",
    )
    assert filesystem_of("/proj/müller lab/venv/bin/python", mountinfo=mountinfo) == ("nfs4", "/proj/müller lab")
    on_cvmfs = _system(python="/cvmfs/sft.cern.ch/venv/bin/python")
    assert python_warning(on_cvmfs, nodes=None, mountinfo=mountinfo) is None
    on_sshfs = _system(python="/home/me/remote/venv/bin/python")  # one host's own mount: the nodes lack it
    assert "compute nodes may not see it" in python_warning(on_sshfs, nodes=None, mountinfo=mountinfo)
