"""The README says what its demo table ran and what a plain run trains instead (issue 36: a new user's plain
`ddlbench run` was 13x slower than the table, which did not say it was experiment=smoke at 64 px)."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_demo_table_names_its_experiment_and_the_plain_runs_size(compose):
    smoke, plain = compose(["experiment=smoke"]), compose([])
    line = next(p for p in README.read_text().split("\n\n") if p.startswith("`make demo` ends with this table"))
    line = " ".join(line.split())
    assert "`experiment=smoke`" in line, line
    assert f"ResNet-{smoke.model.depth} at {smoke.model.image_size} px" in line
    assert f"batch {smoke.run.per_gpu_batch}, {smoke.run.steps} measured steps" in line
    assert f"a plain `ddlbench run` trains ResNet-{plain.model.depth} at {plain.model.image_size} px" in line
