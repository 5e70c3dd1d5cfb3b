"""The learning-rate study's report side: eval.jsonl's training progress and summary.json's time to accuracy
read (with and without the fields), the study's tables, its figures, the report's section pieces and
`compare`'s accuracy flags, on synthetic study campaigns (analysis/synthetic_logs/cells.py lr_study_cells)."""

from __future__ import annotations

import io
import json
import shutil
import warnings

import pandas as pd
import pytest

from analysis.accuracy import (
    _batch_label,
    accuracy_by_schedule,
    accuracy_curves,
    loss_and_lr,
    time_to_accuracy,
    top1_vs_global_batch,
    training_curves,
)
from analysis.campaign_analysis import CampaignAnalysis
from analysis.load import load_campaign
from analysis.palette import schedule_color
from analysis.report import build_report, compare_campaigns
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import lr_study_cells
from ddlbench.cli import main

STEPS, WARMUP = 80, 2  # 10 steps per epoch: 8 evaluations
TARGET = 0.72


def _study(root, **options):
    write_campaign(root, lr_study_cells((1, 2), **options), steps=STEPS, warmup_steps=WARMUP, commbench=False)
    return root


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """3 schedules x 1 and 2 GPUs (global batch 64, 128), 2 repeats, a target of 72% top-1."""
    return _study(tmp_path_factory.mktemp("study") / "runs", repeats=2, target_top1=TARGET)


@pytest.fixture(scope="module")
def old_study(tmp_path_factory):
    """The same grid as eval.jsonl and summary.json were written before training progress and targets."""
    return _study(tmp_path_factory.mktemp("old") / "runs", eval_progress=False)


def _evals(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]


def _run_dirs(root, schedule: str, gpus: int):
    return sorted(root.glob(f"synth/*-g{gpus}-*-{schedule}-*"))


def _render(fig) -> None:
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def _labels(ax) -> list[str]:
    return [line.get_label() for line in ax.get_lines() if not line.get_label().startswith("_")]


# --- load ----------------------------------------------------------------------------------------


def test_evals_carry_the_training_progress_typed(study):
    evals = load_campaign(study).evals
    assert str(evals["step"].dtype) == "int64" and str(evals["train_samples"].dtype) == "Int64"
    assert evals["train_s"].dtype == "float64" and evals["epochs"].dtype == "float64"
    run_dir = _run_dirs(study, "cosine", 2)[0]
    first = evals[evals["run_id"] == f"synth/{run_dir.name}"].sort_values("step").iloc[0]
    written = _evals(run_dir)[0]
    assert (first["step"], first["train_samples"], first["epochs"]) == (10, 10 * 64 * 2, 1.0)
    assert first["train_s"] == pytest.approx(written["train_s"])


def test_old_evals_and_summaries_load_with_the_new_fields_null(old_study):
    campaign = load_campaign(old_study)
    assert len(campaign.evals) == 6 * 8 and campaign.problems.empty
    assert campaign.evals[["train_samples", "train_s", "epochs"]].isna().all().all()
    assert "target_top1" not in campaign.runs  # no summary has the field
    analysis = CampaignAnalysis(old_study, campaign=campaign)
    assert analysis.time_to_accuracy().empty
    assert analysis.accuracy()["epochs"].isna().all() and len(analysis.accuracy()) == 6


def test_summary_target_fields_are_typed(study):
    runs = load_campaign(study).runs
    assert runs["target_top1"].eq(TARGET).all()
    assert str(runs["target_reached"].dtype) == "boolean" and str(runs["steps_to_target"].dtype) == "Int64"
    for row in runs.itertuples():
        summary = json.loads((study / row.run_id / "summary.json").read_text())
        assert bool(row.target_reached) == summary["target_reached"]
        if summary["target_reached"]:
            assert row.steps_to_target == summary["steps_to_target"] == row.measured_steps + WARMUP  # it stopped


