"""DeepSpeed for real on 2 CPU ranks (gloo): ZeRO 0-3 run directories, replicas in step, ZeRO-0 equal to
DDP, clean exits over repeated runs, the deepspeed launcher, and the one-line error without deepspeed.

Every run is a shared one (tests/conftest.py SharedRuns): the DDP references are the Horovod and FSDP
tests' too, and test_no_abort_at_exit_over_repeated_runs reads the exit of every 2-rank run below."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.conftest import REPO, SMALL_RUN, read_params, read_summary

COMMON = list(SMALL_RUN)
RANKS = "system.ranks_per_node=2"  # spelled as the Horovod and FSDP tests spell it: the same DDP runs serve them all
DEEPSPEED = ("framework=deepspeed",)
BF16 = ("precision=amp_bf16", RANKS)
# ResNet-18 (BatchNorm) at 32 px, for what simple_cnn cannot show
RESNET = ["model=resnet", "model.depth=18", "model.image_size=32", "run.log_every=0", "run.save_params=true"]
RESNET_BF16 = (*RESNET, "run.per_gpu_batch=2", "run.warmup_steps=1", "run.steps=1", "precision=amp_bf16")
LAUNCHERS = {  # framework.local_launcher -> what the CLI prints, the launcher meta.json records
    "framework.local_launcher=deepspeed": ("deepspeed.launcher.runner --num_gpus=2", "torchrun"),
    "framework.local_launcher=mpirun": ("mpirun -np 2", "openmpi"),
}
# every 2-rank DeepSpeed run of this file
TWO_RANK_RUNS = [
    *[(*COMMON, *DEEPSPEED, f"framework.zero_stage={stage}") for stage in (0, 1, 2, 3)],
    (*COMMON, *DEEPSPEED, "framework.zero_stage=1", *BF16),
    (*COMMON, *DEEPSPEED, "framework.zero_stage=1", "framework.reduce_dtype=autocast", *BF16),
    (*RESNET_BF16, *DEEPSPEED, "framework.zero_stage=2", "framework.mixed_precision=engine"),
    (*RESNET_BF16, *DEEPSPEED),
    *[(*COMMON, *DEEPSPEED, launcher) for launcher in sorted(LAUNCHERS)],
]


def params(run_dir: Path, rank: int) -> dict[str, torch.Tensor]:
    return read_params(run_dir, rank)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_zero_stage_writes_a_complete_run_with_identical_replicas(shared_runs, deepspeed, stage):
    run_dir = shared_runs(*COMMON, *DEEPSPEED, f"framework.zero_stage={stage}")
    assert re.fullmatch(r"deepspeed-synthetic-simple_cnn-fp32-g2-n1-b8-[0-9a-f]{8}-r0", run_dir.name), run_dir.name
    summary = read_summary(run_dir)
    assert summary["status"] == "completed" and summary["framework"] == "deepspeed"
    assert (summary["world_size"], summary["measured_steps"], summary["measured_samples"]) == (2, 3, 2 * 3 * 8)
    framework = json.loads((run_dir / "meta.json").read_text())["framework"]
    assert framework["zero_stage"] == stage and framework["backend"] == "gloo"
    assert framework["ds_config"]["zero_optimization"]["stage"] == stage
    assert framework["ds_config"]["train_micro_batch_size_per_gpu"] == 8  # follows run.per_gpu_batch
    assert framework["ds_config"]["timers"] == {"throughput": {"enabled": False}}  # no per-step device sync
    # the global gradient norm only serves clipping, which is off (as in DDP)
    assert framework["ds_config"]["zero_optimization"].get("compute_grad_norm", True) is (stage not in (1, 2))
    if stage == 0:
        assert framework["reduce_note"] == "gradients are all-reduced after backward (not overlapped with it)"
    for rank in (0, 1):
        steps = [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()][1:]
        assert [s["step"] for s in steps] == [0, 1, 2, 3]
        # collectives are timed on CPU (comm_timing=auto), and all of a blocking collective is exposed
        assert all(0 < s["comm_s"] <= s["step_s"] and s["comm_exposed_s"] == s["comm_s"] for s in steps)
    p0, p1 = params(run_dir, 0), params(run_dir, 1)
    reference = params(shared_runs(*COMMON, *DEEPSPEED, "framework.zero_stage=0"), 0)
    # whole tensors (ZeRO-3 gathered its shards), the plain module's names, equal on both ranks
    assert {k: v.shape for k, v in p0.items()} == {k: v.shape for k, v in reference.items()}
    for key in p0:
        assert torch.equal(p0[key], p1[key]), key


def test_zero0_matches_ddp_from_the_same_seed_and_data(shared_runs, deepspeed):
    ddp = params(shared_runs(*COMMON, "framework=ddp", RANKS), 0)
    for stage in (0, 1):
        zero = params(shared_runs(*COMMON, *DEEPSPEED, f"framework.zero_stage={stage}"), 0)
        assert zero.keys() == ddp.keys()
        for key in ddp:
            torch.testing.assert_close(zero[key], ddp[key], rtol=1e-5, atol=1e-6, msg=f"ZeRO-{stage} {key}")


def test_no_gradient_clipping_unless_asked(shared_runs, deepspeed):
    """DeepSpeed clips gradients to a global norm of 1.0 unless its config says otherwise; ddlbench says
    0 (as DDP and Horovod). ResNet-18's first gradients have a norm well above 1, so clipping shows."""
    one_step = (*RESNET, "run.per_gpu_batch=4", "run.warmup_steps=0", "run.steps=1", "system.ranks_per_node=1")
    ddp = params(shared_runs(*one_step, "framework=ddp"), 0)
    unclipped = params(shared_runs(*one_step, *DEEPSPEED), 0)
    clipped = params(shared_runs(*one_step, *DEEPSPEED, "framework.gradient_clipping=1.0"), 0)
    for key in ddp:
        torch.testing.assert_close(unclipped[key], ddp[key], rtol=1e-5, atol=1e-6, msg=key)
    assert not torch.allclose(clipped["conv1.weight"], ddp["conv1.weight"], rtol=1e-3, atol=1e-4)


