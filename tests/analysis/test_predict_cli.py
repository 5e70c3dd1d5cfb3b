"""`ddlbench predict` end to end on a calibration run written by synthetic_logs: the JUWELS Booster prediction
against seed study A's DDP table, its files, and the one-line errors before anything is computed."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest

GPUS = "4,8,16,32,64,128,256,512,1024"
CELL = ["model=resnet", "model.depth=50", "run.per_gpu_batch=64", "precision=amp_bf16", "loader=dali"]


@pytest.fixture(scope="module")
def one_gpu(tmp_path_factory) -> Path:
    from analysis.synthetic_logs.campaign import write_campaign
    from analysis.synthetic_logs.cells import SynthCell

    root = tmp_path_factory.mktemp("calibration")
    cell = SynthCell(framework="ddp", loader="dali", model="resnet50", world_size=1, num_nodes=1)
    write_campaign(root, [cell], steps=60, warmup_steps=5, campaign="one", commbench=False)
    return root / "one"


def _table(stdout: str, header: str) -> list[list[str]]:
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == header.split()[:2])
    rows = []
    for line in lines[start + 1 :]:
        if line.startswith("#") or not line.strip():
            break
        rows.append(line.split())
    return rows


def test_juwels_prediction_reproduces_the_reference_shape(one_gpu, tmp_path, cli):
    out = tmp_path / "predicted"
    done = cli(
        "predict", *CELL, "--system", "juwels_booster", "--from", str(one_gpu), "--reference", "aach2023",
        "--fit-to-reference", "--gpus", GPUS, "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "# prediction fitted to the study aach2023 at 4 GPUs" in done.stdout
    assert json.loads((out / "cell.json").read_text())["fitted_to"] == "aach2023"
    assert "intra-node: 180 GB/s busbw" in done.stdout and "inter-node: 20 GB/s busbw" in done.stdout
    rows = _table(done.stdout, "gpus nodes")
    assert [int(r[0]) for r in rows] == [4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert [int(r[1]) for r in rows] == [1, 2, 4, 8, 16, 32, 64, 128, 256]  # 4 GPUs per node
    shares = [float(r[7]) for r in rows]
    assert shares == sorted(shares) and shares[0] == pytest.approx(15.4, abs=0.05)  # rises from the fitted point
    assert "rises with the GPU count: yes (reference: yes)" in done.stdout
    compared = pd.read_csv(out / "reference.csv")
    assert list(compared["held_out"]) == [False] + [True] * 8
    assert compared.loc[0, "allreduce_err_pp"] == pytest.approx(0.0, abs=1e-6)
    prediction = pd.read_csv(out / "prediction.csv")
    assert prediction["efficiency"].is_monotonic_decreasing
    assert {p.name for p in out.iterdir()} >= {
        "prediction.csv",
        "reference.csv",
        "predict_breakdown.png",
        "predict_breakdown.svg",
        "predict_vs_reference.png",
    }
    before = (out / "prediction.csv").read_bytes()
    again = cli("predict", *CELL, "--system", "juwels_booster", "--from", str(one_gpu), "--out", str(out))
    assert again.returncode == 2 and "not empty (never overwritten)" in again.stderr
    assert (out / "prediction.csv").read_bytes() == before


def test_compute_scale_slows_compute_and_its_jitter(one_gpu, cli):
    base = cli("predict", *CELL, "--system", "juwels_booster", "--from", str(one_gpu), "--gpus", "1,8")
    slow = cli(
        "predict", *CELL, "--system", "juwels_booster", "--from", str(one_gpu), "--gpus", "1,8", "--compute-scale", "2"
    )
    assert base.returncode == 0 and slow.returncode == 0, base.stderr + slow.stderr
    (b1, b8), (s1, s8) = _table(base.stdout, "gpus nodes"), _table(slow.stdout, "gpus nodes")
    assert float(s1[2]) > 1.5 * float(b1[2])  # step ms: compute doubles, data and other stay
    # the compute's jitter doubles too; the data time's spread stays: the sync is e(n) x their hypot
    jitter = float(re.search(r"jitter ([\d.]+) ms", base.stdout)[1])
    data = float(re.search(r"data-time spread ([\d.]+) ms", base.stdout)[1])
    grows = math.hypot(2 * jitter, data) / math.hypot(jitter, data)
    assert float(s8[8]) == pytest.approx(grows * float(b8[8]), rel=0.02)


@pytest.mark.parametrize(
    "args, says",
    [
        ((), "predict needs a measured run for the compute: --from RUN_DIR"),
        (("--from", "/no/such/run"), "--from /no/such/run: no such file or directory"),
        (("--gpus", "4,x"), "--gpus 4,x: give GPU counts separated by commas"),
        (("--gpus", "0"), "--gpus 0: every GPU count must be >= 1"),
        (("--compute-scale", "0"), "--compute-scale 0.0: give a factor > 0"),
    ],
)
def test_bad_input_is_one_line(one_gpu, args, says, cli):
    extra = () if any(a == "--from" for a in args) or not args else ("--from", str(one_gpu))
    done = cli("predict", *CELL, "--system", "juwels_booster", *extra, *args)
    assert done.returncode == 2, done.stdout
    assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_calibration_run_of_another_configuration_is_refused(one_gpu, cli):
    done = cli("predict", "model=resnet", "model.depth=101", "run.per_gpu_batch=64", "precision=amp_bf16",
                    "--system", "juwels_booster", "--from", str(one_gpu))  # fmt: skip
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip() == "ddlbench: error: " + (
        f"model=resnet101: the calibration run {_run_name(one_gpu)} ran model=resnet50; pass --from a run of "
        "model=resnet101 (ddlbench run ... on a GPU of the kind it ran on), or predict model=resnet50"
    )


def _run_name(root: Path) -> str:
    return next(p.parent.name for p in root.rglob("summary.json"))


@pytest.mark.parametrize("loader", ["loader=native", "loader=synthetic", "loader.reader=tfrecord"])
def test_a_loader_the_calibration_run_did_not_measure_is_refused_before_any_output(one_gpu, loader, cli):
    done = cli("predict", *CELL, loader, "--system", "juwels_booster", "--from", str(one_gpu))
    asked = "loader=dali loader.reader=tfrecord" if "tfrecord" in loader else loader
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip() == "ddlbench: error: " + (
        f"{asked}: the calibration run {_run_name(one_gpu)} was fed by loader=dali; pass --from a run with "
        f"{asked}, or --loader-capacity FILE from 'ddlbench loaderbench' on that machine"
    )


def test_an_unmodelled_framework_and_a_missing_network_are_refused(one_gpu, cli):
    done = cli("predict", *CELL, "framework=dp", "--system", "juwels_booster", "--from", str(one_gpu))
    assert done.returncode == 2 and "framework=dp: predict models ddp (with or without zero_optimizer)" in done.stderr
    # a sharded mode from a replicated calibration run: its compute lacks the mode's own work per unit
    done = cli("predict", *CELL, "framework=fsdp", "--system", "juwels_booster", "--from", str(one_gpu))
    assert done.returncode == 2 and not done.stdout
    assert done.stderr.strip() == (
        f"ddlbench: error: framework=fsdp framework.shard_unit=children: the calibration run {_run_name(one_gpu)} ran framework=ddp, horovod or "
        "deepspeed with framework.zero_stage 0-2, whose compute lacks (or holds) the sharded mode's own work per "
        "unit; pass --from a run of framework=fsdp framework.shard_unit=children"
    )
    done = cli("predict", *CELL, "--from", str(one_gpu))  # local_cpu has no network block
    assert done.returncode == 2 and "no network to predict with" in done.stderr


def test_another_loader_is_modelled_from_loaderbench_s_capacity(one_gpu, tmp_path, cli):
    import json

    # juwels_booster: 12 CPUs per rank, so the native loader's default is 11 workers
    bench = tmp_path / "loaderbench.json"
    rows = [
        {
            "case": "native",
            "workers": w,
            "img_s": v,
            "images": 999,
            "device": "cuda",
            "batch_intervals_s": [64 / v] * 20,
        }
        for w, v in ((2, 50.0), (11, 100.0))
    ]
    bench.write_text(json.dumps({"per_gpu_batch": 64, "image_size": 224, "measurements": rows}))
    args = ("--system", "juwels_booster", "--from", str(one_gpu), "--gpus", "4,1024", "--loader-capacity", str(bench))
    done = cli("predict", *CELL, "loader=native", *args)
    assert done.returncode == 0, done.stderr
    assert f"data: loader=native delivers 100 img/s per rank, 400 per node of 4 (--loader-capacity {bench})" in (
        done.stdout
    )
    four, _ = _table(done.stdout, "gpus nodes")
    assert float(four[3].replace(",", "")) == pytest.approx(400, abs=0.5)  # img/s: the loaders' 4 x 100
    assert (
        "# data% waits for the loader at 4, 1024 GPUs: the GPUs of a node ask 1,643 img/s at most, its loaders deliver 400"
        in done.stdout
    )
    assert "which a trace shows as collective time" in done.stdout
    assert "11 made at once in 7040.0 ms (spread 0.0 ms), 22 batches ahead" in done.stdout
    assert "simulated: each rank's loader makes batches at its measured intervals" in done.stdout
    refused = cli("predict", *CELL, "loader=native", "loader.num_workers=8", *args)
    assert refused.returncode == 2 and not refused.stdout
    assert "no native row at 8 workers/threads, the prediction's (it has 2, 11)" in refused.stderr
    # a file of another batch, or from before loaderbench recorded its intervals: one line naming the fix
    bench.write_text(json.dumps({"per_gpu_batch": 256, "image_size": 224, "measurements": rows}))
    refused = cli("predict", *CELL, "loader=native", *args)
    assert refused.returncode == 2 and refused.stderr.strip() == "ddlbench: error: " + (
        f"--loader-capacity {bench}: the file timed per_gpu_batch 256, the prediction's is 64; run 'ddlbench "
        "loaderbench run.per_gpu_batch=64 ...' on the machine predicted"
    )
    for row in rows:
        del row["batch_intervals_s"]
    bench.write_text(json.dumps({"per_gpu_batch": 64, "image_size": 224, "measurements": rows}))
    refused = cli("predict", *CELL, "loader=native", *args)
    assert refused.returncode == 2 and "its native row has no batch intervals" in refused.stderr


def test_the_reference_is_printed_beside_the_prediction_and_never_feeds_it(one_gpu, tmp_path, cli):
    args = ("predict", *CELL, "--system", "juwels_booster", "--from", str(one_gpu), "--gpus", GPUS)
    alone = cli(*args)
    out = tmp_path / "beside"
    beside = cli(*args, "--reference", "aach2023", "--out", str(out))
    assert alone.returncode == 0 and beside.returncode == 0, alone.stderr + beside.stderr
    assert _table(beside.stdout, "gpus nodes") == _table(alone.stdout, "gpus nodes")
    assert "the study's rows beside the prediction: none of them feeds it" in beside.stdout
    assert "fitted" not in beside.stdout
    compared = pd.read_csv(out / "reference.csv")
    assert compared["held_out"].all() and len(compared) == 9
    assert json.loads((out / "cell.json").read_text())["fitted_to"] == ""
    alone_fit = cli(*args, "--fit-to-reference")
    assert alone_fit.returncode == 2 and "--fit-to-reference needs --reference STUDY" in alone_fit.stderr


def test_each_held_out_run_takes_loaderbenchs_row_at_its_own_worker_count(cli):
    """The H200 runs of docs/results: one synthetic-fed calibration, loaderbench at 4 and 11 native workers, and
    native-fed runs at each count; each run is predicted with its own count's row (a simulated loader)."""
    results = Path(__file__).resolve().parents[2] / "docs/results/2026-12-04-h200-loader-predict"
    done = cli(
        "predict", "system=h200", "system.cpus_per_rank=12", "precision=amp_bf16", "model=resnet", "model.depth=50",
        "run.per_gpu_batch=64", "loader=native", "--gpus", "1", "--from", str(results / "calibration"),
        "--loader-capacity", str(results / "loaderbench/loaderbench.json"), "--validate", str(results / "heldout"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    predicted = {line.split()[-1]: line.split()[3] for line in done.stdout.splitlines() if " native-" in line}
    assert predicted == {
        "native-r0": "2,218.5",
        "native-r1": "2,218.5",
        "native-w4-r0": "876.0",
        "native-w4-r1": "876.0",
    }
    assert "skipped dali-r0: another model, batch, precision, loader or parameter sharding" in done.stdout


def test_the_table_rounds_to_its_interval_and_says_what_eff_is_against(one_gpu, cli):
    """No seven significant digits: each rate is rounded to two digits of its +- (the held-out error of
    docs/predict.md and the calibration's spread), and eff names its reference."""
    from analysis.predict.interval import HELDOUT_ERROR_PCT, rounded

    done = cli("predict", *CELL, "--system", "juwels_booster", "--from", str(one_gpu), "--gpus", "1,4,1024")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["gpus", "nodes"])
    assert header.split()[4:7] == ["img/s", "+-", "img/s/GPU"] and "eff/1GPU" in header
    last = lines[lines.index(header) + 3].split()
    throughput, pm = float(last[3].replace(",", "")), float(last[4].replace(",", ""))
    assert 0.06 < pm / throughput < 0.15  # the held-out error at least
    assert len(last[4].replace(",", "").rstrip("0").rstrip(".")) <= 2  # two significant digits of the +-
    assert f"held-out mean |error| {HELDOUT_ERROR_PCT}%" in done.stdout
    assert "# eff/1GPU: img/s/GPU over the predicted img/s/GPU at 1 GPU" in done.stdout
    assert rounded(4_142_014, 290_000) == "4,140,000" and rounded(7.913, 0.55) == "7.91"
