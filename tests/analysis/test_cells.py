"""Every number belongs to one configuration: sweeps over any setting give distinct cells, rows and
curves; only true repeats pool; summary.json, `results`, `report` and `compare` give the same figures."""

from __future__ import annotations

import json
import re
import warnings

import pytest
from omegaconf import OmegaConf

from analysis.campaign_analysis import CampaignAnalysis
from analysis.figures import IDEAL_LABEL
from analysis.report import build_report
from analysis.scaling import throughput_vs_gpus
from benchmarks.rundir import cell_identity, run_files, summary_schema
from ddlbench.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")


def write_run(
    root,
    compose,
    overrides: list[str],
    *,
    world_size: int = 1,
    step_s: float = 0.1,
    repeat: int = 0,
    profiled_step_s: float | None = None,
) -> dict:
    """A completed run directory as the app writes it (config, meta, rank logs, summary); its summary."""
    settings = OmegaConf.to_container(
        compose(["model=simple_cnn", "run.per_gpu_batch=4", *overrides, f"run.root={root}", f"run.repeat={repeat}"]),
        resolve=True,
    )
    run_dir = cell_identity.run_dir(settings, world_size=world_size, num_nodes=1)
    run_dir.mkdir(parents=True)
    (run_dir / run_files.CONFIG).write_text(OmegaConf.to_yaml(OmegaConf.create(settings)))
    (run_dir / run_files.META).write_text(json.dumps({"schema_version": 1, "world_size": world_size, "num_nodes": 1}))
    for rank in range(world_size):
        lines = [{"kind": "header", "schema_version": 1, "rank": rank}]
        for step in range(6):
            profiled = profiled_step_s is not None and step == 2
            lines.append(
                {
                    "step": step,
                    "epoch": 0,
                    "step_in_epoch": step,
                    "samples": 4,
                    "warmup": step == 0,
                    "profiled": profiled,
                    "step_s": profiled_step_s if profiled else step_s * (1 + 0.01 * rank),
                    "data_s": 0.01,
                    "fwd_s": 0.03,
                    "bwd_s": 0.04,
                    "opt_s": 0.01,
                }
            )
        (run_dir / f"rank{rank}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    key = cell_identity.identity(settings, world_size=world_size, num_nodes=1)
    summary = summary_schema.completed_summary(
        key=key,
        measured=summary_schema.throughput_of_run(run_dir, world_size=world_size),
        wall_s=1.0,
        last_loss=1.0,
        warmup_steps=1,
        repeat=repeat,
        names={
            "framework": settings["framework"]["name"],
            "loader": settings["loader"]["name"],
            "model": "simple_cnn",
            "precision": settings["precision"]["name"],
            "per_gpu_batch": settings["run"]["per_gpu_batch"],
            "campaign": settings["run"]["campaign"],
        },
    )
    run_files.write_json_atomic(run_dir / run_files.SUMMARY, summary)
    return summary


def test_a_sweep_over_a_hidden_setting_gives_two_cells_not_two_repeats(tmp_path, compose, capsys):
    write_run(tmp_path, compose, ["optim.lr=0.1"], step_s=0.1)
    write_run(tmp_path, compose, ["optim.lr=0.2"], step_s=0.2)
    write_run(tmp_path, compose, ["optim.lr=0.2"], step_s=0.2, repeat=1)  # a true repeat
    cells = CampaignAnalysis(tmp_path).cells().set_index("variant")
    assert sorted(cells.index) == ["optim.lr=0.1", "optim.lr=0.2"]
    assert cells.loc["optim.lr=0.1", "num_repeats"] == 1 and cells.loc["optim.lr=0.2", "num_repeats"] == 2
    assert cells.loc["optim.lr=0.1", "throughput_img_s"] == pytest.approx(4 / 0.1)
    assert main(["results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # each cell's row names its variant, in its column or by a label spelled out under the table
    labels = dict(re.findall(r"^\s+(v\d+)\s+(optim\.lr=\S+)$", out, re.M))
    for figure, lr in (("40.0", "optim.lr=0.1"), ("20.0", "optim.lr=0.2")):
        names = "|".join(re.escape(n) for n in [lr, *(label for label, text in labels.items() if text == lr)])
        assert re.search(rf"^\s*{re.escape(figure)} .*\b({names})$", out, re.M), out


def test_precisions_and_systems_are_distinct_curves(tmp_path, compose):
    for precision in ("fp32", "amp_bf16"):
        for world in (1, 2):
            write_run(
                tmp_path,
                compose,
                [f"precision={precision}", "system.ranks_per_node=2"],
                world_size=world,
                step_s=0.1 if precision == "fp32" else 0.05,
            )
    write_run(tmp_path, compose, ["system=slurm_cpu"], world_size=1, step_s=0.3)
    analysis = CampaignAnalysis(tmp_path)
    scaled = analysis.scaling("weak")
    assert len(scaled) == 5 and scaled["group_hash"].nunique() == 3
    fig = throughput_vs_gpus(analysis.cells())
    labels = {line.get_label() for line in fig.axes[0].get_lines() if not line.get_label().startswith("_")}
    assert {  # what every curve shares is the panel's title, not each label's
        "fp32, system.name=local_cpu",
        "amp_bf16, system.name=local_cpu",
        "fp32, system.name=slurm_cpu",
        IDEAL_LABEL,
    } == labels
    assert fig.axes[0].get_title() == "simple CNN: PyTorch-DDP, synthetic"


def test_efficiency_names_its_baseline_and_is_empty_without_one(tmp_path, compose, capsys):
    write_run(tmp_path, compose, [], world_size=1, step_s=0.1)
    write_run(tmp_path, compose, [], world_size=2, step_s=0.1)
    write_run(tmp_path, compose, ["precision=amp_bf16"], world_size=2, step_s=0.1)  # no smaller GPU count
    scaled = CampaignAnalysis(tmp_path).scaling("weak").set_index(["precision", "world_size"])
    assert scaled.loc[("fp32", 2), "baseline_gpus"] == 1
    assert scaled.loc[("fp32", 2), "efficiency"] == pytest.approx(1 / 1.01)
    assert scaled.loc[("amp_bf16", 2), "efficiency"] != scaled.loc[("amp_bf16", 2), "efficiency"]  # NaN
    assert main(["results", str(tmp_path)]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "amp_bf16" in line)
    assert row.split()[-2:] == ["-", "-"]  # efficiency, baseline GPUs


def test_summary_results_report_and_compare_give_one_figure(tmp_path, compose, capsys):
    """The same throughput in summary.json, `results`, the report and `compare`, profiled steps excluded."""
    summary = write_run(tmp_path / "runs", compose, [], world_size=2, step_s=0.1, profiled_step_s=3.0)
    assert summary["measured_steps"] == 4  # 5 after warm-up, one of them profiled
    figure = f"{summary['throughput_img_s']:,.1f}"
    assert main(["results", str(tmp_path / "runs")]) == 0
    assert figure in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(tmp_path / "runs", tmp_path / "report", formats=("png",), jobs=1)
    table = (tmp_path / "report" / "report.md").read_text()
    assert f"| {figure} |" in table
    assert main(["compare", str(tmp_path / "runs"), str(tmp_path / "runs")]) == 0
    assert re.search(rf"{re.escape(figure)}\s+{re.escape(figure)}\s+0\.0", capsys.readouterr().out)
    per_run = CampaignAnalysis(tmp_path / "runs").run_throughput()
    assert per_run["throughput_img_s"].iloc[0] == pytest.approx(summary["throughput_img_s"], rel=1e-12)


def test_results_and_report_count_the_same_runs(tmp_path, compose, capsys):
    write_run(tmp_path, compose, [], world_size=1)
    broken = tmp_path / "default" / "broken"
    broken.mkdir(parents=True)
    (broken / "rank0.jsonl").write_text('{"kind": "header", "schema_version": 1}\n')  # died before a summary
    write_run(tmp_path, compose, [], world_size=1, repeat=7)
    only_warmup = next((tmp_path / "default").glob("*-r7"))
    lines = [json.loads(line) for line in (only_warmup / "rank0.jsonl").read_text().splitlines()]
    (only_warmup / "rank0.jsonl").write_text("".join(json.dumps({**line, "warmup": True}) + "\n" for line in lines))
    analysis = CampaignAnalysis(tmp_path)
    assert len(analysis.counted()) == 1 and len(analysis.excluded()) == 2
    assert main(["results", str(tmp_path)]) == 0
    assert "not counted (2)" in capsys.readouterr().out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        timings = build_report(tmp_path, tmp_path / "report", formats=("png",), jobs=1)
    assert timings["num_counted"] == 1


def test_compare_pairs_a_cell_whatever_else_each_campaign_holds(tmp_path, compose, capsys):
    """Campaign a holds native b4, native b8 and synthetic b8, b only native b8: its native b8 pairs (a
    setting that only the native runs have is NaN for the synthetic one, which made a's column float)."""
    native = ["loader=native", f"data.path={tmp_path / 'data'}", "loader.num_workers=1", "run.per_gpu_batch=8"]
    for overrides in ([*native, "run.per_gpu_batch=4"], native, ["run.per_gpu_batch=8"]):
        write_run(tmp_path / "runs", compose, ["run.campaign=a", *overrides], world_size=2, step_s=0.1)
    write_run(tmp_path / "runs", compose, ["run.campaign=b", *native], world_size=2, step_s=0.1)
    compared = CampaignAnalysis(tmp_path / "runs" / "a").compare(CampaignAnalysis(tmp_path / "runs" / "b"))
    assert sorted(compared["flag"]) == ["missing in B", "missing in B", "ok"], compared[["loader", "flag"]]
    assert main(["compare", str(tmp_path / "runs" / "a"), str(tmp_path / "runs" / "b")]) == 1  # two cells missing
    assert "only in B" not in capsys.readouterr().out
