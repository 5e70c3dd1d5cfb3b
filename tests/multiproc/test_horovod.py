"""Horovod for real on CPU ranks: Gloo (horovodrun) and MPI (mpirun) runs, equivalence with DDP (simple_cnn
over a few steps; ResNet-18 with BatchNorm over one update, with the CPU loaded), and the one-line error when
horovod is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.models import build_model
from tests.conftest import SMALL_RUN, cpu_loaded

REPO = Path(__file__).resolve().parents[2]
MISSING_HOROVOD = "framework=horovod needs the horovod package; run 'make horovod' (see README#horovod)"


def run(shared_runs, *overrides: str) -> Path:
    """The shared run of SMALL_RUN with these overrides (tests/multiproc/test_deepspeed.py reads the same DDP runs)."""
    return shared_runs(*SMALL_RUN, *overrides)


def params(run_dir: Path, rank: int) -> dict[str, torch.Tensor]:
    state = torch.load(run_dir / f"params_rank{rank}.pt")
    # DDP's state_dict names carry its wrapper's "module." prefix
    return {k.removeprefix("module."): v for k, v in state.items()}


def assert_complete(run_dir: Path, *, world_size: int, controller: str) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert summary["world_size"] == world_size and summary["framework"] == "horovod"
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["framework"]["controller"] == controller
    assert meta["framework"]["weights_memory_format"].startswith("contiguous")
    for rank in range(world_size):
        steps = [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()]
        steps = [s for s in steps if "step_s" in s]
        assert len(steps) == 4
        assert all(s["comm_exposed_s"] is not None and s["comm_exposed_s"] >= 0 for s in steps)


def test_gloo_two_ranks_complete_run_directory(shared_runs, horovod):
    assert_complete(run(shared_runs, "framework=horovod", "system.ranks_per_node=2"), world_size=2, controller="gloo")


def test_mpi_two_ranks_complete_run_directory(shared_runs, horovod, mpirun):
    run_dir = run(shared_runs, "framework=horovod", "framework.local_launcher=mpirun")
    assert_complete(run_dir, world_size=2, controller="mpi")


@pytest.mark.parametrize("ranks", [2, 3])
def test_same_parameters_as_ddp(shared_runs, horovod, ranks):
    trained = run(shared_runs, "framework=horovod", f"system.ranks_per_node={ranks}")
    ddp = run(shared_runs, "framework=ddp", f"system.ranks_per_node={ranks}")
    reference = params(ddp, 0)
    for rank in range(ranks):
        got = params(trained, rank)
        assert got.keys() == reference.keys()
        for name, value in reference.items():
            torch.testing.assert_close(got[name], value, rtol=1e-5, atol=1e-6, msg=f"{name} on rank {rank}")
    # and training moved the weights: the comparison is not between two initial states
    initial = torch.nn.utils.parameters_to_vector(
        build_model(arch="simple_cnn", depth=None, num_classes=10, seed=0).parameters()
    )
    trained = torch.cat([v.flatten() for v in reference.values()])
    assert not torch.allclose(initial, trained)


# ResNet-18: BatchNorm and a max-pool, which simple_cnn lacks
BATCHNORM_RUN = (
    "model=resnet",
    "model.depth=18",
    "model.image_size=32",
    "model.num_classes=10",
    "loader=synthetic",
    "run.per_gpu_batch=4",
    "run.warmup_steps=0",
    "run.steps=1",
    "run.log_every=0",
    "run.save_params=true",
    "optim.lr=0.01",
)


@pytest.mark.parametrize("ranks", [2, 3])
def test_batchnorm_model_update_equals_ddps_to_rounding_under_cpu_load(shared_runs, horovod, ranks):
    """One update of ResNet-18 under Horovod (default fusion, the CPU loaded) equals DDP's to float rounding:
    a gradient reduced before it was complete, or averaged over the wrong ranks, would be off by a share of
    the update itself. Later updates are not compared: rounding differences grow over steps on this model
    (max-pool and ReLU switches), and Horovod's fusion sums in a load-dependent order (docs/horovod.md,
    perf/rounding_cpu.py)."""
    # Horovod's fusion cycles then group the gradients as on a loaded machine, not a quiet one
    with cpu_loaded():
        trained = shared_runs(*BATCHNORM_RUN, "framework=horovod", f"system.ranks_per_node={ranks}")
    ddp = params(shared_runs(*BATCHNORM_RUN, "framework=ddp", f"system.ranks_per_node={ranks}"), 0)
    initial = build_model(arch="resnet", depth=18, num_classes=10, seed=0, image_size=32).state_dict()
    moved = 0.0
    for rank in range(ranks):
        got = params(trained, rank)
        for name, value in ddp.items():
            if "running_" in name or "num_batches" in name:
                continue  # BatchNorm's statistics are each rank's own under Horovod (DDP broadcasts rank 0's)
            scale = float(value.abs().max())
            assert float((got[name] - value).abs().max()) <= 2e-6 * scale, f"{name} on rank {rank}"
            moved = max(moved, float((value - initial[name]).abs().max()) / scale)
    assert moved > 1e-3  # the update moved the weights far beyond the tolerance


def test_missing_horovod_is_one_line_error(tmp_path, rank_processes):
    # horovod made unimportable in a fresh interpreter (None in sys.modules stops the import)
    code = (
        "import sys, runpy; sys.modules['horovod'] = None; "
        "sys.argv = ['benchmarks', 'framework=horovod', 'model=simple_cnn', 'loader=synthetic', "
        f"'run.root={tmp_path}']; runpy.run_module('benchmarks', run_name='__main__')"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"ddlbench: error: {MISSING_HOROVOD}"


def test_local_launch_commands_are_exact():
    from launchers.local import local_command

    over = ["framework=horovod"]
    assert local_command(launcher="horovodrun", nproc=2, master_port=1, overrides=over) == [
        sys.executable,
        "-m",
        "horovod.runner.launch",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "--gloo",
        sys.executable,
        "-m",
        "benchmarks",
        *over,
    ]
    # OpenMPI refuses root unless told; the flag appears only when we are root
    for as_root, flag in ((True, ["--allow-run-as-root"]), (False, [])):
        assert local_command(launcher="mpirun", nproc=3, master_port=1, overrides=over, as_root=as_root) == [
            "mpirun",
            "-np",
            "3",
            *flag,
            "--bind-to",
            "none",
            "--oversubscribe",
            sys.executable,
            "-m",
            "benchmarks",
            *over,
        ]