def test_wrong_optional_fields_are_problems_not_lost_runs(tmp_path):
    root = _study(tmp_path / "runs", schedules=("cosine",))
    run_dir = _run_dirs(root, "cosine", 1)[0]
    lines = _evals(run_dir)
    lines[0]["train_s"] = "soon"
    (run_dir / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines) + '{"step": "x"}\n')
    summary = json.loads((run_dir / "summary.json").read_text())
    (run_dir / "summary.json").write_text(json.dumps({**summary, "target_top1": 75, "time_to_target_s": -1}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        campaign = load_campaign(root)
    evals = campaign.evals[campaign.evals["run_id"] == f"synth/{run_dir.name}"].sort_values("step")
    assert len(evals) == 8 and pd.isna(evals["train_s"].iloc[0]) and evals["train_s"].iloc[1] > 0
    problems = " | ".join(campaign.problems["problem"])
    assert "train_s 'soon' is not a finite number >= 0; ignored" in problems
    assert "not an evaluation record" in problems
    assert "target_top1 75 is not a fraction in [0, 1]" in problems and "time_to_target_s -1" in problems
    assert campaign.runs["status"].eq("completed").all()


# --- tables --------------------------------------------------------------------------------------


def test_final_top1_per_cell_with_schedule_and_global_batch(study):
    accuracy = CampaignAnalysis(study).accuracy()
    assert len(accuracy) == 6 and accuracy["num_repeats"].eq(2).all()
    assert set(zip(accuracy["schedule"], accuracy["global_batch"])) == {
        (s, b) for s in ("step", "cosine", "exponential") for b in (64, 128)
    }
    row = accuracy[(accuracy["schedule"] == "step") & (accuracy["global_batch"] == 128)].iloc[0]
    finals = [_evals(d)[-1] for d in _run_dirs(study, "step", 2)]
    assert row["top1_pct"] == pytest.approx(100 * sum(e["top1"] for e in finals) / 2)
    assert row["epochs"] == pytest.approx(sum(e["epochs"] for e in finals) / 2)


def test_time_to_accuracy_counts_the_repeats_that_reached_it(study):
    table = CampaignAnalysis(study).time_to_accuracy()
    assert len(table) == 6 and table["target_top1_pct"].eq(100 * TARGET).all()
    for row in table.itertuples():
        summaries = [
            json.loads((d / "summary.json").read_text()) for d in _run_dirs(study, row.schedule, row.world_size)
        ]
        hit = [s for s in summaries if s["target_reached"]]
        assert (row.num_reached, row.num_repeats) == (len(hit), 2)
        if hit:
            assert row.time_to_target_s == pytest.approx(sum(s["time_to_target_s"] for s in hit) / len(hit))
            assert row.samples_to_target == pytest.approx(sum(s["samples_to_target"] for s in hit) / len(hit))
        else:
            assert pd.isna(row.time_to_target_s) and pd.isna(row.steps_to_target)
    assert table["num_reached"].sum() > 0


def test_time_to_accuracy_by_hand():
    runs = pd.DataFrame(
        {
            "run_id": ["a0", "a1", "a2", "b0"],
            "target_top1": [0.75, 0.75, 0.75, None],
            "target_reached": pd.array([True, False, True, None], dtype="boolean"),
            "time_to_target_s": [100.0, None, 140.0, None],
            "samples_to_target": pd.array([1000, None, 1400, None], dtype="Int64"),
            "steps_to_target": pd.array([10, None, 14, None], dtype="Int64"),
        }
    )
    per_run = pd.DataFrame(
        {"run_id": ["a0", "a1", "a2", "b0"], "cell_hash": ["A", "A", "A", "B"], "schedule": "cosine"}
    )
    (row,) = time_to_accuracy(runs, per_run).to_dict("records")  # cell B had no target
    assert (row["cell_hash"], row["num_reached"], row["num_repeats"]) == ("A", 2, 3)
    assert (row["time_to_target_s"], row["samples_to_target"], row["steps_to_target"]) == (120.0, 1200.0, 12.0)
    assert row["target_top1_pct"] == 75.0 and row["schedule"] == "cosine"


def test_accuracy_curves_mean_over_repeats_with_their_range():
    evals = pd.DataFrame(
        {
            "run_id": ["r0", "r0", "r1", "r1"],
            "step": [10, 20, 10, 20],
            "epochs": [1.0, 2.0, 1.0, 2.0],
            "top1": [0.5, 0.7, 0.6, 0.8],
        }
    )
    per_run = pd.DataFrame({"run_id": ["r0", "r1"], "cell_hash": "A", "schedule": "step", "global_batch": 64})
    curves = accuracy_curves(evals, per_run)
    assert list(curves["top1_pct"]) == pytest.approx([55.0, 75.0])
    assert list(curves["top1_pct_min"]) == pytest.approx([50.0, 70.0])
    assert list(curves["top1_pct_max"]) == pytest.approx([60.0, 80.0])
    assert list(curves["num_repeats"]) == [2, 2] and list(curves["epochs"]) == [1.0, 2.0]


def test_training_curves_mean_over_ranks_and_bin_long_runs():
    steps = pd.DataFrame(
        {
            "run_id": ["r"] * 20,
            "rank": [0, 1] * 10,
            "step": [s for s in range(10) for _ in range(2)],
            "loss": [float(s + r) for s in range(10) for r in range(2)],  # ranks' mean: s + 0.5
            "lr": [0.1 * s for s in range(10) for _ in range(2)],
        }
    )
    per_run = pd.DataFrame({"run_id": ["r"], "cell_hash": "A", "schedule": "cosine", "global_batch": 8})
    full = training_curves(steps, per_run)
    assert list(full["loss"]) == pytest.approx([s + 0.5 for s in range(10)]) and len(full) == 10
    binned = training_curves(steps, per_run, max_points=5)  # pairs of steps
    assert list(binned["step"]) == pytest.approx([0.5, 2.5, 4.5, 6.5, 8.5])
    assert list(binned["lr"]) == pytest.approx([0.05, 0.25, 0.45, 0.65, 0.85])
    assert training_curves(steps.assign(loss=None, lr=None), per_run).empty  # logs from before lr


# --- figures -------------------------------------------------------------------------------------


def test_accuracy_by_schedule_has_a_panel_per_batch_and_a_line_per_schedule(study):
    fig = accuracy_by_schedule(CampaignAnalysis(study).accuracy_curves())
    _render(fig)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["global batch 64", "global batch 128"]
    for ax in panels:
        assert sorted(_labels(ax)) == ["cosine", "exponential", "step"] and ax.get_xlabel() == "epochs"
        cosine = next(line for line in ax.get_lines() if line.get_label() == "cosine")
        assert cosine.get_color() == schedule_color("cosine") and cosine.get_xdata()[0] == 1.0
        assert ax.collections  # the repeats' min-max band


def test_accuracy_by_schedule_falls_back_to_the_step_for_old_files(old_study):
    fig = accuracy_by_schedule(CampaignAnalysis(old_study).accuracy_curves())
    assert {ax.get_xlabel() for ax in fig.axes if ax.get_visible()} == {"optimizer step"}


def test_a_figure_never_hides_a_variant(tmp_path):
    """Two cells of one schedule and batch that differ in another setting are two labelled lines."""
    root = _study(tmp_path / "runs", schedules=("cosine",))
    for run_dir in list(root.glob("synth/*-g1-*")):
        other = run_dir.with_name(run_dir.name.replace("-r0", "-lr02-r0"))
        shutil.copytree(run_dir, other)
        config = other / "config.yaml"
        config.write_text(config.read_text().replace("  lr: 0.1\n", "  lr: 0.2\n"))
    analysis = CampaignAnalysis(root)
    assert len(analysis.accuracy()) == 3
    fig = accuracy_by_schedule(analysis.accuracy_curves())
    panel = next(ax for ax in fig.axes if ax.get_title() == "global batch 64")
    assert sorted(_labels(panel)) == ["cosine [optim.lr=0.1]", "cosine [optim.lr=0.2]"]
    styles = {line.get_linestyle() for line in panel.get_lines() if not line.get_label().startswith("_")}
    assert len(styles) == 2  # one colour (the schedule), two line styles
    fig = top1_vs_global_batch(analysis.accuracy())
    assert sorted(_labels(fig.axes[0])) == ["cosine [optim.lr=0.1]", "cosine [optim.lr=0.2]"]


def test_top1_vs_global_batch_one_line_per_schedule_on_a_log2_axis(study):
    accuracy = CampaignAnalysis(study).accuracy()
    fig = top1_vs_global_batch(accuracy)
    _render(fig)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "global batch"
    assert sorted(_labels(ax)) == ["cosine", "exponential", "step"]
    step = next(line for line in ax.get_lines() if line.get_label() == "step")
    expected = accuracy[accuracy["schedule"] == "step"].sort_values("global_batch")
    assert list(step.get_xdata()) == [64, 128]
    assert list(step.get_ydata()) == pytest.approx(list(expected["top1_pct"]))
    assert _batch_label(65536) == "64k" and _batch_label(256) == "256"


def test_loss_and_lr_two_panels_per_global_batch(old_study):
    curves = CampaignAnalysis(old_study).training_curves()  # no target: every run to its last step
    fig = loss_and_lr(curves)
    _render(fig)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert titles == [
        "training loss, global batch 64",
        "learning rate, global batch 64",
        "training loss, global batch 128",
        "learning rate, global batch 128",
    ]
    lr_panel = fig.axes[1]
    cosine = next(line for line in lr_panel.get_lines() if line.get_label() == "cosine")
    assert max(cosine.get_ydata()) == pytest.approx(0.1 * 64 / 256)  # the scaled peak lr
    assert cosine.get_ydata()[-1] < 0.01 * max(cosine.get_ydata())  # annealed to ~0


# --- the report and compare ----------------------------------------------------------------------


def _build(root, out):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(root, out, formats=("png",), jobs=1)
    return (out / "report.md").read_text()


def test_report_section_holds_the_study(study, tmp_path):
    text = _build(study, tmp_path / "rep")
    section = text[text.index("## Validation accuracy") :]
    assert "| schedule | global batch | repeats | top1 % |" in section
    assert "Time to accuracy (run.target_top1)" in section and "| target top1 % | reached |" in section
    assert " of 2 |" in section
    for name in ("accuracy_by_schedule", "top1_vs_global_batch", "loss_and_lr"):
        assert f"](figures/{name}.png)" in section
        assert (tmp_path / "rep" / "figures" / f"{name}.png").stat().st_size > 1000
    assert "accuracy_vs_step" not in text  # the study's figure draws the same evaluations per cell


def test_report_of_old_files_has_no_target_table(old_study, tmp_path):
    text = _build(old_study, tmp_path / "rep")
    section = text[text.index("## Validation accuracy") :]
    assert "Time to accuracy" not in section and "| epochs |" not in section
    assert "figures/accuracy_by_schedule.png" in section and "loss_and_lr.png" in section


def test_report_of_one_schedule_at_one_batch_keeps_the_per_run_curve(tmp_path):
    root = tmp_path / "runs"
    write_campaign(root, lr_study_cells((1,), schedules=("cosine",)), steps=STEPS, warmup_steps=WARMUP, commbench=False)
    text = _build(root, tmp_path / "rep")
    assert "figures/accuracy_vs_step.png" in text and "loss_and_lr.png" in text
    assert "accuracy_by_schedule" not in text and "top1_vs_global_batch" not in text


def _lower_final_top1(run_dir, by: float) -> None:
    lines = _evals(run_dir)
    lines[-1]["top1"] -= by
    (run_dir / "eval.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))


def test_compare_flags_a_top1_drop_and_not_one_within_the_threshold(old_study, tmp_path, capsys):
    a, b = old_study, tmp_path / "b"
    shutil.copytree(a, b)
    _lower_final_top1(_run_dirs(b, "step", 1)[0], 0.015)  # 1.5 pp: beyond 1 pp
    _lower_final_top1(_run_dirs(b, "cosine", 1)[0], 0.005)  # 0.5 pp: within
    table = compare_campaigns(a, b).set_index(["variant", "world_size"])
    step, cosine = table.loc[("optim.schedule.name=step", 1)], table.loc[("optim.schedule.name=cosine", 1)]
    assert step["flag"] == "regression" and step["regressed"] == "top-1"
    assert step["top1_delta_pp"] == pytest.approx(-1.5)
    assert cosine["flag"] == "ok" and cosine["regressed"] == "" and cosine["top1_delta_pp"] == pytest.approx(-0.5)
    assert (table["flag"] == "regression").sum() == 1
    assert main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "top-1 % A" in out and "regressed" in out and "final top-1 lower by more than 1 pp" in out
    assert "1 regression, 0 missing in B" in out
    assert main(["compare", str(a), str(b), "--top1-drop-pp", "2"]) == 0  # 1.5 pp is within 2
    capsys.readouterr()
    assert main(["compare", str(a), str(b), "--top1-drop-pp", "-1"]) == 2
    assert "--top1-drop-pp -1.0" in capsys.readouterr().err


def test_compare_flags_a_longer_time_to_target(study, tmp_path):
    a, b = study, tmp_path / "b"
    shutil.copytree(a, b)
    table = compare_campaigns(a, b)
    assert (table["flag"] == "ok").all() and (table["top1_delta_pp"] == 0).all()
    reached = [d for d in sorted(b.glob("synth/*")) if json.loads((d / "summary.json").read_text())["target_reached"]]
    cell = reached[0].name.rsplit("-r", 1)[0]
    for run_dir in reached:
        if run_dir.name.rsplit("-r", 1)[0] == cell:
            summary = json.loads((run_dir / "summary.json").read_text())
            summary["time_to_target_s"] *= 1.2  # 20% longer, beyond the 5% threshold
            (run_dir / "summary.json").write_text(json.dumps(summary))
    table = compare_campaigns(a, b)
    flagged = table[table["flag"] == "regression"]
    assert len(flagged) == 1 and flagged["regressed"].iloc[0] == "time to target"
    assert flagged["time_to_target_rel_delta"].iloc[0] == pytest.approx(0.2)
