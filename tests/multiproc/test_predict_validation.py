"""`ddlbench predict --validate` on real CPU runs: a 1-rank run calibrates, commbench between 2 gloo ranks
gives the network, and the 2-rank run below the validation root is predicted and compared with what it
measured. The calibration run is never among the held-out points. The size of the error is a measurement
(docs/predict.md), not a test: this machine's 2 cores are shared by both ranks."""

from __future__ import annotations

import pandas as pd
import pytest

TRAIN = ["model=simple_cnn", "model.image_size=32", "model.num_classes=10", "run.per_gpu_batch=8", "run.log_every=0"]


@pytest.fixture(scope="module")
def measured(tmp_path_factory, ddlbench):
    root = tmp_path_factory.mktemp("predict")
    steps = ["run.steps=15", "run.warmup_steps=3"]
    for name, ranks in (("calibration/g1", 1), ("held_out/g2", 2)):
        done = ddlbench("run", *TRAIN, *steps, f"system.ranks_per_node={ranks}", f"run.dir={root / name}")
        assert done.returncode == 0, done.stderr[-2000:]
    done = ddlbench(
        "commbench",
        "--nproc",
        "2",
        "--placement",
        "out",
        "--max-bytes",
        "4194304",
        "--warmup",
        "1",
        "--iters",
        "5",
        "--out",
        str(root / "held_out" / "commbench.json"),
    )  # fmt: skip (up to 4 MiB: below that, a busy machine's noise can hide the growth a bandwidth fit needs)
    assert done.returncode == 0, done.stderr[-2000:]
    return root


def test_validation_predicts_the_held_out_run_only(measured, tmp_path, ddlbench):
    out = tmp_path / "out"
    done = ddlbench(
        "predict", *TRAIN, "system.ranks_per_node=2", "--from", str(measured / "calibration"),
        "--commbench", str(measured / "held_out"), "--validate", str(measured), "--gpus", "1,2", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "intra-node:" in done.stdout and "(commbench commbench.json)" in done.stdout
    table = pd.read_csv(out / "validation.csv")
    assert list(table["run_id"]) == ["held_out/g2"]  # the calibration run is not held out
    row = table.iloc[0]
    assert row["gpus"] == 2 and row["measured"] > 0 and row["predicted"] > 0
    assert row["error_pct"] == pytest.approx(100 * (row["predicted"] - row["measured"]) / row["measured"])
    assert "1 held-out run(s): mean |error|" in done.stdout
    assert (out / "predict_validation.png").stat().st_size > 0
