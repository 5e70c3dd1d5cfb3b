"""`ddlbench maxbatch`: the search (doubling, then bisection), each probe's outcome read from its run
directory (fits, out of memory, any other failure), the table and the answer, and the one-line refusal
on a CPU system. The probes' runs are stood in for by a fake (of `cmd_run`, and of the probe in this process)
that writes what a rank writes (a GPU out of memory cannot happen on this machine); the OOM records themselves
are rundir's. One test runs two real probes in this process, the first failing out of memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from benchmarks import maxbatch
from benchmarks.maxbatch import Probe
from benchmarks.rundir import run_files, summary_schema
from ddlbench import cli
from ddlbench import maxbatch as maxbatch_command
from launchers.lifecycle import rundir_state


@pytest.mark.parametrize(
    ("largest", "asked"),
    [
        (1, [1, 2]),
        (3, [1, 2, 4, 3]),
        (10, [1, 2, 4, 8, 16, 12, 10, 11]),
        (16, [1, 2, 4, 8, 16, 32, 24, 20, 18, 17]),
    ],
)
def test_without_a_capacity_the_search_doubles_then_bisects(largest, asked):
    seen: list[int] = []

    def fits(batch: int) -> Probe:
        seen.append(batch)
        return Probe(batch, batch <= largest)

    assert maxbatch.search(fits, start=1, limit=1024) == (largest, largest + 1)
    assert seen == asked  # each batch probed once


def test_the_search_ends_at_its_limits():
    assert maxbatch.search(lambda b: Probe(b, False), start=4, limit=64) == (None, 4)
    assert maxbatch.search(lambda b: Probe(b, True), start=3, limit=50) == (50, None)  # 3, 6, ..., 48, 50
    assert maxbatch.search(lambda b: Probe(b, True, 2**20 * b), start=3, limit=50, capacity_bytes=2**40) == (50, None)


GIB = 2**30


def _fake_device(*, fixed_gib: float, per_sample_gib: float, usable_gib: float, small_peak_gib: float = 0.0):
    """fits(batch) of a fake GPU: peak = fixed + per-sample x batch (at least small_peak: a small batch's peak
    can be the optimizer step's, as BERT-large's at batch 1-10 on the H200), out of memory above usable."""
    seen: list[int] = []

    def fits(batch: int) -> Probe:
        seen.append(batch)
        peak = int(max(fixed_gib + per_sample_gib * batch, small_peak_gib) * GIB)
        return Probe(batch, peak <= usable_gib * GIB, peak)

    return fits, seen


# ResNet-50-like (the H200's ResNet-50 bf16 probes: 0.46 GiB at 1, 137.2 GiB at 3157), BERT-large-like
# with the optimizer's peak at small batches, a GPU with 5% less usable than free (the planning headroom
# assumes 2%), one with all of it usable, and no fixed part at all
FAKES = {
    "resnet50": dict(fixed_gib=0.4, per_sample_gib=0.0433, usable_gib=138.0),
    "bert_large": dict(fixed_gib=5.4, per_sample_gib=0.385, usable_gib=137.5, small_peak_gib=8.0),
    "short_of_free": dict(fixed_gib=2.0, per_sample_gib=0.05, usable_gib=133.0),
    "all_usable": dict(fixed_gib=1.0, per_sample_gib=0.1, usable_gib=139.8),
    "no_fixed_part": dict(fixed_gib=0.0, per_sample_gib=0.5, usable_gib=139.0),
}


@pytest.mark.parametrize("name", FAKES)
@pytest.mark.parametrize("resolution", [0.01, 0.0])
def test_extrapolation_brackets_the_doubling_searchs_answer_in_few_probes(name, resolution):
    old_fits, old_seen = _fake_device(**FAKES[name])
    old_fit, old_fail = maxbatch.search(old_fits, start=1, limit=65536)
    assert old_fail == old_fit + 1  # the doubling search is exact
    new_fits, new_seen = _fake_device(**FAKES[name])
    fit, fail = maxbatch.search(new_fits, start=1, limit=65536, capacity_bytes=int(139.8 * GIB), resolution=resolution)
    assert fit <= old_fit < fail  # the old answer lies in the new bracket ...
    assert fail - 1 - fit <= resolution * fit  # ... whose batches not probed are within the resolution
    assert len(new_seen) < len(old_seen), new_seen
    if resolution:
        assert len(new_seen) <= 9, new_seen
    assert len(set(new_seen)) == len(new_seen)


def test_resnet50_on_the_h200_takes_four_probes():
    fits, seen = _fake_device(**FAKES["resnet50"])
    fit, fail = maxbatch.search(fits, start=1, limit=65536, capacity_bytes=int(139.8 * GIB), resolution=0.01)
    assert len(seen) <= 5, seen
    assert fail - fit <= 1 + fit // 100


def test_tolerance_counts_the_batches_not_probed():
    assert maxbatch.tolerance(3157, 0.01) == 32  # 3157 fits, 3189 out of memory: 31 not probed, 1% of 3157
    assert maxbatch.tolerance(3157, 0.0) == 1
    assert maxbatch.tolerance(10, 0.01) == 1


def test_a_cpu_system_is_refused_in_one_line(capsys):
    assert cli.main(["maxbatch", "model=simple_cnn"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "ddlbench: error: ddlbench maxbatch searches GPU memory, but system=local_cpu runs on the CPU "
        "(system.device=cpu), which has none to fill; pass a GPU system, e.g. "
        "'ddlbench maxbatch system=h200 model=resnet model.depth=50'"
    ]


def _fake_runs(monkeypatch, *, largest: int, broken: int | None = None, oom_only_in_end_record: bool = False):
    """Both ways of probing (a `cmd_run` of its own, a run in this process) stood in for by a fake that writes
    the run directory a GPU run would: completed up to `largest` per GPU, out of memory above it (in
    summary.json, or only in rank 1's end record, as when the launcher killed rank 0)."""

    def probe(overrides_list: list[str]) -> int:
        overrides = dict(o.split("=", 1) for o in overrides_list)
        batch = int(overrides["run.per_gpu_batch"])
        run_dir = next(
            p for p in sorted((Path(overrides["run.root"]) / "maxbatch").iterdir()) if not rundir_state.holds_a_run(p)
        )  # the fresh directory maxbatch made for this probe
        assert overrides.get("run.dir", str(run_dir.resolve())) == str(run_dir.resolve())
        (run_dir / run_files.CONFIG).write_text("run: {}\n")
        peaks = {"peak_allocated_bytes": batch * 2**30, "peak_reserved_bytes": batch * 2**30 + 2**28}
        if batch == broken:
            run_files.write_json_atomic(
                run_dir / run_files.SUMMARY, summary_schema.failed_summary(ValueError("bad JPEG"))
            )
            return 1
        if batch <= largest:
            for rank in (0, 1):
                (run_dir / f"rank{rank}.jsonl").write_text('{"kind": "header"}\n')
                run_files.write_json_atomic(
                    summary_schema.end_path(run_dir, rank), summary_schema.end_record(rank=rank, peaks=peaks)
                )
            summary = {
                "status": "completed",
                "throughput_img_s": 100.0 * batch,
                **summary_schema.memory_of_run(run_dir, num_processes=2),
            }
            run_files.write_json_atomic(run_dir / run_files.SUMMARY, summary)
            return 0
        oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        (run_dir / "rank1.jsonl").write_text('{"kind": "header"}\n')
        run_files.write_json_atomic(
            summary_schema.end_path(run_dir, 1), summary_schema.end_record(rank=1, peaks=peaks, error=oom)
        )
        if not oom_only_in_end_record:
            run_files.write_json_atomic(run_dir / run_files.SUMMARY, summary_schema.failed_summary(oom))
        return 1

    in_process: list[bool] = []
    monkeypatch.setattr(maxbatch_command, "cmd_run", lambda args: in_process.append(False) or probe(args.overrides))
    monkeypatch.setattr(
        maxbatch_command, "probe_in_this_process", lambda overrides: in_process.append(True) or probe(overrides)
    )
    return in_process


# one GPU (system=h200): in this process by default; --fresh-processes: a `ddlbench run` each
WAYS = pytest.mark.parametrize("fresh", [[], ["--fresh-processes"]], ids=["in_process", "fresh_processes"])


@WAYS
@pytest.mark.parametrize("oom_only_in_end_record", [False, True])
def test_probes_find_the_largest_batch_that_fits(tmp_path, monkeypatch, capfd, oom_only_in_end_record, fresh):
    in_process = _fake_runs(monkeypatch, largest=10, oom_only_in_end_record=oom_only_in_end_record)
    code = cli.main(["maxbatch", "system=h200", "model=simple_cnn", f"run.root={tmp_path}", *fresh])
    out = capfd.readouterr().out
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].split() == [
        "batch/GPU",
        "status",
        "peak",
        "alloc",
        "GiB",
        "peak",
        "reserved",
        "GiB",
        "img/s",
        "run",
    ]
    table = [line.split() for line in lines[1:9]]
    assert [(row[0], " ".join(row[1:-4])) for row in table] == [
        ("1", "fits"),
        ("2", "fits"),
        ("4", "fits"),
        ("8", "fits"),
        ("16", "out of memory"),
        ("12", "out of memory"),
        ("10", "fits"),
        ("11", "out of memory"),
    ]
    assert table[6][-4:-1] == ["10.00", "10.25", "1,000.0"]
    assert lines[-1] == (
        "largest per-GPU batch that fits: 10; 11 is out of memory; peak allocated 10.00 GiB, "
        "reserved 10.25 GiB (the largest over the ranks)"
    )
    # a fresh run directory per probe in the scratch campaign, each with the probe's output
    probes = sorted((tmp_path / "maxbatch").iterdir())
    assert len(probes) == 8 and all((p / "probe.log").is_file() for p in probes)
    assert all("-b" in p.name for p in probes)
    assert in_process == [not fresh] * 8


