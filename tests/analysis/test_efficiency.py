"""MFU and energy in the tables (analysis/efficiency.py): `results` shows the MFU and J/sample columns where
some cell has a value and otherwise hides them and says why; the report's section has the table and the
figure; runs as the app writes them (tests/analysis/test_cells.py write_run) with the fields it adds."""

from __future__ import annotations

import json

import pytest

from analysis.campaign_analysis import CampaignAnalysis
from analysis.results import format_results, results_table
from benchmarks.rundir import run_files
from tests.analysis.test_cells import write_run

pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")

GPU_FIELDS = {
    "model_flops_per_sample": 2.4e10,
    "achieved_tflops_per_gpu": 400.0,
    "peak_tflops": 989.5,
    "mfu": 400.0 / 989.5,
    "mfu_note": "H200 SXM bf16 989.5 TFLOPS dense (https://www.nvidia.com/en-us/data-center/h200/)",
    "energy_j": 1200.0,
    "energy_j_per_sample": 0.25,
    "avg_power_w": 600.0,
    "host_energy_j": None,
    "energy_note": "host: no readable RAPL",
}
CPU_FIELDS = {
    "model_flops_per_sample": 1.0e8,
    "achieved_tflops_per_gpu": 0.002,
    "peak_tflops": None,
    "mfu": None,
    "mfu_note": "CPU: no peak table",
    "energy_j": None,
    "energy_j_per_sample": None,
    "avg_power_w": None,
    "host_energy_j": None,
    "energy_note": "GPU: none (no NVML); host: no readable RAPL",
}


def _with(root, fields: dict) -> None:
    for path in root.rglob(run_files.SUMMARY):
        summary = json.loads(path.read_text())
        run_files.write_json_atomic(path, summary | fields)


def test_results_show_mfu_and_energy_where_measured(tmp_path, compose):
    write_run(tmp_path, compose, [], world_size=1)
    write_run(tmp_path, compose, [], world_size=2)
    _with(tmp_path, GPU_FIELDS)
    table, excluded = results_table(tmp_path)
    assert list(table["MFU"]) == pytest.approx([400.0 / 989.5] * 2)
    assert list(table["J/sample"]) == [0.25, 0.25]
    text = format_results(table, excluded)
    assert "40.4%" in text and "0.25" in text and "no MFU" not in text


def test_results_hide_the_columns_and_say_why_on_cpus(tmp_path, compose):
    write_run(tmp_path, compose, [], world_size=2)
    _with(tmp_path, CPU_FIELDS)
    table, excluded = results_table(tmp_path)
    assert "MFU" not in table and "J/sample" not in table
    text = format_results(table, excluded)
    assert "no MFU: CPU: no peak table" in text
    assert "no energy: GPU: none (no NVML); host: no readable RAPL" in text


def test_older_summaries_say_nothing(tmp_path, compose):
    write_run(tmp_path, compose, [], world_size=2)
    table, excluded = results_table(tmp_path)
    assert "MFU" not in table and "no MFU" not in format_results(table, excluded)


def test_report_section_has_the_table_and_figure(tmp_path, compose):
    from analysis.efficiency import draw
    from analysis.report_blocks import Report

    write_run(tmp_path, compose, [], world_size=1)
    write_run(tmp_path, compose, [], world_size=2)
    _with(tmp_path, GPU_FIELDS)
    analysis = CampaignAnalysis(tmp_path)
    report = Report(analysis.campaign, analysis)
    draw(report)
    kinds = [block.kind for block in report.blocks]
    assert kinds[:2] == ["heading", "table"] and "efficiency_vs_gpus" in report.figures
    table = report.blocks[1].content
    assert list(table["mfu_pct"]) == [40.4, 40.4] and "energy_j_per_sample" in table
    report.figures["efficiency_vs_gpus"]()  # draws


def test_report_section_says_why_none_on_cpus(tmp_path, compose):
    from analysis.efficiency import draw
    from analysis.report_blocks import Report

    write_run(tmp_path, compose, [], world_size=2)
    _with(tmp_path, CPU_FIELDS)
    analysis = CampaignAnalysis(tmp_path)
    report = Report(analysis.campaign, analysis)
    draw(report)
    texts = [block.content for block in report.blocks if block.kind == "text"]
    assert texts == [
        "No MFU figure: CPU: no peak table.",
        "No energy figure: GPU: none (no NVML); host: no readable RAPL.",
    ]


def test_telemetry_is_cut_to_the_measured_window():
    import pandas as pd

    from analysis.telemetry import measured_window

    telemetry = pd.DataFrame({"run_id": ["a"] * 5 + ["old"] * 2, "t_s": [9.0, 10.0, 11.0, 12.0, 13.0, 1.0, 2.0]})
    runs = pd.DataFrame({"run_id": ["a", "old"], "window_start_t_s": [10.0, None], "window_end_t_s": [12.0, None]})
    cut = measured_window(telemetry, runs)
    assert list(cut["t_s"]) == [10.0, 11.0, 12.0, 1.0, 2.0]  # a run without a window keeps its samples


def test_compare_shows_mfu_and_energy_of_both_sides(tmp_path, compose):
    from analysis.report import format_compare

    a, b = tmp_path / "a", tmp_path / "b"
    write_run(a, compose, [], world_size=2)
    write_run(b, compose, [], world_size=2)
    _with(a, GPU_FIELDS)
    _with(b, GPU_FIELDS | {"mfu": 0.5, "energy_j_per_sample": 0.2})
    table = CampaignAnalysis(a).compare(CampaignAnalysis(b))
    assert list(table["mfu_a"]) == pytest.approx([400.0 / 989.5]) and list(table["mfu_b"]) == [0.5]
    text = format_compare(table, threshold=0.05)
    assert "MFU A" in text and "50.0%" in text and "J/sample B" in text and "0.2" in text


def test_compare_hides_them_on_cpus(tmp_path, compose):
    from analysis.report import format_compare

    write_run(tmp_path / "a", compose, [], world_size=2)
    write_run(tmp_path / "b", compose, [], world_size=2)
    table = CampaignAnalysis(tmp_path / "a").compare(CampaignAnalysis(tmp_path / "b"))
    assert "MFU" not in format_compare(table, threshold=0.05)


def test_time_to_train_shows_startup_apart(tmp_path, compose):
    """MLPerf HPC's time to train: start-up (staging included) + the training clock to the target."""
    write_run(tmp_path, compose, [], world_size=2)
    _with(tmp_path, {"target_top1": 0.5, "target_reached": True, "time_to_target_s": 30.0, "startup_s": 12.5})
    write_run(tmp_path, compose, [], world_size=1)  # an older summary: no startup_s
    _older = next(p for p in (tmp_path / "default").iterdir() if "-g1-" in p.name) / run_files.SUMMARY
    run_files.write_json_atomic(
        _older, json.loads(_older.read_text()) | {"target_top1": 0.5, "target_reached": True, "time_to_target_s": 40.0}
    )
    table = CampaignAnalysis(tmp_path).time_to_accuracy().set_index("world_size")
    assert (table.loc[2, "startup_s"], table.loc[2, "time_to_train_s"]) == (12.5, 42.5)
    assert table.loc[1, "time_to_target_s"] == 40.0 and table[["startup_s", "time_to_train_s"]].loc[1].isna().all()
