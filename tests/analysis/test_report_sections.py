"""Which runs a report section or row is about (issue 36): CUDA and NCCL versions of GPU runs only, Stash
stalls of a Stash study's runs only."""

from __future__ import annotations

import pandas as pd

from analysis.overview import provenance


def _rows(runs: pd.DataFrame) -> dict[str, str]:
    table = provenance(runs)
    return dict(zip(table["what"], table["value (runs)"]))


def test_a_cpu_run_lists_no_cuda_or_nccl_version():
    """torch's CUDA build is in every run's meta.json; on a CPU run it is no fact of the run."""
    cpu = {"config.system.device": "cpu", "meta.hardware.gpus": "[]", "meta.hardware.cuda": "13.0"}
    rows = _rows(pd.DataFrame([{**cpu, "meta.hardware.host": "laptop"}]))
    assert rows == {"device": "CPU (model not recorded)", "hardware.host": "laptop"}
    gpu = {"config.system.device": "cuda", "meta.hardware.gpus": '["NVIDIA H200"]', "meta.hardware.cuda": "13.0"}
    rows = _rows(pd.DataFrame([{**cpu, "meta.hardware.cuda": "12.8"}, {**gpu, "meta.hardware.nccl": "2.27.3"}]))
    assert (rows["hardware.cuda"], rows["hardware.nccl"]) == ("13.0", "2.27.3")  # the GPU run's only
    # a CPU run on a GPU host (system=local_cpu on an H200) is a CPU run; no device recorded: its GPUs say
    rows = _rows(pd.DataFrame([{**cpu, "meta.hardware.gpus": '["NVIDIA H200"]'}]))
    assert "hardware.cuda" not in rows
    cpu["meta.hardware.cuda"] = "12.8"
    rows = _rows(pd.DataFrame([{**gpu, "config.system.device": None}, {**cpu, "config.system.device": None}]))
    assert rows["hardware.cuda"] == "13.0"


def test_what_was_run_on_what_names_the_device_profile_and_image_size():
    """A 64 px CPU run and a 224 px GPU run read apart in the report's first table: its device (the GPU's
    name, or the CPU and its cores), system profile and image size, each with its number of runs."""
    cpu = {
        "config.system.device": "cpu",
        "config.system.name": "local_cpu",
        "config.model.image_size": 64,
        "meta.hardware.gpus": "[]",
        "meta.hardware.cpu_count": 2,
    }
    rows = _rows(pd.DataFrame([cpu]))
    assert (rows["device"], rows["system profile"], rows["image size (px)"]) == (
        "CPU (model not recorded), 2 cores",
        "local_cpu",
        "64",
    )
    gpu = {
        "config.system.device": "cuda",
        "config.system.name": "h200",
        "config.model.image_size": 224.0,
        "meta.hardware.gpus": '["NVIDIA H200", "NVIDIA H200"]',
    }
    rows = _rows(pd.DataFrame([cpu, gpu, gpu]))
    assert rows["device"] == "GPU: NVIDIA H200 x2 (2), CPU (model not recorded), 2 cores (1)"
    assert rows["system profile"] == "h200 (2), local_cpu (1)" and rows["image size (px)"] == "224 (2), 64 (1)"
    # a run that failed before it wrote config.yaml and meta.json is no GPU run
    rows = _rows(pd.DataFrame([cpu, {"config.system.device": None, "meta.hardware.gpus": None}]))
    assert rows["device"] == "CPU (model not recorded), 2 cores (1), not recorded (no config.yaml or meta.json) (1)"


def _stash_section(root) -> list:
    """The blocks of the report's Stash stalls section, none where it has none."""
    from analysis.load import load_campaign
    from analysis.report import assemble

    blocks, _ = assemble(load_campaign(root))
    heads = [k for k, b in enumerate(blocks) if b.kind == "heading"]
    start = next((k for k in heads if blocks[k].content == "Stash stalls"), None)
    return [] if start is None else blocks[start : next((k for k in heads if k > start), len(blocks))]


def test_stash_stalls_only_for_the_runs_of_a_stash_study(tmp_path, compose):
    """Native and synthetic runs of one ordinary campaign are no Stash pairs (issue 36: they were paired
    silently into a cpu stall); the same runs as `ddlbench stash run` writes them (run.stash_role) are."""
    from tests.analysis.test_cells import write_run

    for marked in (False, True):
        root = tmp_path / ("stash" if marked else "plain")
        for loader, role, step_s in (("synthetic", "node", 0.1), ("native", "warm", 0.15)):
            marker = [f"run.stash_role={role}"] if marked else []
            write_run(root, compose, [f"loader={loader}", *marker], step_s=step_s)
        section = _stash_section(root)
        if not marked:
            assert section == []
            continue
        table = next(b.content for b in section if b.kind == "table")
        assert table["stall"].tolist() == ["cpu"]
        assert table["stall s"].round(6).tolist() == [0.25]  # 5 measured steps x 0.05 s


def test_the_stash_marker_is_no_setting_of_the_run(compose):
    """run.stash_role names the run's place in a study, not its configuration: the same cell, hash and name."""
    from omegaconf import OmegaConf

    from benchmarks.rundir import cell_identity

    def name(overrides: list[str]) -> str:
        settings = OmegaConf.to_container(compose(["model=simple_cnn", *overrides]), resolve=True)
        return cell_identity.dir_name(settings, world_size=2, num_nodes=1, repeat=0)

    assert name(["run.stash_role=warm"]) == name([])


def test_a_new_analysis_is_one_module_and_its_place_in_sections(tmp_path, compose, monkeypatch):
    """The worked example of docs/architecture.md: a toy analysis, the warm-up steps of each run, as the one
    module analysis/<name>.py would hold it (here a function), put in analysis/report.py's SECTIONS before
    the excluded runs; `ddlbench report` then writes its heading, its table and its figure, with no other change."""
    import matplotlib.pyplot as plt

    from analysis import report as report_module
    from analysis.report import build_report
    from analysis.report_blocks import Block, Report, add_figure
    from tests.analysis.test_cells import write_run

    def warmup_draw(report: Report) -> None:  # analysis/warmup.py's draw
        steps = report.campaign.steps
        table = steps[steps["warmup"]].groupby("run_id").size().rename("warmup_steps").reset_index()
        report.blocks.append(Block("heading", "Warm-up"))
        report.blocks.append(Block("table", table, note="Steps before the measured ones, per run."))

        def figure():
            fig, ax = plt.subplots()
            ax.bar(table["run_id"].str[-6:], table["warmup_steps"])
            return fig

        add_figure(report.blocks, report.figures, "warmup", figure, "Warm-up steps per run.")

    write_run(tmp_path / "runs", compose, ["loader=synthetic"], step_s=0.1)
    sections = report_module.SECTIONS
    monkeypatch.setattr(report_module, "SECTIONS", (*sections[:-1], warmup_draw, sections[-1]))
    out = tmp_path / "report"
    build_report(tmp_path / "runs", out, formats=("png",))
    text = (out / "report.md").read_text()
    assert text.index("## Warm-up") < text.index("## Excluded runs") and "warmup steps" in text
    assert (out / "figures" / "warmup.png").exists()
