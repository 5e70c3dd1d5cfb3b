"""`ddlbench results` as a new user meets it: a table that fits a terminal, failures by their first line
(in full with --long), launches that died before their first step listed, RUNS_DIR defaulting to runs/."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from analysis.results import format_results, short_reason
from benchmarks.rundir import run_files, summary_schema
from tests.analysis.test_cells import write_run

pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")

# what rank 0 of a real 2-rank CPU run wrote when its peer was killed (gloo, torch 2.14), its path shortened
GLOO_ERROR = (
    "RuntimeError: Got the following error when running the callback: RuntimeError: "
    "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:24739: "
    "Connection reset by peer. This is typically caused by a remote worker hanging or bugs in the application. "
    "Check the logs of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f\n\nAt:\n"
    "  /src/benchmarks/frameworks/ddp.py(71): done\n"
)
# a sweep over settings that no other column shows: a long `variant`
SWEEP = ["framework.bucket_cap_mb=100", "loader.num_batches=8", "loader.samples_per_epoch=4096", "optim.lr=0.2"]
WIDTH = 120


def fail(run_dir, error: str = GLOO_ERROR) -> None:
    """Make a written run a failed one, as the app and its supervisor write it."""
    run_files.write_json_atomic(
        run_dir / run_files.SUMMARY, summary_schema.failed_summary(error, rank_errors={"0": error})
    )


def campaign(root, compose):
    """Completed runs on 1 and 2 GPUs, a cell with a long variant, a failed run (gloo's error) and a launch
    that died after config.yaml; the failed run's directory."""
    write_run(root, compose, [], world_size=1)
    write_run(root, compose, [], world_size=2)
    write_run(root, compose, SWEEP, world_size=2, step_s=0.08)
    write_run(root, compose, [], world_size=2, repeat=1)
    failed = next((root / "default").glob("*-g2-*-r1"))
    fail(failed)
    died = failed.with_name(failed.name.removesuffix("-r1") + "-r2")
    died.mkdir()
    shutil.copy(failed / run_files.CONFIG, died / run_files.CONFIG)
    return failed


def test_a_failure_shows_its_first_line_shortened_and_long_prints_it_whole(tmp_path, compose, cli):
    failed = campaign(tmp_path, compose)
    out = cli("results", str(tmp_path)).stdout
    line = next(line for line in out.splitlines() if "Connection reset by peer" in line)
    reason = line.strip()
    assert reason.startswith("RuntimeError: Read error [127.0.0.1]:24739: Connection reset by peer.")  # the cause
    assert len(reason) <= 80 and reason.endswith("…")
    assert "At:" not in out and "GLHF" not in out and "pair.cc" not in out
    assert failed.name in out and "--long" in out  # where the rest is
    long = cli("results", str(tmp_path), "--long").stdout
    for text in GLOO_ERROR.strip().splitlines():
        assert text.strip() in long  # every line of the error, as it was written
    assert "GLHF! \U0001f3d6\ufe0f" in long and "/src/benchmarks/frameworks/ddp.py(71): done" in long


def test_every_line_fits_a_terminal_and_the_variant_is_spelled_out_below(tmp_path, compose, cli):
    """Before: the `variant` column (the swept settings) and the raw error made lines of ~500 characters."""
    campaign(tmp_path, compose)
    result = cli("results", str(tmp_path))
    assert result.returncode == 0, result.stderr
    widths = {line: len(line) for line in result.stdout.splitlines()}
    assert max(widths.values()) <= WIDTH, max(widths, key=widths.get)
    flat = " ".join(result.stdout.split())
    assert ", ".join(SWEEP) in flat  # every swept setting, in the legend under the table
    rows = [line for line in result.stdout.splitlines() if line.rstrip().endswith((" v1", " v2"))]
    assert len(rows) == 3  # one per cell, labelled
    long = cli("results", str(tmp_path), "--long").stdout
    assert any(", ".join(SWEEP) in line for line in long.splitlines())  # --long keeps the column


def test_short_reason_keeps_the_innermost_cause_of_the_first_line():
    assert short_reason("ValueError: bad batch\n\nAt:\n  x.py(1): f") == "ValueError: bad batch"
    assert short_reason("  \nOSError: disk full\nmore") == "OSError: disk full"
    assert short_reason("x" * 200) == "x" * 79 + "…"
    assert len(short_reason(GLOO_ERROR)) <= 80
    # a sentence of ddlbench's own that names an exception keeps its start
    text = "torchrun exited with code 1: rank 1: RuntimeError: boom; the launcher stopped the other ranks"
    assert short_reason(text).startswith("torchrun exited with code 1: rank 1: RuntimeError: boom")


@pytest.mark.parametrize("files", [(run_files.CONFIG,), (run_files.CONFIG, run_files.META)])
def test_a_launch_that_died_before_its_first_step_is_listed(tmp_path, compose, cli, files):
    """A run directory with config.yaml (and meta.json) but no rank log and no summary: rank 0 wrote them
    and the launch died. Before, config.yaml alone was not seen at all, and with meta.json the reason did
    not say that no step had run."""
    write_run(tmp_path, compose, [], world_size=1)
    done = next((tmp_path / "default").glob("*-r0"))
    died = done.with_name(done.name.removesuffix("-r0") + "-r1")
    died.mkdir()
    for name in files:
        shutil.copy(done / name, died / name)
    out = cli("results", str(tmp_path)).stdout
    assert "not counted (1)" in out and died.name in out
    assert "no step records: the launch died before its first step" in out


def test_runs_dir_defaults_to_runs(tmp_path, compose, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("results")
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "ddlbench: error: RUNS_DIR runs is not a directory; pass the folder runs were written to "
        "(run.root, default runs/): ddlbench results DIR"
    ]
    write_run(tmp_path / "runs", compose, [], world_size=1)
    result = cli("results")
    assert result.returncode == 0 and "simple_cnn" in result.stdout, result.stderr


def test_report_runs_dir_defaults_to_runs_too(tmp_path, compose, cli, monkeypatch):
    """`ddlbench report --out DIR` reads runs/ as `results` does (issue 36: RUNS_DIR was required)."""
    monkeypatch.chdir(tmp_path)
    result = cli("report", "--out", "rep")
    assert (result.returncode, result.stderr.strip().splitlines()) == (
        2,
        [
            "ddlbench: error: RUNS_DIR runs is not a directory; pass the folder runs were written to "
            "(run.root, default runs/): ddlbench report DIR --out rep"
        ],
    )
    write_run(tmp_path / "runs", compose, [], world_size=1)
    result = cli("report", "--out", "rep", "--formats", "png", "--jobs", "1")
    assert result.returncode == 0 and "report of 1 runs" in result.stdout, result.stderr
    assert "simple_cnn" in (tmp_path / "rep" / "report.md").read_text()


def test_a_table_still_too_wide_names_what_every_row_shares_above_it():
    """The widest names and figures ddlbench has: without a variant, the columns that hold one value in
    every row move to a line above the table."""
    two = lambda value: [value, value]  # noqa: E731
    table = pd.DataFrame(
        {
            "framework": two("deepspeed"),
            "loader": two("native_gpu"),
            "model": two("shufflenet_v2_x1_0"),
            "precision": two("amp_bf16"),
            "batch/GPU": two(256),
            "GPUs": [8, 1024],
            "nodes": [1, 128],
            "img/s": [12_345.6, 1_234_567.8],
            "img/s/GPU": [1_543.2, 1_205.6],
            "repeats": two(3),
            "strong eff.": [float("nan"), 0.781],
            "vs GPUs": ["-", "8"],
        }
    )
    assert max(map(len, format_results(table, pd.DataFrame(), mode="strong", long=True).splitlines())) > WIDTH
    text = format_results(table, pd.DataFrame(), mode="strong")
    assert max(map(len, text.splitlines())) <= WIDTH
    assert text.startswith("every row: framework deepspeed, loader native_gpu, model shufflenet_v2_x1_0, precision")
    assert "78.1%" in text and "1,234,567.8" in text


def test_a_hydra_config_root_is_not_a_run(tmp_path, compose, cli):
    """config.yaml alone counts as a run only when a rank wrote it (a resolved config with a run block):
    `ddlbench results .` in a checkout must not list conf/ (Hydra's defaults list) as a run that died."""
    write_run(tmp_path, compose, [], world_size=1)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "config.yaml").write_text("defaults:\n  - framework: ddp\n  - _self_\nrun:\n  campaign: default\n")
    out = cli("results", str(tmp_path)).stdout
    assert "not counted (" not in out and "no step records" not in out
