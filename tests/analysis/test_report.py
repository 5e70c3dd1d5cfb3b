"""`ddlbench report` / `compare` / `synthetic-logs` and `results --parquet` end to end (in process, small inputs)."""

from __future__ import annotations

import json
import shutil
import warnings

import pytest

from analysis.report import build_report, compare_campaigns
from ddlbench.cli import main
from tests.analysis.conftest import CAMPAIGN, HAND


def _report(tmp_path, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return main(["report", str(CAMPAIGN), "--out", str(tmp_path / "rep"), "--formats", "png", *args])


def test_report_lists_excluded_runs_and_figures(tmp_path, capsys):
    assert _report(tmp_path) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Excluded runs (not counted)" in text
    assert "small/ddp-native-resnet50-g2-n1-b64-r1 | failed | failed: RuntimeError: NCCL error" in text
    assert "small/ddp-native-resnet50-g2-n1-b64-r2 | incomplete | no summary.json" in text
    assert "schema_version 2 in meta.json is not supported" in text
    assert "## What was run, on what" in text and "NVIDIA A100-SXM4-40GB" in text
    assert "corrupt line" in text  # the skipped line is listed
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "<h2>Excluded runs (not counted)</h2>" in html and 'src="figures/throughput_vs_gpus.png"' in html
    for name in (
        "throughput_vs_gpus",
        "efficiency_vs_gpus",
        "breakdown_resnet50",
        "dali_vs_native",
        "commbench",
        "telemetry_0",
    ):
        assert (tmp_path / "rep" / "figures" / f"{name}.png").stat().st_size > 1000
    assert "16 runs" in capsys.readouterr().out


def test_report_names_a_rank_out_of_step(tmp_path, copy_of):
    """A run whose rank 1 runs every forward 5 ms slower is listed under "Ranks out of step"."""
    campaign = copy_of(CAMPAIGN)
    log = campaign / "small" / "ddp-dali-resnet50-g2-n1-b64-r0" / "rank1.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    log.write_text("".join(json.dumps({**x, "fwd_s": x["fwd_s"] + 0.005} if "fwd_s" in x else x) + "\n" for x in lines))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(campaign), "--out", str(tmp_path / "rep"), "--formats", "png"]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "Ranks out of step" in text
    assert "| small/ddp-dali-resnet50-g2-n1-b64-r0 | fwd | 1 |" in text


def test_report_names_a_loader_that_fell_behind(tmp_path, copy_of):
    """A run whose host waits half a median step in the loader every other step is listed under "Loader
    fell behind"; the other runs (no host_data_s in their logs) are not."""
    campaign = copy_of(CAMPAIGN)
    run = "small/ddp-dali-resnet50-g2-n1-b64-r0"
    for rank in (0, 1):
        log = campaign / run / f"rank{rank}.jsonl"
        lines = [json.loads(line) for line in log.read_text().splitlines()]
        log.write_text(
            "".join(
                json.dumps({**x, "host_data_s": x["step_s"] / 2 * (x["step"] % 2)} if "step_s" in x else x) + "\n"
                for x in lines
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(campaign), "--out", str(tmp_path / "rep"), "--formats", "png"]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    section = text[text.index("### Loader fell behind") :].split("\n\n")
    assert "CUDA_DEVICE_MAX_CONNECTIONS=32" in section[2]  # under the table
    rows = [line for line in section[1].splitlines() if line.startswith("| small/")]
    # half of the steps waited half a step: 25% of step time on the host, the device saw far less
    assert len(rows) == 1 and rows[0].startswith(f"| {run} | 25.")


def test_report_reference_overlay(tmp_path):
    assert _report(tmp_path, "--reference", "aach2023") == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Compared with aach2023" in text
    assert (tmp_path / "rep" / "figures" / "reference_aach2023.png").exists()


def test_report_never_overwrites(tmp_path, capsys):
    (tmp_path / "rep").mkdir()
    (tmp_path / "rep" / "report.md").write_text("keep me")
    assert _report(tmp_path) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "never overwritten" in err and "pass a new folder" in err
    assert (tmp_path / "rep" / "report.md").read_text() == "keep me"


def test_report_svg_in_worker_processes(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        timings = build_report(HAND, tmp_path / "rep", formats=("png", "svg"), jobs=2)
    assert timings["num_counted"] == 2
    assert (tmp_path / "rep" / "figures" / "throughput_vs_gpus.svg").read_text().lstrip().startswith("<?xml")


def _slow_down(run_dir, factor):
    for log in run_dir.glob("rank*.jsonl"):
        lines = log.read_text().splitlines()
        out = [lines[0]]
        for line in lines[1:]:
            record = json.loads(line)
            record["step_s"] *= factor
            out.append(json.dumps(record))
        log.write_text("\n".join(out) + "\n")


def test_compare_flags_a_regression(tmp_path, capsys):
    shutil.copytree(HAND, tmp_path / "a")
    shutil.copytree(HAND, tmp_path / "b")
    _slow_down(tmp_path / "b" / "ddp-synthetic-simple_cnn-g2-n1-b4-r0", 1.25)
    table = compare_campaigns(tmp_path / "a", tmp_path / "b", threshold=0.05).set_index("world_size")
    assert table.loc[2, "flag"] == "regression" and table.loc[2, "rel_delta"] == pytest.approx(1 / 1.25 - 1)
    assert table.loc[1, "flag"] == "ok"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    out = capsys.readouterr().out
    assert "1 regression, 0 missing in B, 0 incomplete in B" in out
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "a")]) == 0


