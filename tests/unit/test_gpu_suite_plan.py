"""The GPU suite's dry run (perf/gpu_suite_plan.py; perf/gpu_suite.py's figures): every step planned, each ddlbench
command's overrides composed and validated as `ddlbench run` would before launch, every call within its device call's
budget, every figure made of runs that exist, and the README's headline rows held to the steps that make them. No
process starts: the suite stays runnable between lent devices (issue 54)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from benchmarks.validate import validate

REPO = Path(__file__).resolve().parents[2]


def _script(name: str):
    """perf/<name>.py as a module, under its own name (as `python perf/gpu_suite.py` finds its plan beside it)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "perf" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


plan = _script("gpu_suite_plan")
suite = _script("gpu_suite")


def test_every_call_fits_one_device_call():
    for call in plan.CALLS:
        assert plan.steps_of(call), f"call {call} has no step"
        assert plan.estimate_s(call) <= plan.BUDGET_S < plan.CALL_LIMIT_S, (call, plan.estimate_s(call))


def test_every_ddlbench_command_composes_and_validates(compose, tmp_path):
    """Each command's overrides through the project's composition and validate() (the GPU check left out: this
    machine has none); the loaders' JPEG folder stands in as two class folders."""
    data = tmp_path / "jpegs"
    for name in ("a", "b"):
        (data / name).mkdir(parents=True)
    root = tmp_path / "runs"
    checked = 0
    for step in plan.STEPS:
        for run in step.runs:
            if not run.command or run.command == "commbench":
                continue
            overrides = [o.replace(plan.DATA, str(data)) for o in run.config(root=root)]
            try:
                cfg = compose(overrides)
                validate(cfg, check_device=False)
            except Exception as error:  # the step and run say which command rotted
                pytest.fail(f"{step.name} / {run.label}: {error}")
            assert cfg.system.name == "h200", (step.name, run.label)
            checked += 1
    assert checked >= 25


def test_every_other_command_exists_and_takes_its_options():
    for step in plan.STEPS:
        for run in step.runs:
            argv = run.args(py="python3", root=Path("/tmp/r"))
            if run.command:
                assert argv[:3] == ["python3", "-m", "ddlbench.cli"], argv
                continue
            script = next((a for a in argv if a.startswith("perf/")), None)
            if script is None:  # built or carried on the device: gpu_suite.sh makes it
                assert re.search(r"all_reduce_perf|pytorch_synthetic_benchmark", argv[0] + argv[-1] + " ".join(argv))
                continue
            text = (REPO / script).read_text()
            for flag in (a for a in argv if a.startswith("--")):
                assert f'"{flag}"' in text, f"{step.name}: {script} has no {flag}"


def test_labels_are_unique_and_figures_name_runs_that_exist():
    labels = [run.label for step in plan.STEPS for run in step.runs]
    assert len(labels) == len(set(labels))
    for step in plan.STEPS:
        for figure in step.figures:
            assert figure.of in labels, (step.name, figure)
            assert not figure.over or figure.over in labels, (step.name, figure)
    names = [f.name for s in plan.STEPS for f in s.figures]
    assert len(names) == len(set(names))
    for claim, made_of in plan.HEADLINES.items():
        assert set(made_of) <= plan.figure_names(), claim


def test_gpu_suite_sh_knows_every_call():
    text = (REPO / "perf" / "gpu_suite.sh").read_text()
    for call in plan.CALLS:
        assert re.search(rf"^  {call}\)", text, re.M), call
        assert f"perf/gpu_suite.sh {call}" in text, f"the header says how to start call {call}"


def test_readme_headline_rows_name_what_makes_them():
    """Each row's 'made by' cell names a suite call and step, or a perf/ script outside the suite; the rows whose
    figures the suite makes name the steps those figures come from."""
    section = (REPO / "README.md").read_text().split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    rows = [
        [c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines() if line.startswith("|")
    ]
    header, rows = rows[0], rows[2:]
    assert header[-1] == "made by", header
    steps = {s.name: s.call for s in plan.STEPS}
    figure_step = {f.name: s.name for s in plan.STEPS for f in s.figures}
    for row in rows:
        claim, made_by = row[0], row[-1]
        named = re.findall(r"gpu_suite (\w+): (\w+)", made_by)
        for call, step in named:
            assert steps.get(step) == call, f"{claim!r}: no step {step} in call {call}"
        scripts = re.findall(r"perf/[\w.]+", made_by)
        for script in scripts:
            assert (REPO / script).exists(), f"{claim!r}: {script} is not in perf/"
        assert named or scripts, f"{claim!r} names neither a suite step nor a perf/ script"
        start = next((s for s in plan.HEADLINES if claim.startswith(s)), None)
        if start is not None:
            assert {figure_step[n] for n in plan.HEADLINES[start]} <= {step for _, step in named}, claim
    assert all(any(r[0].startswith(s) for r in rows) for s in plan.HEADLINES)


def test_figures_and_the_readme_comparison_from_records(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(
        "## Headline figures\n\n| claim | figure | date | file | made by |\n|---|---|---|---|---|\n"
        "| Horovod / DDP, 1 GPU | 0.994 | d | f | x |\n| training fed by DALI / native_gpu / native, x | "
        "0.985 / 0.934 / 0.696 | d | f | x |\n\n## Layout\n"
    )
    records = [
        {"call": "1", "runs": {"r50-ddp": {"values": {"throughput_img_s": 1000.0}}}},
        {"call": "2", "runs": {"r50-horovod": {"values": {"throughput_img_s": 994.0}}}},
        {
            "call": "1",
            "runs": {
                "loader-synthetic": {"values": {"throughput_img_s": 100.0}},
                "loader-dali": {"values": {"throughput_img_s": 90.0}},
            },
        },
    ]
    found = suite.figures(records)
    assert found["Horovod / DDP"]["value"] == pytest.approx(0.994)
    assert found["native / synthetic"]["value"] is None
    lines = suite.headline_changes(found, readme)
    assert any(line.startswith("same") and "Horovod" in line for line in lines), lines
    assert any(line.startswith("CHANGED") and "0.900 / - / -" in line for line in lines), lines
    assert any("README has no row" in line for line in lines)  # the rows this README lacks are named
