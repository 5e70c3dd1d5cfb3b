"""A CPU run's ranks start as forks of torchrun's agent (JobShape.fork_ranks, benchmarks/freshstart.py): they
train exactly what fresh rank processes do (the ranks of a GPU run, and of every other launcher)."""

from __future__ import annotations

import torch

from tests.conftest import SMALL_RUN, read_params


def test_forked_ranks_train_exactly_what_fresh_ranks_do(shared_runs, ddlbench, monkeypatch, tmp_path):
    overrides = (*SMALL_RUN, "framework=ddp", "system.ranks_per_node=2")
    forked = shared_runs(*overrides)  # the session's DDP run, read by test_horovod and test_deepspeed too
    assert "--start-method=fork" in shared_runs.stderr(forked)

    import launchers.local

    command = launchers.local.local_command
    monkeypatch.setattr(launchers.local, "local_command", lambda **kw: command(**{**kw, "fork_ranks": False}))
    fresh = ddlbench("run", *overrides, f"run.root={tmp_path}")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "--start-method=fork" not in fresh.stderr and " -m benchmarks " in fresh.stderr
    (fresh_dir,) = (tmp_path / "default").iterdir()
    for rank in range(2):
        a, b = read_params(forked, rank), read_params(fresh_dir, rank)
        assert a.keys() == b.keys()
        for name in a:
            assert torch.equal(a[name], b[name]), f"{name} on rank {rank}"
