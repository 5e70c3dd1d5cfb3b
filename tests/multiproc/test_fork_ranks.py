"""The ranks of a CPU run of one thread per rank start as forks of torchrun's agent (JobShape.fork_ranks,
launchers/lifecycle/forked_rank.py): they train exactly what fresh rank processes do (the ranks of a GPU run, of
several threads per rank, and of every other launcher), even forked from a process whose OpenMP thread pool
would not survive the fork."""

from __future__ import annotations

import pytest
import torch

from launchers.local import gpu_driver
from tests.conftest import SMALL_RUN, read_params


@pytest.mark.skipif(gpu_driver(), reason="ranks fork only where no GPU driver is (launchers/local.py ranks_may_fork)")
def test_forked_ranks_train_exactly_what_fresh_ranks_do(ddlbench, monkeypatch, tmp_path):
    overrides = (*SMALL_RUN, "framework=ddp", "system.ranks_per_node=2")
    # this process computes on two threads first: GNU OpenMP's pool, which a fork does not carry over, exists
    # here (a rank that computed on two threads would hang in its first parallel region)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.ones(1 << 22).mul_(2).sum()
    finally:
        torch.set_num_threads(threads)
    forked = ddlbench("run", *overrides, f"run.root={tmp_path / 'forked'}")
    assert forked.returncode == 0, forked.stderr[-3000:]
    assert "--start-method=fork " in forked.stderr

    import launchers.launch

    command = launchers.launch.local_command
    monkeypatch.setattr(launchers.launch, "local_command", lambda **kw: command(**{**kw, "fork_ranks": False}))
    fresh = ddlbench("run", *overrides, f"run.root={tmp_path / 'fresh'}")
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "--start-method=fork" not in fresh.stderr and " -m benchmarks " in fresh.stderr
    (forked_dir,) = (tmp_path / "forked" / "default").iterdir()
    (fresh_dir,) = (tmp_path / "fresh" / "default").iterdir()
    for rank in range(2):
        a, b = read_params(forked_dir, rank), read_params(fresh_dir, rank)
        assert a.keys() == b.keys()
        for name in a:
            assert torch.equal(a[name], b[name]), f"{name} on rank {rank}"
