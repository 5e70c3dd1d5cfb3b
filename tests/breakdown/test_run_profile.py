"""A 2-rank DDP run with the comm hook, a profiler window and telemetry, end to end."""

from __future__ import annotations

import json

import pytest

from analysis.breakdown import run_breakdown
from benchmarks.errors import ConfigError
from benchmarks.profiling import check_window
from tests.conftest import find_run


def test_profile_window_is_checked_with_the_key_named():
    assert check_window(None, total_steps=5) is None
    assert check_window([1, 3], total_steps=5) == (1, 3)
    for bad in ([3, 1], [0, 5], [2]):
        with pytest.raises(ConfigError, match=r"run.profile_steps=.*e.g. run.profile_steps=\[3,5\]"):
            check_window(bad, total_steps=5)


def test_the_first_rank_to_reduce_leaves_the_shared_trace_folder(tmp_path, monkeypatch):
    """A rank done with its trace deletes its own file only: the folder, empty for a moment, is where a slower
    rank is still to export (a 2-rank run failed on the missing file under load); rank 0 removes it once every
    rank is past the barrier (remove_trace_dir). The trace reader is replaced: this is about the files."""
    from benchmarks import profiling

    class Reduced:
        def record(self):
            return {}

    monkeypatch.setattr(profiling.tracereduce, "read_trace", lambda path: None)
    monkeypatch.setattr(profiling.tracereduce, "trace_breakdown", lambda trace, steps: Reduced())
    window = profiling.Window(first=1, last=2, extra_steps=2, keep_trace=False, source="sampled")
    profiling.trace_path(tmp_path, 1).parent.mkdir()
    profiling.trace_path(tmp_path, 1).write_bytes(b"")  # rank 1 exported; rank 0 has not yet
    profiling.reduce_trace(window, run_dir=tmp_path, rank=1)
    assert not profiling.trace_path(tmp_path, 1).exists() and (tmp_path / "trace").is_dir()
    profiling.remove_trace_dir(tmp_path)
    assert not (tmp_path / "trace").exists()


def test_two_rank_run_with_comm_timer_trace_and_telemetry(tmp_path, ddlbench):
    result = ddlbench(
        "run",
        "model=simple_cnn",
        "run.per_gpu_batch=16",
        "run.warmup_steps=1",
        "run.steps=4",
        f"run.root={tmp_path}",
        "run.profile_steps=[2,4]",
        "run.telemetry_hz=20",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b16-r0")
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["framework"]["comm_timer"].startswith("allreduce comm hook")
    for rank in (0, 1):
        steps = [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()[1:]]
        assert [s["step"] for s in steps] == [0, 1, 2, 3, 4]
        # the window [2,4] and the profiler's own warm-up step before it are logged but not measured
        assert [s["profiled"] for s in steps] == [False, True, True, True, True]
        for s in steps:  # every step, also the ones read at the end, has its own comm times
            assert 0 < s["comm_s"] and 0 <= s["comm_exposed_s"] <= s["bwd_s"] + 1e-6
        assert (run_dir / "trace" / f"rank{rank}.pt.trace.json.gz").stat().st_size > 0  # an explicit window keeps it
        reduced = json.loads((run_dir / f"breakdown_rank{rank}.json").read_text())
        assert reduced["source"] == "profile_steps" and reduced["raw_trace"] == f"rank{rank}.pt.trace.json.gz"
        assert reduced["trace"]["steps"] == [2, 3, 4] and reduced["trace"]["collectives_s"]["allreduce"] > 0
        samples = [json.loads(line) for line in (run_dir / f"telemetry_rank{rank}.jsonl").read_text().splitlines()]
        assert samples and all(s["rank"] == rank and s["rss_bytes"] > 0 for s in samples)
        timer, trace, pairs = run_breakdown(run_dir, rank)
        assert timer.steps == trace.steps == [2, 3, 4]
        # agreement itself is asserted on the recorded trace (tests/data/traces): a live run on a
        # loaded CI machine measures the machine too
        assert set(pairs) == {"compute", "comm_exposed", "data+other/idle", "comm_total"}


def test_comm_timer_off_leaves_the_fields_out(tmp_path, ddlbench):
    result = ddlbench(
        "run",
        "model=simple_cnn",
        "run.per_gpu_batch=4",
        "run.warmup_steps=1",
        "run.steps=2",
        f"run.root={tmp_path}",
        "framework.comm_timer=off",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b4-r0")
    steps = [json.loads(line) for line in (run_dir / "rank0.jsonl").read_text().splitlines()[1:]]
    assert steps and all("comm_s" not in s and "comm_exposed_s" not in s for s in steps)


@pytest.mark.parametrize("keep", [False, True])
def test_the_sampled_window_follows_the_measured_steps(tmp_path, keep, ddlbench):
    result = ddlbench(
        "run",
        "model=simple_cnn",
        "run.per_gpu_batch=4",
        "run.warmup_steps=1",
        "run.steps=3",
        f"run.root={tmp_path}",
        "run.trace=on",
        "run.trace_steps=2",
        f"run.keep_trace={str(keep).lower()}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b4-r0")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["measured_steps"] == 3  # the window is added after them, not taken from them
    for rank in (0, 1):
        steps = [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()[1:]]
        assert [s["step"] for s in steps] == list(range(7))  # 1 warm-up, 3 measured, profiler warm-up, 2 traced
        assert [s["profiled"] for s in steps] == [False] * 4 + [True] * 3
        reduced = json.loads((run_dir / f"breakdown_rank{rank}.json").read_text())
        assert reduced["source"] == "sampled" and reduced["window_steps"] == [5, 6]
        assert reduced["trace"]["steps"] == [5, 6] and reduced["trace"]["window_s"] > 0
        assert reduced["raw_trace"] == (f"rank{rank}.pt.trace.json.gz" if keep else None)
        timer, trace, pairs = run_breakdown(run_dir, rank)  # from the breakdown file: the same steps
        assert timer.steps == trace.steps == [5, 6]
    assert (run_dir / "trace").is_dir() == keep


def test_no_sampled_window_on_cpu_by_default(tmp_path, ddlbench):
    result = ddlbench(
        "run",
        "model=simple_cnn",
        "run.per_gpu_batch=4",
        "run.warmup_steps=1",
        "run.steps=2",
        f"run.root={tmp_path}",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b4-r0")
    assert not list(run_dir.glob("breakdown_rank*.json")) and not (run_dir / "trace").exists()


def test_the_sampled_window_records_host_ops_only_off_the_gpu():
    """On a GPU the sampled window records device activity alone (the breakdown reads nothing else, and
    recording every host op can starve a fast GPU); an explicit window and CPU runs keep the host ops."""
    from types import SimpleNamespace

    from benchmarks.profiling import plan_window
    from benchmarks.schema import TraceMode

    run = SimpleNamespace(profile_steps=None, trace_steps=3, trace=TraceMode.on, keep_trace=False)
    assert plan_window(run, device_type="cuda", warmup=2, measured=4).host_ops is False
    assert plan_window(run, device_type="cpu", warmup=2, measured=4).host_ops is True
    explicit = SimpleNamespace(profile_steps=[2, 3], trace_steps=3, trace=TraceMode.on, keep_trace=False)
    assert plan_window(explicit, device_type="cuda", warmup=2, measured=4).host_ops is True