def test_bf16_with_batchnorm_trains(shared_runs, deepspeed):
    """Engine bf16: bf16 weights with bf16 BatchNorm buffers (DeepSpeed keeps buffers fp32 unless told), channels_last input."""
    run_dir = shared_runs(*RESNET_BF16, *DEEPSPEED, "framework.zero_stage=2", "framework.mixed_precision=engine")
    assert re.fullmatch(r"deepspeed-synthetic-resnet18-amp_bf16-g2-n1-b2-[0-9a-f]{8}-r0", run_dir.name), run_dir.name
    assert read_summary(run_dir)["status"] == "completed"
    p0, p1 = params(run_dir, 0), params(run_dir, 1)
    assert p0["conv1.weight"].dtype == torch.bfloat16 and p0["bn1.running_mean"].dtype == torch.bfloat16
    # parameters are in step; BatchNorm running statistics stay per rank (DeepSpeed does not broadcast
    # buffers, where DDP does from rank 0 before every forward)
    per_rank = {key for key in p0 if not torch.equal(p0[key], p1[key])}
    assert per_rank and all(".running_" in key for key in per_rank), sorted(per_rank)[:5]


def test_bf16_autocast_keeps_fp32_channels_last_weights(shared_runs, deepspeed):
    """The default mixed_precision=autocast: fp32 weights under torch.autocast, as DDP, and at ZeRO-0 the
    weights stay channels_last (recorded in meta.json)."""
    run_dir = shared_runs(*RESNET_BF16, *DEEPSPEED)
    assert re.fullmatch(r"deepspeed-synthetic-resnet18-amp_bf16-g2-n1-b2-[0-9a-f]{8}-r0", run_dir.name), run_dir.name
    meta = json.loads((run_dir / "meta.json").read_text())["framework"]
    assert meta["ds_config"]["torch_autocast"] == {
        "enabled": True,
        "dtype": "bfloat16",
        "lower_precision_safe_modules": [],
    }
    assert "bf16" not in meta["ds_config"]
    assert meta["weights_format"].startswith("channels_last")
    assert params(run_dir, 0)["conv1.weight"].dtype == torch.float32


@pytest.mark.parametrize("launcher", sorted(LAUNCHERS))
def test_other_launchers_run_the_ranks(shared_runs, deepspeed, launcher):
    command, source = LAUNCHERS[launcher]
    run_dir = shared_runs(*COMMON, *DEEPSPEED, launcher)
    assert command in shared_runs.stderr(run_dir)
    assert re.fullmatch(r"deepspeed-synthetic-simple_cnn-fp32-g2-n1-b8-[0-9a-f]{8}-r0", run_dir.name), run_dir.name
    assert read_summary(run_dir)["status"] == "completed"
    assert json.loads((run_dir / "meta.json").read_text())["launcher"] == source