def test_several_gpus_probe_in_fresh_processes(tmp_path, monkeypatch, capfd):
    in_process = _fake_runs(monkeypatch, largest=3)
    argv = ["maxbatch", "system=h200", "system.ranks_per_node=2", "model=simple_cnn", f"run.root={tmp_path}"]
    assert cli.main(argv) == 0, capfd.readouterr()
    assert in_process and not any(in_process)


@WAYS
def test_a_probe_that_fails_otherwise_stops_the_search(tmp_path, monkeypatch, capfd, fresh):
    _fake_runs(monkeypatch, largest=10, broken=4)
    assert cli.main(["maxbatch", "system=h200", "model=simple_cnn", f"run.root={tmp_path}", *fresh]) == 2
    captured = capfd.readouterr()
    assert [line.split()[:2] for line in captured.out.splitlines()[1:]] == [
        ["1", "fits"],
        ["2", "fits"],
        ["4", "failed"],
    ]
    assert (
        "ddlbench: error: the probe at run.per_gpu_batch=4 failed, not for lack of memory (exit code 1)" in captured.err
    )
    assert ("--fresh-processes" in captured.err) == (not fresh)  # the other way, where it may help


def test_nothing_fits(tmp_path, monkeypatch, capfd):
    _fake_runs(monkeypatch, largest=0)
    assert cli.main(["maxbatch", "system=h200", "model=simple_cnn", f"run.root={tmp_path}", "--start", "2"]) == 1
    assert "no batch fits: run.per_gpu_batch=2 is already out of memory (1 GPU(s))" in capfd.readouterr().out


