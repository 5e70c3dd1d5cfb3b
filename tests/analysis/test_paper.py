"""`ddlbench paper`: every figure and table of each study has a section or a reason, the sections draw
the runs beside the published values, and bad input is one line, exit 2, nothing written."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis.campaign_analysis import CampaignAnalysis
from analysis.compare import across_systems
from analysis.papers import STUDIES, study_of
from analysis.papers.build import REFERENCE_DIR
from analysis.stash import stash_stalls
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell, lr_study_cells


@pytest.fixture(scope="module")
def study_a(tmp_path_factory):
    """Study A in miniature: DDP and Horovod x DALI and native at 4 and 8 GPUs (ResNet-50 and ResNet-152),
    and a learning-rate study."""
    root = tmp_path_factory.mktemp("aach")
    cells = [
        SynthCell(f, loader, model, n, n // 4)
        for f in ("ddp", "horovod")
        for loader in ("dali", "native")
        for model in ("resnet50", "resnet152")
        for n in (4, 8)
    ]
    write_campaign(root / "scaling", cells, steps=40, warmup_steps=5, campaign="aach2023_scaling")
    write_campaign(root / "lr", lr_study_cells(gpus=(1, 2)), steps=40, warmup_steps=5, campaign="aach2023_lr")
    # what `ddlbench predict --out` writes: the table and the configuration it predicts
    predicted = root / "predicted-juwels"
    predicted.mkdir()
    pd.DataFrame(
        {
            "gpus": [4, 512],
            "nodes": [1, 128],
            "throughput": [2800.0, 300000.0],
            "per_gpu": [700.0, 586.0],
            "efficiency": [0.85, 0.70],
            "allreduce_pct": [15.0, 30.3],
            "data_pct": [22.0, 11.8],
            "compute_pct": [32.5, 40.0],
        }
    ).to_csv(predicted / "prediction.csv", index=False)
    (predicted / "cell.json").write_text(
        '{"framework": "ddp", "loader": "dali", "model": "resnet50", "per_gpu_batch": 64, "precision": "amp_bf16",'
        ' "system": "juwels_booster", "calibration": "synthetic-r0, compute x 3", "calibration_system": "h200",'
        ' "calibration_device": "NVIDIA H200", "compute_scale": 3.0, "fitted_to": ""}'
    )
    # a synthetic calibration's, its compute unscaled, from 1 GPU on: no loader modelled, drawn from 4 GPUs
    unscaled = root / "predicted-juwels-synthetic"
    unscaled.mkdir()
    pd.DataFrame(
        {
            "gpus": [1, 4, 512],
            "nodes": [1, 1, 128],
            "throughput": [2150.0, 7600.0, 760000.0],
            "per_gpu": [2150.0, 1900.0, 1484.0],
            "efficiency": [1.0, 0.88, 0.69],
            "allreduce_pct": [0.0, 12.1, 30.4],
            "data_pct": [0.07, 0.07, 0.05],
            "compute_pct": [99.9, 87.8, 69.6],
        }
    ).to_csv(unscaled / "prediction.csv", index=False)
    (unscaled / "cell.json").write_text(
        '{"framework": "ddp", "loader": "synthetic", "model": "resnet50", "per_gpu_batch": 64, "precision": '
        '"amp_bf16", "system": "juwels_booster", "calibration": "resnet50-b64-g1", "calibration_system": "h200",'
        ' "calibration_device": "NVIDIA H200", "compute_scale": null, "fitted_to": ""}'
    )
    return root


def test_every_figure_and_table_of_each_study_has_a_section_or_a_reason():
    listed = pd.read_csv(REFERENCE_DIR / "exhibits.csv")
    for name, study in STUDIES.items():
        ids = [e.id for e in study.exhibits]
        assert len(ids) == len(set(ids)), name
        # every one the study has, plus sections for numbers its text states outside any figure
        assert {e.id for e in study.exhibits if not e.from_text} == set(listed.loc[listed["study"] == name, "exhibit"])
        for exhibit in study.exhibits:
            assert exhibit.build is not None or exhibit.why_not, exhibit.id


def test_study_a_draws_its_figures_beside_the_published_table(cli, study_a, tmp_path):
    out = tmp_path / "paper"
    result = cli("paper", "aach2023", str(study_a), "--out", str(out), "--jobs", "1")
    assert result.returncode == 0, result.stderr
    assert "13 figures, tables and claims of the study" in result.stdout
    # what the runs lack, and the command that makes it, on the terminal too
    assert "  Breakdown table (b) ResNet101 lacks breakdown of resnet101" in result.stdout
    assert "    make them with: ddlbench campaign submit experiment=aach2023_scaling" in result.stdout
    text = (out / "paper.md").read_text()
    for exhibit in STUDIES["aach2023"].exhibits:
        assert f"## {exhibit.id}: {exhibit.title}" in text
    # the published breakdown is there whether or not a cell matches: ResNet-50, native, 512 GPUs
    assert "82.61" in text and "43.48" in text
    # measured at 4 and 8 GPUs, lacking the rest, with the command that makes them
    assert "drawn in part: without breakdown of resnet50 at 16, 32, 64, 128, 256, 512, 1024 GPUs" in text
    assert "ddlbench campaign submit experiment=aach2023_scaling" in text
    # the learning-rate runs are the accuracy exhibit's, never a curve of the throughput figures
    speedup = text.split("## Speedup")[1].split("## Efficiency")[0]
    assert "cosine" not in speedup
    assert "| 64 | cosine |" not in text or "best schedule" in text
    # a prediction is drawn and labelled as one, beside the measured and published values
    breakdown = text.split("## Breakdown table (a)")[1].split("## Breakdown table (b)")[0]
    assert "allreduce % predicted (loader=dali)" in breakdown and "| 30.3 |" in breakdown
    throughput = text.split("## Throughput vs GPUs")[1].split("## Speedup")[0]
    assert "| predicted-juwels | juwels_booster | ddp | resnet50 | dali | synthetic-r0 |" in throughput
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {"speedup_speedup.png", "throughput_vs_gpus_throughput.png", "lr_annealing_accuracy_top1.png"} <= figures
    # what these runs are, the contents, a section per exhibit
    assert (out / "paper.html").read_text().count("<h2>") == len(STUDIES["aach2023"].exhibits) + 2


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("paper", "nosuch", "RUNS"), "STUDY 'nosuch' is not known; use one of: aach2023, stash2021, composable2023"),
        (
            ("paper", "stash2021", "RUNS"),
            "holds runs of aach2023, none of stash2021; draw them with: ddlbench paper aach2023",
        ),
        (("paper", "composable2023", "EMPTY"), "holds no run of composable2023 (0 run directories"),
        (("paper", "aach2023", "RUNS", "--baseline", "h200"), "--baseline h200: give the baseline system profile"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_nothing_written(cli, study_a, tmp_path, args, words):
    empty = tmp_path / "empty"
    empty.mkdir()
    argv = [str(study_a) if a == "RUNS" else str(empty) if a == "EMPTY" else a for a in args]
    out = tmp_path / "out"
    result = cli(*argv, "--out", str(out))
    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if "warning" not in line]
    assert len(errors) == 1 and words in errors[0], result.stderr
    assert not out.exists()


def test_runs_belong_to_a_study_by_experiment_study_else_by_campaign():
    runs = pd.DataFrame(
        {
            "campaign": ["aach2023_lr", "composable_2023_cpu", "mine", "mine", "stash"],
            "config.experiment.study": [None, None, "stash2021", "", None],
        }
    )
    assert study_of(runs).tolist() == ["aach2023", "composable2023", "stash2021", "", "stash2021"]


def test_cells_that_differ_only_in_their_system_pair_against_the_baseline(tmp_path):
    cells = [
        SynthCell("ddp", "synthetic", model, 4, 1, system=system)
        for model in ("resnet50", "resnet152")
        for system in ("local", "switched")
    ]
    cells.append(SynthCell("ddp", "synthetic", "resnet50", 4, 1, per_gpu_batch=32, system="switched"))
    write_campaign(tmp_path, cells, steps=30, warmup_steps=5, campaign="composable_2023")
    analysis = CampaignAnalysis(tmp_path)
    table = across_systems(analysis.cells(), analysis.counted(), baseline="local")
    assert len(table) == 5
    base = table[table["system"] == "local"]
    assert (base["relative_time"] == 1.0).all()
    paired = table[(table["system"] == "switched") & (table["per_gpu_batch"] == 64)].set_index("model")
    expected = paired["baseline_img_s"] / paired["throughput_img_s"]
    assert paired["relative_time"].tolist() == pytest.approx(expected.tolist())
    assert paired["relative_time"].notna().all()
    # another batch is another configuration: no partner on the baseline
    assert table.loc[table["per_gpu_batch"] == 32, "relative_time"].isna().all()


def test_stalls_are_read_against_the_baseline_and_against_the_training_time():
    per_run = pd.DataFrame(
        {
            "framework": "ddp",
            "model": "resnet18",
            "precision": "fp32",
            "per_gpu_batch": 32,
            "per_gpu_samples": 320.0,
            "loader": ["synthetic", "native"],
            "cache": "warm",
            "world_size": 2,
            "num_nodes": 1,
            "time_s": [10.0, 12.5],
        }
    )
    cpu = stash_stalls(per_run).set_index("stall").loc["cpu"]
    assert cpu["stall_pct"] == pytest.approx(25.0)  # 2.5 s of the synthetic run's 10 s
    assert cpu["stall_pct_of_training"] == pytest.approx(20.0)  # 2.5 s of the stalled run's 12.5 s


def test_a_prediction_names_its_calibration_device_and_scaling_and_starts_where_the_study_does(cli, study_a, tmp_path):
    out = tmp_path / "paper"
    assert cli("paper", "aach2023", str(study_a), "--out", str(out), "--jobs", "1").returncode == 0
    text = (out / "paper.md").read_text()
    throughput = text.split("## Throughput vs GPUs")[1].split("## Speedup")[0]
    # the calibration run, its device and system, and the compute's scaling, in the table and the caption
    assert "| NVIDIA H200 (system=h200) | NVIDIA H200 compute x3 |" in throughput
    assert "| NVIDIA H200 (system=h200) | NVIDIA H200 compute unscaled |" in throughput
    caption = next(line for line in throughput.splitlines() if line.startswith("!["))
    assert "predicted-juwels: calibration synthetic-r0 on NVIDIA H200 (system=h200), NVIDIA H200 compute x3" in caption
    assert "NVIDIA H200 compute unscaled, no loader modelled" in caption
    # an unscaled compute on JUWELS says what the documented scaling is
    assert "Ours: predicted-juwels-synthetic's compute is its calibration's on NVIDIA H200" in throughput
    assert "--compute-scale 3" in throughput
    # from the study's 4 GPUs: no 1-GPU row, and each curve's efficiency against its 4 GPUs
    assert "| predicted-juwels-synthetic | resnet50 | synthetic | 1 |" not in throughput
    assert "| predicted-juwels-synthetic | resnet50 | synthetic | 4 | 7,600 | 1.0 |" in throughput
    assert "| predicted-juwels-synthetic | resnet50 | synthetic | 512 | 760,000 | 0.781 |" in throughput
    # a synthetic calibration's data share is no loader's
    breakdown = text.split("## Breakdown table (a)")[1].split("## Breakdown table (b)")[0]
    assert "data % predicted (loader=synthetic)" in breakdown
    row_4 = next(line for line in breakdown.splitlines() if line.startswith("| 4 |"))
    assert "| no loader modelled |" in row_4 and "| 0.07 |" not in row_4


def test_a_marked_cell_is_named_in_the_paper_with_what_its_mark_means(cli, study_a, tmp_path):
    """A run that shared its host (interference_marks, launchers/lifecycle/interference.py) marks its cell in the
    paper as in results and the report; a clean study has no such section."""
    import json
    import shutil

    root = tmp_path / "runs"
    shutil.copytree(study_a, root)
    clean = cli("paper", "aach2023", str(root), "--out", str(tmp_path / "clean"), "--jobs", "1")
    assert clean.returncode == 0, clean.stderr
    assert "Cells to read with care" not in (tmp_path / "clean" / "paper.md").read_text()
    summaries = sorted(p for p in root.rglob("summary.json") if "aach2023_scaling" in p.parts)
    assert summaries, sorted(str(p.relative_to(root)) for p in root.rglob("*"))[:20]
    summary_path = summaries[0]
    summary = json.loads(summary_path.read_text())
    summary["interference_marks"] = "shared host: node1: other processes used 1.5 of 2 CPUs (0.1 idle)"
    summary_path.write_text(json.dumps(summary))
    marked = cli("paper", "aach2023", str(root), "--out", str(tmp_path / "marked"), "--jobs", "1")
    assert marked.returncode == 0, marked.stderr
    text = (tmp_path / "marked" / "paper.md").read_text()
    section = text[text.index("## Cells to read with care") :]
    assert "1 of " in section and "| shared host |" in section and "ask for whole nodes" in section
