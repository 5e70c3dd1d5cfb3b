"""Sharded training for real on 2 CPU ranks (gloo), through `ddlbench run`: FSDP2 (fully_shard) and DDP
with torch's ZeroRedundancyOptimizer end with DDP's parameters; FSDP's replicas gather to the same
whole tensors; bf16 goes through MixedPrecisionPolicy; every rank writes its end record."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from benchmarks.models import build_model
from tests.conftest import SMALL_RUN, read_params, read_summary

COMMON = list(SMALL_RUN)
RANKS = "system.ranks_per_node=2"  # as the DeepSpeed and Horovod tests spell it: their DDP run is this one
# a model with repeated blocks (framework.shard_unit=blocks): ResNet-18, 8 residual blocks
RESNET = [c for c in COMMON if c != "model=simple_cnn"] + ["model=resnet", "model.depth=18", "model.image_size=32"]


def params(run_dir: Path, rank: int) -> dict[str, torch.Tensor]:
    return read_params(run_dir, rank)


def test_fsdp_writes_a_complete_run_with_whole_identical_replicas(shared_runs):
    run_dir = shared_runs(*COMMON, "framework=fsdp")
    assert re.fullmatch(r"fsdp-synthetic-simple_cnn-fp32-g2-n1-b8-[0-9a-f]{8}-r0", run_dir.name), run_dir.name
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["framework"] == "fsdp"
    assert (summary["world_size"], summary["num_processes"], summary["measured_samples"]) == (2, 2, 2 * 3 * 8)
    # no GPU: no device memory to record, in the summary and in each rank's end record
    assert summary["peak_allocated_bytes"] is None and summary["peak_reserved_bytes_by_rank"] is None
    framework = json.loads((run_dir / "meta.json").read_text())["framework"]
    assert framework["backend"] == "gloo" and framework["reshard_after_forward"] is True
    assert (framework["shard_unit"], framework["num_shard_groups"]) == ("children", 4)  # 2 convs, linear, root
    assert framework["param_dtype"] is None  # fp32: no mixed-precision policy
    for rank in (0, 1):
        lines = [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()]
        assert [s["step"] for s in lines[1:]] == [0, 1, 2, 3]
        assert json.loads((run_dir / f"end_rank{rank}.json").read_text()) == {
            "schema_version": 1,
            "rank": rank,
            "status": "completed",
            "error": None,
            "out_of_memory": False,
            "peak_allocated_bytes": None,
            "peak_reserved_bytes": None,
        }
    # whole tensors (full_tensor() gathered the shards) under the plain module's names, equal on both ranks
    initial = build_model(arch="simple_cnn", depth=None, num_classes=10, seed=0).state_dict()
    p0, p1 = params(run_dir, 0), params(run_dir, 1)
    assert {k: v.shape for k, v in p0.items()} == {k: v.shape for k, v in initial.items()}
    for key in p0:
        assert torch.equal(p0[key], p1[key]), key


@pytest.mark.parametrize(
    "overrides",
    [
        ("framework=fsdp",),
        ("framework=fsdp", "framework.reshard_after_forward=false", "framework.shard_unit=root"),
        ("framework=ddp", "framework.zero_optimizer=true"),
    ],
    ids=["fsdp", "fsdp-no-reshard-root", "ddp-zero"],
)
def test_sharded_training_ends_with_ddps_parameters(shared_runs, overrides):
    ddp = params(shared_runs(*COMMON, "framework=ddp", RANKS), 0)
    sharded = params(shared_runs(*COMMON, *overrides), 0)
    assert sharded.keys() == ddp.keys()
    for key in ddp:
        torch.testing.assert_close(sharded[key], ddp[key], rtol=1e-5, atol=1e-6, msg=key)
    initial = build_model(arch="simple_cnn", depth=None, num_classes=10, seed=0).state_dict()
    assert any(not torch.allclose(ddp[key], initial[key]) for key in ddp)  # training moved the weights


def test_fsdp_per_block_groups_end_with_ddps_parameters(shared_runs):
    """shard_unit=blocks: a group per residual block and the root (9 on ResNet-18); the same training as
    DDP (rank 0's BatchNorm statistics too: both compute them from rank 0's own batches)."""
    sharded_dir = shared_runs(*RESNET, "framework=fsdp", "framework.shard_unit=blocks")
    framework = json.loads((sharded_dir / "meta.json").read_text())["framework"]
    assert (framework["shard_unit"], framework["num_shard_groups"]) == ("blocks", 9)
    ddp, sharded = params(shared_runs(*RESNET, "framework=ddp"), 0), params(sharded_dir, 0)
    assert sharded.keys() == ddp.keys()
    for key in ddp:
        torch.testing.assert_close(sharded[key], ddp[key], rtol=1e-4, atol=1e-5, msg=key)


def test_zero_optimizer_is_recorded(shared_runs):
    framework = json.loads(
        (shared_runs(*COMMON, "framework=ddp", "framework.zero_optimizer=true") / "meta.json").read_text()
    )
    assert framework["framework"]["zero_optimizer"] is True and framework["framework"]["ddp_wrapped"] is True


def test_fsdp_bf16_goes_through_the_mixed_precision_policy(shared_runs):
    """precision=amp_bf16: bf16 all-gathers and compute, fp32 gradient reduction and fp32 sharded weights;
    channels_last weights go back to contiguous (FSDP2 shards contiguous parameters only)."""
    run_dir = shared_runs(*COMMON, "framework=fsdp", "precision=amp_bf16")
    assert "-amp_bf16-" in run_dir.name and read_summary(run_dir)["status"] == "completed"
    framework = json.loads((run_dir / "meta.json").read_text())["framework"]
    assert (framework["param_dtype"], framework["reduce_dtype"]) == ("bfloat16", "float32")
    assert framework["weights_format"].startswith("contiguous")
    p0, p1 = params(run_dir, 0), params(run_dir, 1)
    assert all(v.dtype == torch.float32 for v in p0.values())
    for key in p0:
        assert torch.equal(p0[key], p1[key]), key
    # the same bf16 compute as DDP under autocast (fp32 weights cast at each use), up to rounding
    ddp = params(shared_runs(*COMMON, "framework=ddp", "precision=amp_bf16", RANKS), 0)
    for key in ddp:
        torch.testing.assert_close(p0[key], ddp[key], rtol=2e-2, atol=2e-3, msg=key)


def test_fsdp_bf16_keeps_batchnorm_in_fp32(tmp_path, ddlbench):
    """A BatchNorm model under the bf16 policy: the norms are one fp32 group of their own (bf16 weights beside
    fp32 running statistics fail in batch_norm), every other group computes in bf16. Two images per rank:
    bf16 convolutions are slow on a CPU (17.8 s at 8, 9.8 s at 2 on the 2-core machine)."""
    run_dir = tmp_path / "fsdp-bn"
    small = [o for o in COMMON[1:] if not o.startswith("run.per_gpu_batch=")]
    done = ddlbench(
        "run", *small, "run.per_gpu_batch=2", "model=resnet", "model.depth=18", "model.image_size=32", "model.num_classes=10",
        "framework=fsdp", "precision=amp_bf16", "system.ranks_per_node=2", f"run.dir={run_dir}",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert read_summary(run_dir)["status"] == "completed"
    framework = json.loads((run_dir / "meta.json").read_text())["framework"]
    # conv1, layer1-4 and fc (bn1, a child, is in the norms' group), the model, and the norms
    assert framework["num_shard_groups"] == 6 + 1 + 1
