"""`ddlbench stash run` + `report` end to end on CPU ranks: the 4 one-node pairs of a study."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import find_run


@pytest.mark.slow
def test_stash_run_then_report(tmp_path, ddlbench):
    data = tmp_path / "synth"
    made = ddlbench(
        "data",
        "synth",
        "--out",
        str(data),
        "--classes",
        "2",
        "--per-class",
        "24",
        "--width",
        "80",
        "--height",
        "60",
        "--quiet",
    )
    assert made.returncode == 0, made.stderr
    args = [
        "model=simple_cnn",
        f"data.path={data}",
        "data.cache_evict=fadvise",
        f"run.root={tmp_path / 'runs'}",
        "run.steps=2",
        "run.warmup_steps=1",
        "run.per_gpu_batch=4",
        "run.log_every=0",
        "model.image_size=32",
        "stash.gpus=2",
        "stash.nodes=1",
    ]
    done = ddlbench("stash", "run", *args)
    assert done.returncode == 0, done.stderr[-3000:]
    study = tmp_path / "runs" / "stash"
    cells = sorted(p.relative_to(study).as_posix() for p in study.rglob("summary.json"))
    expected = [
        r"cold-cache/ddp-native-simple_cnn-fp32-g2-n1-b4-[0-9a-f]{8}-r0/summary\.json",
        r"ddp-native-simple_cnn-fp32-g2-n1-b4-[0-9a-f]{8}-r0/summary\.json",
        r"ddp-synthetic-simple_cnn-fp32-g1-n1-b4-[0-9a-f]{8}-r0/summary\.json",
        r"ddp-synthetic-simple_cnn-fp32-g2-n1-b4-[0-9a-f]{8}-r0/summary\.json",
    ]
    assert len(cells) == len(expected) and all(re.fullmatch(e, c) for e, c in zip(expected, cells)), cells
    meta = json.loads((find_run(study / "cold-cache", "ddp-native-simple_cnn-g2-n1-b4-r0") / "meta.json").read_text())
    assert meta["cache_evict"]["method"] == "fadvise" and meta["cache_evict"]["num_files"] == 48
    again = ddlbench("stash", "run", *args)
    assert again.returncode == 0 and again.stderr.count("completed, skipped") == 4
    report = ddlbench("stash", "report", *args)
    assert report.returncode == 0, report.stderr
    for stall in ("interconnect", "cpu", "disk"):
        assert f"\n{stall}" in report.stdout or f" {stall} " in report.stdout
    assert "cold cache made with: fadvise" in report.stdout
