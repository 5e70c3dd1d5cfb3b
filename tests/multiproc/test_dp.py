"""torch.nn.DataParallel for real on the CPU: one process whatever system.ranks_per_node says, its run
directory named by the devices it trains on (g1 on a CPU), and DDP's parameters after the same steps."""

from __future__ import annotations

import json

import pytest
import torch

from benchmarks.config import compose
from benchmarks.distenv import DistEnv
from benchmarks.frameworks.configs import node_layout
from tests.conftest import find_run, read_summary

COMMON = ["model=simple_cnn", "run.warmup_steps=0", "run.steps=4", "run.log_every=0", "run.save_params=true"]


def test_dp_is_one_process_and_equals_ddp_at_the_same_global_batch(tmp_path, ddlbench):
    # local_cpu has system.ranks_per_node=2: DataParallel still starts one process, on the one CPU device
    dp = ddlbench("run", "framework=dp", *COMMON, "run.per_gpu_batch=8", f"run.root={tmp_path}")
    assert dp.returncode == 0, dp.stderr[-3000:]
    assert "--nproc-per-node=1 " in dp.stderr
    run_dir = find_run(tmp_path / "default", "dp-synthetic-simple_cnn-g1-n1-b8-r0")
    assert sorted(p.name for p in run_dir.glob("rank*.jsonl")) == ["rank0.jsonl"]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert (meta["world_size"], meta["num_processes"]) == (1, 1)
    assert meta["framework"]["framework"] == "dp" and meta["framework"]["device_ids"] == []
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and (summary["world_size"], summary["num_processes"]) == (1, 1)
    assert summary["measured_samples"] == 4 * 8 and summary["peak_allocated_bytes"] is None
    end = json.loads((run_dir / "end_rank0.json").read_text())
    assert end["status"] == "completed" and end["peak_allocated_bytes"] is None

    ddp = ddlbench("run", "framework=ddp", *COMMON, "run.per_gpu_batch=4", f"run.root={tmp_path}")
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    reference = torch.load(find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b4-r0") / "params_rank0.pt")
    ours = torch.load(run_dir / "params_rank0.pt")
    assert ours.keys() == reference.keys()  # the plain module's names, without DataParallel's "module."
    for key in reference:
        torch.testing.assert_close(ours[key], reference[key], rtol=1e-5, atol=1e-6, msg=key)


def test_dp_on_gpus_is_one_process_driving_them():
    """On a GPU system DataParallel's one process drives system.ranks_per_node GPUs: g<W> counts them."""
    assert node_layout(compose(["framework=dp", "system=h200", "system.ranks_per_node=2"])) == (1, 2)
    assert node_layout(compose(["framework=ddp", "system=h200", "system.ranks_per_node=2"])) == (2, 1)
    assert node_layout(compose(["framework=dp"])) == (1, 1)  # the CPU is one device
    env = DistEnv(
        rank=0,
        local_rank=0,
        world_size=1,
        local_world_size=1,
        num_nodes=1,
        master_addr="127.0.0.1",
        master_port=29500,
        source="torchrun",
        devices_per_rank=2,
    )
    assert env.num_devices == 2


def test_dp_dry_run_starts_one_process(tmp_path, cli):
    result = cli(
        "run", "framework=dp", "model=simple_cnn", "system.ranks_per_node=2", f"run.root={tmp_path}", "--dry-run"
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--nproc-per-node=1 " in result.stdout and "-g1-n1-b32-" in result.stdout  # a dry run: stdout


def test_the_slurm_launch_starts_one_task_for_the_allocations_gpus(tmp_path, capsys):
    from benchmarks.errors import ConfigError
    from launchers.slurm import launch

    job = {"SLURM_JOB_ID": "5", "SLURM_NTASKS": "4", "SLURM_JOB_NUM_NODES": "1"}
    assert launch(["framework=dp", "system=generic_8gpu", f"run.root={tmp_path}"], dry_run=True, environ=job) == 0
    out = capsys.readouterr().out  # a dry run's command
    assert " --ntasks=1 --ntasks-per-node=1 " in out and " system.ranks_per_node=4 run.dir=" in out
    assert "/dp-synthetic-resnet50-fp32-g4-n1-b32-" in out  # g<W>: the 4 GPUs the one process drives
    with pytest.raises(ConfigError, match="framework=dp is one process on one node but the job has 2 nodes"):
        launch(["framework=dp", "system=generic_8gpu"], dry_run=True, environ={**job, "SLURM_JOB_NUM_NODES": "2"})
