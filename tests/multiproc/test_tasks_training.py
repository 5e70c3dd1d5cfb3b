"""The non-classification workloads for real on 2 CPU ranks (gloo), through `ddlbench run`: BERT's span
head on synthetic token sequences and RetinaNet on synthetic images with boxes, under DDP, FSDP2 and
DeepSpeed ZeRO-2 (and DataParallel's one process); each run completes, counts its samples in its own unit
and trains to a finite loss. Small: BERT-tiny at 32 tokens, RetinaNet at 32 px."""

from __future__ import annotations

import json
import math

import pytest

from tests.conftest import find_run, read_summary

STEPS = ["run.warmup_steps=1", "run.steps=2", "run.log_every=1"]
BERT = ["model=bert", "model.size=tiny", "model.seq_len=32", "run.per_gpu_batch=4", "optim.name=adamw", "optim.lr=1e-4"]
RETINANET = ["model=retinanet", "model.image_size=32", "model.num_classes=5", "run.per_gpu_batch=2", "optim.lr=0.01"]
DEEPSPEED = ["framework=deepspeed", "framework.zero_stage=2"]


def _run_and_check(ddlbench, tmp_path, model: list[str], framework: list[str], precision: str, *, name: str, unit: str):
    result = ddlbench("run", *model, *framework, f"precision={precision}", *STEPS, f"run.root={tmp_path}")
    assert result.returncode == 0, result.stderr[-4000:]
    run_dir = find_run(tmp_path / "default", name)
    summary = read_summary(run_dir)
    processes, batch = summary["num_processes"], summary["per_gpu_batch"]
    assert summary["status"] == "completed" and summary["sample_unit"] == unit
    assert summary["measured_samples"] == 2 * processes * batch and summary["throughput_img_s"] > 0
    assert math.isfinite(summary["last_loss"]) and summary["last_loss"] > 0
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["task"]["sample_unit"] == unit
    for rank in range(processes):
        steps = [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()[1:]]
        assert [s["step"] for s in steps] == [0, 1, 2] and all(s["samples"] == batch for s in steps)
        assert all(math.isfinite(s["loss"]) for s in steps)
    rate = "seq/s" if unit == "sequences" else "img/s"
    assert f"{rate} over" in result.stdout and f" {rate} (~" in result.stderr  # the done and progress lines
    return summary, meta


@pytest.mark.parametrize(
    ("framework", "name"),
    [
        (["framework=ddp"], "ddp-synthetic-bert_tiny-g2-n1-b4-r0"),
        (["framework=fsdp"], "fsdp-synthetic-bert_tiny-g2-n1-b4-r0"),
        (DEEPSPEED, "deepspeed-synthetic-bert_tiny-g2-n1-b4-r0"),
    ],
    ids=["ddp", "fsdp", "deepspeed-zero2"],
)
def test_bert_trains_on_token_sequences_in_bf16(tmp_path, framework, name, ddlbench, transformers):
    _, meta = _run_and_check(ddlbench, tmp_path, BERT, framework, "amp_bf16", name=name, unit="sequences")
    assert meta["task"]["task"] == "question_answering" and meta["task"]["seq_len"] == 32


def test_bert_under_data_parallel(tmp_path, ddlbench, transformers):
    summary, _ = _run_and_check(
        ddlbench, tmp_path, BERT, ["framework=dp"], "fp32", name="dp-synthetic-bert_tiny-g1-n1-b4-r0", unit="sequences"
    )
    assert summary["num_processes"] == 1


@pytest.mark.parametrize(
    ("framework", "precision", "name"),
    [
        (["framework=ddp"], "amp_bf16", "ddp-synthetic-retinanet-g2-n1-b2-r0"),
        # FSDP2 keeps the BatchNorm layers in fp32 under its bf16 policy (bf16 weights beside fp32 running
        # statistics failed on the CPU, and for RetinaNet on the H200 too)
        pytest.param(["framework=fsdp"], "amp_bf16", "fsdp-synthetic-retinanet-g2-n1-b2-r0", marks=pytest.mark.slow),
        # the matrix's off-diagonal cell (make test-matrix): DeepSpeed meets detection here, 48 s on the CI
        # machine; make test trains DeepSpeed on BERT and the zoo, and RetinaNet under DDP and FSDP2
        pytest.param(DEEPSPEED, "amp_bf16", "deepspeed-synthetic-retinanet-g2-n1-b2-r0", marks=pytest.mark.matrix),
    ],
    ids=["ddp", "fsdp", "deepspeed-zero2"],
)
def test_retinanet_trains_on_images_with_boxes(tmp_path, framework, precision, name, ddlbench):
    """The fsdp case is slow (24-54 s on the CI machine, by what shares it): FSDP2 shards RetinaNet's ResNet-50
    backbone, FPN and heads over 2 CPU ranks, the only detection model under a sharded framework in make test."""
    _, meta = _run_and_check(ddlbench, tmp_path, RETINANET, framework, precision, name=name, unit="images")
    assert meta["task"] == {"task": "detection", "sample_unit": "images", "image_size": 32, "boxes_per_image": 7}
