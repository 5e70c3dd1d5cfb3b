"""`ddlbench doctor` on a GPU profile: whether the installed torch's CUDA runs on the node's driver, and the build
that would (launchers/lifecycle/doctor.py cuda_fit), and an adapter that lacks what GPU runs need (Horovod's NCCL)."""

from __future__ import annotations

import pytest

from launchers.lifecycle.doctor import Check, cuda_fit, for_gpus, format_checks

WHERE = "srun -N1 -p booster python -m ddlbench doctor system=juwels_booster"


def test_a_driver_new_enough_for_torchs_cuda_passes():
    check = cuda_fit("2.14.1+cu130", "13.0", ("580.95.05", "13.0"), where=WHERE)
    assert check.ok and not check.warn
    assert check.detail == (
        "torch 2.14.1+cu130 needs a driver for CUDA 13.x (>= 580.65.06); this node: driver 580.95.05 (CUDA 13.0)"
    )
    # minor version compatibility: a 12.8 build runs on a 12.4 driver
    assert cuda_fit("2.9.0+cu128", "12.8", ("550.54.15", "12.4"), where=WHERE).ok


def test_an_older_driver_is_missing_with_the_build_that_fits():
    check = cuda_fit("2.14.1+cu130", "13.0", ("550.54.15", "12.4"), where=WHERE)
    assert not check.ok
    # minor-version compatibility: the newest 12.x build PyTorch publishes, not the driver's own 12.4
    assert check.fix.startswith("make venv TORCH_CUDA=cu128, or a container built on CUDA 12.x")
    check = cuda_fit("2.14.1+cu130", "13.0", ("570.86.10", "12.8"), where=WHERE)
    assert check.fix.startswith("make venv TORCH_CUDA=cu128")
    # 11.x drivers: no build of this torch runs there
    for driver in (("520.61.05", "11.8"), ("470.82.01", "11.4")):
        check = cuda_fit("2.14.1+cu130", "13.0", driver, where=WHERE)
        assert not check.ok and check.fix.startswith(f"no PyTorch CUDA build of this torch runs on driver {driver[0]}")


def test_without_a_driver_here_it_says_where_to_ask():
    check = cuda_fit("2.14.1+cu130", "13.0", None, where=WHERE)
    assert check.ok and check.warn
    assert check.detail.endswith(f"no NVIDIA driver on this host: check a node with {WHERE}")
    assert format_checks([check]).startswith("WARN cuda driver")


def test_a_cpu_build_of_torch_cannot_run_gpu_ranks():
    check = cuda_fit("2.14.1+cpu", None, ("580.95.05", "13.0"), where=WHERE)
    assert not check.ok and "CPU build" in check.detail and "TORCH_CUDA" in check.fix


def test_an_adapter_lacking_what_gpus_need_is_missing_for_a_gpu_run_only():
    hvd = Check("framework=horovod", True, "0.28.1: gloo yes, mpi yes, nccl no", gpu_ok=False, gpu_fix="make horovod")
    assert hvd.ok  # a CPU run is served
    gpu = for_gpus(hvd)
    assert not gpu.ok and gpu.fix == "make horovod"
    assert for_gpus(Check("x", True, "fine")).ok


@pytest.mark.horovod
def test_horovod_built_here_says_it_lacks_nccl_for_gpu_runs(horovod):
    from benchmarks.frameworks.horovod import Horovod

    found = Horovod.installation()
    assert found.ok  # Gloo and MPI on this CPU machine
    assert not found.gpu_ok and "make horovod" in found.gpu_fix and "NCCL" in found.gpu_fix


def test_doctor_names_the_image_and_its_runtime_or_why_not(capsys):
    """`ddlbench doctor` with a container: a line for the image; an apptainer image that is no file is a
    warning on a Slurm profile (the login node may lack what the nodes have)."""
    from ddlbench.cli import main

    main(["doctor", "system=juwels_booster", "system.container.runtime=apptainer", "system.container.image=/p/no.sif"])
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("WARN container"))
    assert "system.container.image=/p/no.sif is no file" in line
