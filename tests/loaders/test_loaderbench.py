"""`ddlbench loaderbench` on the CPU, the fair-default rule and its warning, the report's loader settings."""

from __future__ import annotations

import json

import pytest

from benchmarks.loaderbench import worker_counts
from benchmarks.loaders.configs import loader_cpus, queue_depth


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    from benchmarks.data.synth import synth_imagefolder

    out = tmp_path_factory.mktemp("lb") / "data"
    synth_imagefolder(out, num_classes=2, images_per_class=8, width=48, height=36, quality=90, seed=0, progress=False)
    return out


def test_every_loader_gets_the_ranks_cpus_less_one(compose):
    assert [loader_cpus(c) for c in (1, 2, 16)] == [1, 1, 15]
    for loader, key in (("native", "num_workers"), ("native_gpu", "num_workers"), ("dali", "num_threads")):
        assert compose([f"loader={loader}", "system.cpus_per_rank=12"]).loader[key] == 11
    assert worker_counts(16) == [1, 2, 4, 8, 15] and worker_counts(2) == [1] and worker_counts(9) == [1, 2, 4, 8]


def test_a_loader_given_far_fewer_cpus_is_warned_about(compose):
    from benchmarks.validate import warnings

    assert warnings(compose(["loader=native", "system.cpus_per_rank=16"])) == []
    (line,) = warnings(compose(["loader=native", "system.cpus_per_rank=16", "loader.num_workers=2"]))
    assert "loader.num_workers=2" in line and "loader.num_workers=15" in line
    (line,) = warnings(compose(["loader=dali", "system.cpus_per_rank=16", "loader.num_threads=4"]))
    assert "loader.num_threads=15" in line
    assert warnings(compose(["loader=synthetic", "system.cpus_per_rank=16"])) == []


def test_the_queue_a_loader_starts_with(compose):
    assert queue_depth(compose(["loader=native"]).loader, workers=15) == 30
    assert queue_depth(compose(["loader=native_gpu"]).loader, workers=3) == 8
    assert queue_depth(compose(["loader=dali"]).loader, workers=15) == 4


def test_loaderbench_measures_each_case_and_writes_its_figure(tmp_path, folder, ddlbench):
    out = tmp_path / "lb"
    result = ddlbench(
        "loaderbench",
        f"data.path={folder}",
        "run.per_gpu_batch=4",
        "model.image_size=32",
        "--loaders",
        "native,native_gpu",
        "--workers",
        "1,2",
        "--batches",
        "2",
        "--warmup",
        "1",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loaderbench native x2:" in result.stderr  # progress, as each case ends
    records = json.loads((out / "loaderbench.json").read_text())["measurements"]
    assert [(r["case"], r["workers"]) for r in records] == [
        ("cpu_decode", 1),
        ("device_decode", None),
        ("native", 1),
        ("native", 2),
        ("native_gpu", 1),
        ("native_gpu", 2),
    ]
    assert all(r["img_s"] > 0 for r in records)
    # every loader row carries the seconds between its timed batches (what predict draws from); ceilings none
    for r in records[2:]:
        assert len(r["batch_intervals_s"]) == r["images"] // 4 and min(r["batch_intervals_s"]) > 0
    assert records[0]["batch_intervals_s"] == []
    bench = json.loads((out / "loaderbench.json").read_text())
    assert (bench["per_gpu_batch"], bench["image_size"]) == (4, 32)
    assert (out / "loaderbench.png").stat().st_size > 0
    assert "native_gpu" in result.stdout and "img/s per worker" in result.stdout
    again = ddlbench("loaderbench", f"data.path={folder}", "--out", str(out))
    assert again.returncode == 2 and "is not empty" in again.stderr


def test_loaderbench_bad_input_is_one_line(folder, cli):
    for args, words in (
        (["--loaders", "nope"], "is no loader case"),
        (["--loaders", "dali-tfrecord"], "--tfrecord"),
        (["--workers", "a"], "comma-separated"),
    ):
        result = cli("loaderbench", f"data.path={folder}", "run.per_gpu_batch=4", *args)
        assert result.returncode == 2 and words in result.stderr and len(result.stderr.strip().splitlines()) == 1, (
            result.stderr
        )
    result = cli("loaderbench")
    assert result.returncode == 2 and "data.path=DIR" in result.stderr
    result = cli("loaderbench", f"data.path={folder}", "run.per_gpu_batch=32")  # 16 images
    assert result.returncode == 2 and "holds 16 samples, but one step" in result.stderr


def test_the_report_states_each_loaders_settings(tmp_path, folder, ddlbench):
    for workers in ("1", "2"):
        result = ddlbench(
            "run",
            "loader=native",
            f"loader.num_workers={workers}",
            f"data.path={folder}",
            "model=simple_cnn",
            "run.per_gpu_batch=4",
            "run.steps=2",
            "run.warmup_steps=1",
            "system.cpus_per_rank=4",
            f"run.root={tmp_path / 'runs'}",
        )
        assert result.returncode == 0, result.stderr[-2000:]
    assert "loader.num_workers=1 gives loader=native 1 of the rank's 4 CPUs" not in result.stderr
    report = ddlbench("report", str(tmp_path / "runs"), "--out", str(tmp_path / "report"), "--formats", "png")
    assert report.returncode == 0, report.stderr[-2000:]
    text = (tmp_path / "report" / "report.md").read_text()
    table = text[text.index("| loader | CPUs per rank") :].split("\n\n")[0]
    assert "| native | 4 | 1 |" in table and "| native | 4 | 2 |" in table, table


def test_the_gpus_decode_ceilings_and_the_nvimgcodec_case():
    import torch

    from benchmarks.loaderbench import NVIMGCODEC_HW_LOADS, device_ceilings, loader_overrides

    assert device_ceilings(torch.device("cpu")) == [("device_decode", "torchvision", 1.0, True)]
    cuda = device_ceilings(torch.device("cuda", 0))
    assert [c[0] for c in cuda] == [
        "device_decode",
        "device_decode_only",
        "nvimgcodec_decode",
        "nvimgcodec_decode_only_hw1",
        "nvimgcodec_decode_only_hw0.65",
        "nvimgcodec_decode_only_hw0",
    ]
    assert [c[2] for c in cuda if c[0].startswith("nvimgcodec_decode_only")] == list(NVIMGCODEC_HW_LOADS)
    assert loader_overrides("native_gpu-nvimgcodec", 15, tfrecord_path=None) == [
        "loader=native_gpu",
        "loader.gpu_decoder=nvimgcodec",
        "loader.num_workers=15",
    ]


def test_the_nvimgcodec_case_is_skipped_with_its_reason_on_a_cpu(tmp_path, folder, ddlbench):
    out = tmp_path / "lb"
    result = ddlbench(
        "loaderbench",
        f"data.path={folder}",
        "run.per_gpu_batch=4",
        "model.image_size=32",
        "--loaders",
        "native_gpu-nvimgcodec,native_gpu",
        "--workers",
        "1",
        "--batches",
        "2",
        "--warmup",
        "1",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "case native_gpu-nvimgcodec is skipped: they decode on a GPU and system.device=cpu" in result.stderr
    records = json.loads((out / "loaderbench.json").read_text())["measurements"]
    assert [(r["case"], r["workers"]) for r in records] == [
        ("cpu_decode", 1),
        ("device_decode", None),
        ("native_gpu", 1),
    ]