def test_bad_bounds_and_run_dir_are_refused(capsys):
    assert cli.main(["maxbatch", "system=h200", "--start", "8", "--max", "4"]) == 2
    assert "need 1 <= --start <= --max" in capsys.readouterr().err
    assert cli.main(["maxbatch", "system=h200", "run.dir=/tmp/x"]) == 2
    assert "run.dir=/tmp/x cannot be set for maxbatch" in capsys.readouterr().err


def test_out_of_memory_is_its_own_failure():
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 MiB")
    assert summary_schema.failed_summary(oom)["out_of_memory"] is True
    assert (
        summary_schema.failed_summary(RuntimeError("NCCL error: unhandled cuda error (out of memory)"))["out_of_memory"]
        is True
    )
    assert summary_schema.failed_summary(ValueError("corrupt JPEG"))["out_of_memory"] is False
    end = summary_schema.end_record(rank=3, peaks={"peak_allocated_bytes": 5, "peak_reserved_bytes": 8}, error=oom)
    assert end == {
        "schema_version": 1,
        "rank": 3,
        "status": "failed",
        "out_of_memory": True,
        "error": "OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
        "peak_allocated_bytes": 5,
        "peak_reserved_bytes": 8,
    }


def test_memory_summary_takes_the_largest_peak_over_the_ranks():
    ends = [
        {"peak_allocated_bytes": 3, "peak_reserved_bytes": 4},
        None,
        {"peak_allocated_bytes": 7, "peak_reserved_bytes": 9},
    ]
    assert summary_schema.memory_summary(ends) == {
        "peak_allocated_bytes": 7,
        "peak_reserved_bytes": 9,
        "peak_allocated_bytes_by_rank": [3, None, 7],
        "peak_reserved_bytes_by_rank": [4, None, 9],
    }
    cpu = [{"peak_allocated_bytes": None, "peak_reserved_bytes": None}] * 2
    assert set(summary_schema.memory_summary(cpu).values()) == {None}


def test_probes_in_this_process_recover_from_an_out_of_memory(tmp_path, monkeypatch, rank_here):
    """maxbatch's probes on one GPU, for real on the CPU: two runs in this process, the first failing out of
    memory in its first step (raised by a stand-in for the loop: a CPU has no GPU memory to fill), the
    second training after it (process group, model and loader built anew) with its own runtime."""
    from launchers.lifecycle import rank

    calls: list[int] = []

    def train(**kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real_train(**kwargs)

    real_train = rank.train
    monkeypatch.setattr(rank, "train", train)
    monkeypatch.setattr(os, "environ", os.environ.copy())  # the probe sets system.env and MASTER_PORT
    threads = torch.get_num_threads()  # a CPU run sets its rank's threads (system.cpus_per_rank)
    base = ["model=simple_cnn", "system.ranks_per_node=1", "run.warmup_steps=1", "run.steps=2", "run.log_every=0"]
    try:
        assert (
            maxbatch_command.probe_in_this_process([*base, f"run.dir={tmp_path / 'b64'}", "run.per_gpu_batch=64"]) == 1
        )
        assert maxbatch_command.probe_in_this_process([*base, f"run.dir={tmp_path / 'b8'}", "run.per_gpu_batch=8"]) == 0
    finally:
        torch.set_num_threads(threads)
    assert rundir_state.state(tmp_path / "b64") == "failed" and summary_schema.ran_out_of_memory(tmp_path / "b64")
    assert rundir_state.state(tmp_path / "b8") == "completed"
    summary = run_files.read_summary(tmp_path / "b8")
    assert summary["per_gpu_batch"] == 8 and 0 < summary["runtime_s"] < 60