def test_compare_fails_on_cells_missing_or_incomplete_in_b(tmp_path, capsys):
    shutil.copytree(HAND, tmp_path / "a")
    shutil.copytree(HAND, tmp_path / "b")
    shutil.copytree(HAND, tmp_path / "c")
    shutil.rmtree(tmp_path / "b" / "ddp-synthetic-simple_cnn-g2-n1-b4-r0")
    (tmp_path / "c" / "ddp-synthetic-simple_cnn-g1-n1-b4-r0" / "summary.json").unlink()  # died: incomplete
    table = compare_campaigns(tmp_path / "a", tmp_path / "b").set_index("world_size")
    assert table.loc[2, "flag"] == "missing in B" and table.loc[1, "flag"] == "ok"
    table = compare_campaigns(tmp_path / "a", tmp_path / "c").set_index("world_size")
    assert table.loc[1, "flag"] == "incomplete in B" and table.loc[2, "flag"] == "ok"
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 1
    assert "0 regression, 1 missing in B, 0 incomplete in B" in capsys.readouterr().out
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "c")]) == 1
    assert "0 regression, 0 missing in B, 1 incomplete in B" in capsys.readouterr().out
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--allow-missing"]) == 0


def test_compare_bad_threshold(tmp_path, capsys):
    assert main(["compare", str(HAND), str(HAND), "--threshold", "0"]) == 2
    assert "--threshold 0.0" in capsys.readouterr().err


def test_results_parquet(tmp_path, capsys):
    assert main(["results", str(HAND), "--parquet", str(tmp_path / "pq")]) == 0
    assert (tmp_path / "pq" / "steps.parquet").exists()
    assert "weak eff." in capsys.readouterr().out


def test_synthetic_logs_command(tmp_path, capsys):
    assert main(["synthetic-logs", "--out", str(tmp_path / "s"), "--steps", "5", "--warmup", "1"]) == 0
    assert "16 runs" in capsys.readouterr().out
    assert main(["synthetic-logs", "--out", str(tmp_path / "s")]) == 2  # never overwritten


def test_the_old_name_synthlogs_still_works_with_a_warning(tmp_path, capsys):
    assert main(["synthlogs", "--out", str(tmp_path / "s"), "--steps", "5", "--warmup", "1"]) == 0
    out, err = capsys.readouterr()
    assert "16 runs" in out
    assert err.strip() == (
        "ddlbench: warning: `synthlogs` is now `synthetic-logs`; the old name goes in the next release"
    )


def test_html_tables_scroll_align_and_read_well():
    import pandas as pd

    from analysis.report_render import header, html_table

    assert [
        header(c)
        for c in ("per_gpu_img_s", "throughput_img_s_ci_low", "allreduce_exposed_pct", "busbw_gb_s", "framework")
    ] == ["per GPU img/s", "throughput img/s CI low", "allreduce exposed %", "busbw GB/s", "framework"]
    out = html_table(pd.DataFrame({"framework": ["ddp"], "per_gpu_img_s": [4701.9]}))
    assert out.startswith('<div class="scroll"><table>')  # a wide table scrolls in its box, not the page
    assert '<th title="per_gpu_img_s">per GPU img/s</th>' in out
    assert '<td class="txt">ddp</td>' in out and '<td class="num">4,702</td>' in out
