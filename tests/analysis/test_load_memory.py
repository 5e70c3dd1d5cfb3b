"""Analysis reads the memory fields and the single-process runs (DataParallel): summary.json's peaks are
typed (wrong types listed and ignored), the ranks' end records are no problem, a run of one process on
two GPUs counts with one rank log and its per-GPU throughput over both GPUs, and the report's
throughput table shows the peaks in GiB, '-' on CPU runs."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml

from analysis.load import load_campaign
from benchmarks.rundir import cell_identity, run_files, summary_schema

pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")
GIB = 2**30


def write_run(
    root: Path,
    *,
    framework: str,
    world: int,
    processes: int,
    peaks: list[int | None],
    summary_edits: dict | None = None,
    meta_edits: dict | None = None,
) -> Path:
    """A completed run directory as the app writes it: `processes` rank logs (header, 3 steps) and end
    records for a run on `world` devices; peaks[r] is rank r's peak allocated bytes (None: a CPU)."""
    cfg = {
        "framework": {"name": framework},
        "loader": {"name": "synthetic"},
        "model": {"arch": "resnet", "depth": 50},
        "precision": {"name": "amp_bf16"},
        "system": {"name": "h200", "device": "cuda"},
        "run": {"campaign": "mem", "repeat": 0, "per_gpu_batch": 8, "root": "runs", "dir": None},
    }
    run_dir = root / "mem" / cell_identity.dir_name(cfg, world_size=world, num_nodes=1, repeat=0)
    run_dir.mkdir(parents=True)
    (run_dir / run_files.CONFIG).write_text(yaml.safe_dump(cfg))
    run_files.write_json_atomic(
        run_dir / run_files.META,
        {"schema_version": 1, "world_size": world, "num_nodes": 1, "num_processes": processes, **(meta_edits or {})},
    )
    for rank in range(processes):
        steps = [{"step": s, "samples": 8 * world // processes, "warmup": s == 0, "step_s": 0.1} for s in range(3)]
        peak = peaks[rank]
        end = summary_schema.end_record(
            rank=rank, peaks={"peak_allocated_bytes": peak, "peak_reserved_bytes": None if peak is None else peak + GIB}
        )
        run_files.write_json_atomic(summary_schema.end_path(run_dir, rank), end)
        lines = [{"kind": "header", "schema_version": 1, "rank": rank}, *steps]
        (run_dir / f"rank{rank}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    key = cell_identity.identity(cfg, world_size=world, num_nodes=1)
    summary = summary_schema.completed_summary(
        key=key,
        measured=summary_schema.throughput_of_run(run_dir, world_size=world, num_processes=processes),
        wall_s=0.2,
        last_loss=1.0,
        warmup_steps=1,
        repeat=0,
        num_processes=processes,
        memory=summary_schema.memory_of_run(run_dir, num_processes=processes),
        names={
            "framework": framework,
            "loader": "synthetic",
            "model": "resnet50",
            "precision": "amp_bf16",
            "per_gpu_batch": 8,
            "campaign": "mem",
        },
    )
    run_files.write_json_atomic(run_dir / run_files.SUMMARY, {**summary, **(summary_edits or {})})
    return run_dir


def test_memory_fields_are_read(tmp_path):
    write_run(tmp_path, framework="fsdp", world=2, processes=2, peaks=[3 * GIB, 5 * GIB])
    campaign = load_campaign(tmp_path)
    assert campaign.problems.empty, campaign.problems.to_string()
    (run,) = campaign.runs.to_dict("records")
    assert run["status"] == "completed"
    assert (run["peak_allocated_bytes"], run["peak_reserved_bytes"]) == (5 * GIB, 6 * GIB)
    assert campaign.runs["peak_allocated_bytes"].dtype == "Int64"
    assert json.loads(run["peak_allocated_bytes_by_rank"]) == [3 * GIB, 5 * GIB]
    assert len(campaign.steps) == 2 * 3


def test_a_single_process_on_two_gpus_counts_with_one_rank_log(tmp_path):
    """DataParallel: meta.json says 1 process for world_size 2; the one log's samples are the global batch."""
    write_run(tmp_path, framework="dp", world=2, processes=1, peaks=[7 * GIB])
    from analysis.campaign_analysis import CampaignAnalysis

    analysis = CampaignAnalysis(tmp_path)
    (run,) = analysis.run_throughput().to_dict("records")
    assert run["world_size"] == 2 and run["throughput_img_s"] == pytest.approx(16 / 0.1)
    assert run["per_gpu_img_s"] == pytest.approx(8 / 0.1)  # over the GPUs, not the one process
    summary = run_files.read_summary(next((tmp_path / "mem").iterdir()))
    assert summary["per_gpu_img_s"] == pytest.approx(run["per_gpu_img_s"])  # the app's figure is analysis's


def test_more_processes_than_gpus_is_corrupt(tmp_path):
    write_run(tmp_path, framework="dp", world=1, processes=1, peaks=[GIB], meta_edits={"num_processes": 3})
    (run,) = load_campaign(tmp_path).runs.to_dict("records")
    assert run["status"] == "corrupt" and "num_processes 3 exceeds its world_size 1" in run["reason"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("peak_allocated_bytes", "5 GiB"),
        ("peak_allocated_bytes", -1),
        ("peak_reserved_bytes", 1.5),
        ("peak_allocated_bytes_by_rank", [1, -2]),
        ("peak_reserved_bytes_by_rank", "[1, 2]"),
        ("out_of_memory", "no"),
    ],
)
def test_a_memory_field_of_the_wrong_type_is_listed_and_ignored(tmp_path, field, value):
    write_run(tmp_path, framework="ddp", world=2, processes=2, peaks=[GIB, GIB], summary_edits={field: value})
    campaign = load_campaign(tmp_path)
    (run,) = campaign.runs.to_dict("records")
    assert run["status"] == "completed"
    assert field not in run or run[field] is None or run[field] != run[field]  # absent, None or NA
    assert any(field in problem for problem in campaign.problems["problem"])


def test_the_report_shows_peak_memory_in_gib_and_a_dash_on_cpu(tmp_path):
    from analysis.report import build_report

    write_run(tmp_path / "runs", framework="fsdp", world=2, processes=2, peaks=[3 * GIB, 5 * GIB])
    write_run(tmp_path / "runs", framework="ddp", world=2, processes=2, peaks=[None, None])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(tmp_path / "runs", tmp_path / "report", formats=("png",), jobs=1)
    text = (tmp_path / "report" / "report.md").read_text()
    header = next(line for line in text.splitlines() if "peak memory GiB (allocated)" in line and line.startswith("|"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    rows = {}
    for line in text.splitlines()[text.splitlines().index(header) + 2 :]:
        if not line.startswith("|"):
            break
        cells = dict(zip(columns, (c.strip() for c in line.strip("|").split("|"))))
        rows[cells["framework"]] = (cells["peak memory GiB (allocated)"], cells["peak memory GiB (reserved)"])
    assert rows == {"fsdp": ("5.0", "6.0"), "ddp": ("-", "-")}