@pytest.mark.slow
def test_no_abort_at_exit_over_repeated_runs(shared_runs, deepspeed, mpirun):
    """Slow (35-52 s on the CI machine, whichever of the file's ten 2-rank DeepSpeed runs it makes first).
    Without barrier + destroy_process_group, rank 0 aborted at exit in 4 of 13 runs (SIGABRT -> rc 1).
    Ten 2-rank runs end cleanly: the file's own (each made once in the session, whichever test asks first;
    ten repeats of one cell took 118 s on their own)."""
    assert len(TWO_RANK_RUNS) == 10
    for overrides in TWO_RANK_RUNS:
        run_dir = shared_runs(*overrides)  # SharedRuns asserts the exit code 0
        stderr = shared_runs.stderr(run_dir)
        assert "SIGABRT" not in stderr and "Signals." not in stderr, stderr[-3000:]
        assert read_summary(run_dir)["status"] == "completed"


def test_missing_deepspeed_is_a_one_line_error(tmp_path, rank_processes):
    # a rank whose python cannot import deepspeed (None in sys.modules blocks the import and find_spec)
    rank = (
        "import runpy, sys; sys.modules['deepspeed'] = None; sys.argv[0] = 'benchmarks'; "
        "runpy.run_module('benchmarks', run_name='__main__', alter_sys=True)"
    )
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            rank,
            "framework=deepspeed",
            "model=simple_cnn",
            "system.ranks_per_node=1",
            f"run.root={tmp_path}",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert result.stderr.strip().splitlines() == [
        "ddlbench: error: framework=deepspeed needs the deepspeed package, which is not installed; "
        "run \"pip install -e '.[deepspeed]'\" (or 'make deepspeed')"
    ]
    assert not (tmp_path / "default").exists()


# one rank: the engine's own all-reduce and comms logger
ONE_RANK = (
    "model=simple_cnn",
    "system.ranks_per_node=1",
    "run.warmup_steps=0",
    "run.steps=3",
    "run.log_every=0",
    "run.save_params=true",
)


def test_one_rank_zero0_skips_the_allreduce_and_equals_ddp(shared_runs, deepspeed):
    """At world size 1 the engine's all-reduce is switched off (nothing to reduce): same parameters as DDP."""
    run_dir = shared_runs(*ONE_RANK, *DEEPSPEED, "framework.comm_timer=off")
    assert json.loads((run_dir / "meta.json").read_text())["framework"]["single_rank_allreduce"] is False
    ddp, zero = params(shared_runs(*ONE_RANK, "framework=ddp"), 0), params(run_dir, 0)
    for key in ddp:
        torch.testing.assert_close(zero[key], ddp[key], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize(("comm_timer", "logger_on"), [("off", False), ("on", True)])
def test_comms_logger_is_on_only_when_asked(shared_runs, deepspeed, comm_timer, logger_on):
    """DeepSpeed 0.19.8 switches its comms logger on (a device sync after every collective) whenever the
    config has a comms_logger section, even one saying enabled: false. Checked on the engine itself."""
    run_dir = shared_runs(*ONE_RANK, *DEEPSPEED, f"framework.comm_timer={comm_timer}")
    meta = json.loads((run_dir / "meta.json").read_text())["framework"]
    assert meta["comms_logger_on"] is logger_on
    assert ("comms_logger" in meta["ds_config"]) is logger_on


def test_zero1_under_autocast_reduces_in_fp32_as_ddp(shared_runs, deepspeed):
    """DeepSpeed's torch_autocast reduces Conv/Linear gradients in bf16 at ZeRO >= 1 unless told; ddlbench
    tells it (framework.reduce_dtype=fp32), so ZeRO-1 trains as DDP does. reduce_dtype=autocast differs."""
    ddp = params(shared_runs(*COMMON, "framework=ddp", *BF16), 0)
    fp32 = params(shared_runs(*COMMON, *DEEPSPEED, "framework.zero_stage=1", *BF16), 0)
    low = params(
        shared_runs(*COMMON, *DEEPSPEED, "framework.zero_stage=1", "framework.reduce_dtype=autocast", *BF16),
        0,
    )
    for key in ddp:
        torch.testing.assert_close(fp32[key], ddp[key], rtol=1e-6, atol=1e-7)
    assert any(not torch.equal(low[key], ddp[key]) for key in ddp)
