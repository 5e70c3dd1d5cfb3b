"""ddlbench commbench: the nccl-tests formulas, sizes, the launch argv, and 2-rank sweeps (gloo, DeepSpeed, Horovod)."""
from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from benchmarks.commbench import allreduce_busbw_factor, allreduce_measurement, sizes
from launchers.commbench import commbench_command

from tests.conftest import ddlbench

RECORD_FIELDS = {"op", "backend", "world_size", "size_bytes", "time_s", "algbw_gb_s", "busbw_gb_s"}


def test_sizes_are_powers_of_two_from_1_kib():
    assert sizes(1024, 8192) == [1024, 2048, 4096, 8192]
    assert sizes(1024, 4 * 1024**3)[-1] == 4 * 1024**3 and len(sizes(1024, 4 * 1024**3)) == 23


def test_busbw_as_nccl_tests_define_it():
    assert allreduce_busbw_factor(2) == 1.0
    assert allreduce_busbw_factor(8) == pytest.approx(1.75)
    m = allreduce_measurement(backend="nccl", world_size=8, size_bytes=2**30, time_s=0.005)
    assert m.algbw_gb_s == pytest.approx(2**30 / 0.005 / 1e9)
    assert m.busbw_gb_s == pytest.approx(m.algbw_gb_s * 2 * 7 / 8)
    assert set(m.record()) == RECORD_FIELDS


def test_launch_argv_reuses_the_run_launchers():
    argv = commbench_command(launcher="torchrun", nproc=4, master_port=29500, rank_args=["--out", "x.json"])
    assert argv == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                    "--master-port=29500", "-m", "benchmarks.commbench", "--out", "x.json"]
    argv = commbench_command(launcher="horovodrun", nproc=2, master_port=0, rank_args=["--backends", "horovod"])
    assert argv[-4:] == ["-m", "benchmarks.commbench", "--backends", "horovod"] and "--gloo" in argv


def test_user_errors_name_the_flag(tmp_path):
    existing = tmp_path / "c.json"
    existing.write_text("[]")
    result = ddlbench("commbench", "--out", str(existing))
    assert result.returncode == 2 and "--out" in result.stderr and "never overwritten" in result.stderr
    result = ddlbench("commbench", "--backends", "torch,horovod", "--out", str(tmp_path / "d.json"))
    assert result.returncode == 2 and "--backends horovod" in result.stderr


@pytest.mark.multiproc
def test_gloo_sweep_on_two_ranks(tmp_path):
    out = tmp_path / "commbench-gloo.json"
    result = ddlbench("commbench", "--nproc", "2", "--max-bytes", "8192", "--warmup", "1", "--iters", "3",
                      "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(out.read_text())
    assert [r["size_bytes"] for r in records] == [1024, 2048, 4096, 8192]
    for r in records:
        assert RECORD_FIELDS <= set(r)
        assert (r["op"], r["backend"], r["world_size"], r["device"]) == ("all_reduce", "gloo", 2, "cpu")
        assert r["time_s"] > 0 and r["algbw_gb_s"] == pytest.approx(r["size_bytes"] / r["time_s"] / 1e9)
        assert r["busbw_gb_s"] == pytest.approx(r["algbw_gb_s"])  # 2(n-1)/n = 1 at n = 2
        assert (r["iters"], r["warmup_iters"]) == (3, 1)
    assert "busbw GB/s" in result.stdout


@pytest.mark.multiproc
@pytest.mark.parametrize("backends", ["deepspeed", "horovod"])
def test_framework_backends_on_two_ranks(tmp_path, backends):
    """DeepSpeed's comm (on commbench's torch.distributed group) and Horovod (under horovodrun), through
    the Collectives their framework adapters build."""
    if importlib.util.find_spec(backends) is None:
        pytest.skip(f"{backends} is not installed: run 'make {backends}'")
    out = tmp_path / f"commbench-{backends}.json"
    result = ddlbench("commbench", "--nproc", "2", "--backends", backends, "--max-bytes", "2048", "--warmup", "1",
                      "--iters", "2", "--out", str(out), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    records = json.loads(out.read_text())
    assert [(r["backend"], r["world_size"], r["size_bytes"]) for r in records] == [(backends, 2, 1024), (backends, 2, 2048)]
