"""2-rank DDP over gloo, end to end through `ddlbench run` (torchrun underneath)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import benchmarks
from benchmarks.models import build_model
from benchmarks.validate import host_cpus
from tests.conftest import find_run, read_summary

TINY = ["model=simple_cnn", "run.per_gpu_batch=4", "run.warmup_steps=1", "run.steps=3", "run.log_every=1"]


def test_two_rank_run_writes_a_complete_run_directory(tmp_path, ddlbench):
    result = ddlbench("run", *TINY, f"run.root={tmp_path}", "run.save_params=true")
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b4-r0")
    assert {p.name for p in run_dir.iterdir()} >= {
        "config.yaml",
        "meta.json",
        "rank0.jsonl",
        "rank1.jsonl",
        "summary.json",
    }
    summary = read_summary(run_dir)
    assert summary["status"] == "completed"
    assert run_dir.name.split("-")[-2] == summary["cell_hash"]  # the directory is named by its run key
    assert (summary["world_size"], summary["measured_steps"], summary["measured_samples"]) == (2, 3, 2 * 3 * 4)
    assert summary["wall_s"] > 0  # still recorded, no longer the throughput's denominator
    # MFU and energy (issue 53): FLOPs counted, no peak on a CPU, no NVML or RAPL here: null, each with its reason
    assert summary["model_flops_per_sample"] > 0 and summary["achieved_tflops_per_gpu"] > 0
    assert (summary["mfu"], summary["peak_tflops"], summary["mfu_note"]) == (None, None, "CPU: no peak table")
    assert summary["energy_j"] is None and summary["energy_j_per_sample"] is None and summary["avg_power_w"] is None
    assert "GPU: none (no NVML)" in summary["energy_note"]
    assert summary["window_start_t_s"] < summary["window_end_t_s"]
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["world_size"] == 2 and meta["framework"]["backend"] == "gloo" and "git_sha" in meta
    # the code each rank ran (issue 64): rank 0's in meta.json, every rank's in its header, the same here
    assert (
        meta["code"]["package"] == str(Path(benchmarks.__file__).resolve().parents[1]) and meta["code_mixed"] is False
    )
    headers = [json.loads((run_dir / f"rank{r}.jsonl").read_text().splitlines()[0]) for r in (0, 1)]
    assert [h["code"] for h in headers] == [meta["code"]] * 2
    # the host's load, from the CPUs of the launcher that started the ranks (issue 49: more ranks than CPUs)
    cores = host_cpus()
    assert meta["host_ranks"] == 2 and meta["host_cores"] == cores and meta["oversubscribed"] is (2 > cores)
    slowest: dict[int, float] = {}  # measured step -> the slowest rank's step_s
    samples = 0
    for rank in (0, 1):
        lines = [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()]
        header, steps = lines[0], lines[1:]
        assert header["kind"] == "header" and header["rank"] == rank and header["schema_version"] == 1
        assert [s["step"] for s in steps] == [0, 1, 2, 3]
        assert [s["warmup"] for s in steps] == [True, False, False, False]
        assert [s["profiled"] for s in steps] == [False] * 4  # no profiler window asked for
        for s in steps:
            if not s["warmup"] and not s["profiled"]:
                slowest[s["step"]] = max(slowest.get(s["step"], 0.0), s["step_s"])
                samples += s["samples"]
            assert s["step_s"] >= s["data_s"] + s["fwd_s"] + s["bwd_s"] + s["opt_s"] - 1e-6
            # the host's own view: blocked in next(), then queueing the step (synchronous on CPU)
            assert 0 <= s["host_data_s"] <= s["host_step_s"]
    # throughput (docs/analysis.md): global samples over the sum of the slowest rank's step_s per measured step
    assert sorted(slowest) == [1, 2, 3] and samples == summary["measured_samples"]
    assert summary["throughput_img_s"] == pytest.approx(samples / sum(slowest.values()), rel=1e-9)
    assert summary["per_gpu_img_s"] == pytest.approx(summary["throughput_img_s"] / 2, rel=1e-9)
    # ... the figure analysis computes from the same logs
    from analysis.campaign_analysis import CampaignAnalysis

    table = CampaignAnalysis(tmp_path).run_throughput()
    (analysed,) = table.loc[table["run_id"] == run_dir.relative_to(tmp_path).as_posix(), "throughput_img_s"]
    assert summary["throughput_img_s"] == pytest.approx(analysed, rel=1e-9)
    # progress lines on rank 0
    assert "[ddlbench] step 4/4" in result.stderr
    # after K steps from the same seed the replicas are identical
    p0, p1 = (torch.load(run_dir / f"params_rank{r}.pt") for r in (0, 1))
    for key in p0:
        assert torch.equal(p0[key], p1[key]), key


def test_two_ranks_equal_one_rank_at_double_batch(tmp_path, ddlbench):
    """Gradient averaging is right: W ranks at batch B step exactly like 1 rank at batch W*B."""
    common = ["model=simple_cnn", "run.warmup_steps=0", "run.steps=4", "run.save_params=true", f"run.root={tmp_path}"]
    two = ddlbench("run", *common, "run.per_gpu_batch=4", "system.ranks_per_node=2")
    one = ddlbench("run", *common, "run.per_gpu_batch=8", "system.ranks_per_node=1")
    assert two.returncode == 0 and one.returncode == 0, two.stderr[-2000:] + one.stderr[-2000:]
    p2 = torch.load(find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b4-r0") / "params_rank0.pt")
    p1 = torch.load(find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g1-n1-b8-r0") / "params_rank0.pt")
    initial = build_model(arch="simple_cnn", depth=None, num_classes=10, seed=0).state_dict()
    for key in p1:
        torch.testing.assert_close(p2[key], p1[key], rtol=1e-5, atol=1e-6)
    assert any(not torch.allclose(p1[key], initial[key]) for key in p1)  # training moved the weights


def test_an_existing_run_is_never_overwritten(tmp_path, ddlbench):
    first = ddlbench("run", *TINY, f"run.root={tmp_path}")
    assert first.returncode == 0, first.stderr[-2000:]
    run_dir = find_run(tmp_path / "default", "ddp-synthetic-simple_cnn-g2-n1-b4-r0")
    before = (run_dir / "summary.json").read_bytes()
    again = ddlbench("run", *TINY, f"run.root={tmp_path}")
    assert again.returncode == 2
    assert "already holds a completed run (never overwritten); pass run.repeat=1" in again.stderr
    assert (run_dir / "summary.json").read_bytes() == before
    assert [p.name for p in (tmp_path / "default").iterdir()] == [run_dir.name]  # and no second directory made


def test_a_rank_that_dies_leaves_no_completed_summary(tmp_path, ddlbench):
    from benchmarks.data.synth import synth_imagefolder

    data = tmp_path / "data"
    synth_imagefolder(data, num_classes=2, images_per_class=8, width=32, height=32, quality=80, seed=0, progress=False)
    for jpeg in sorted(data.rglob("*.jpg")):
        jpeg.write_bytes(b"not a jpeg")  # every image corrupt: the first batch fails on both ranks
    result = ddlbench(
        "run", *TINY, "loader=native", f"data.path={data}", "loader.num_workers=0", f"run.root={tmp_path}"
    )
    assert result.returncode != 0
    run_dir = find_run(tmp_path / "default", "ddp-native-simple_cnn-g2-n1-b4-r0")
    assert "ddlbench: error: the run failed: " in result.stderr
    summary = run_dir / "summary.json"
    assert not summary.exists() or read_summary(run_dir)["status"] == "failed"
    table = ddlbench("results", str(tmp_path))
    assert "no completed runs" in table.stdout and run_dir.name in table.stdout


def test_bad_override_fails_before_launch(tmp_path, cli):
    result = cli("run", "framework=foo", f"run.root={tmp_path}")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "ddlbench: error: framework=foo is not an option; choose one of: "
        + result.stderr.split("choose one of: ")[1].strip()
    ]
    assert not (tmp_path / "default").exists()
