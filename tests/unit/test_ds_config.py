"""DeepSpeed's JSON config from the typed DeepSpeedConfig (benchmarks/frameworks/deepspeed.py ds_config), for
every precision path: a pure function, so the GPU-only paths (bf16 and fp16 under autocast or in the
engine) are checked here, where no GPU is; the multiproc DeepSpeed tests run the CPU ones for real."""

from __future__ import annotations

import pytest
import torch

from benchmarks.frameworks.configs import DeepSpeedConfig
from benchmarks.frameworks.deepspeed import ds_config


def test_fp32_zero1_skips_the_unread_gradient_norm_and_never_clips():
    out = ds_config(DeepSpeedConfig(zero_stage=1, train_micro_batch_size_per_gpu=8), amp_dtype=None, comms_logger=False)
    assert out["zero_optimization"]["stage"] == 1 and out["zero_optimization"]["compute_grad_norm"] is False
    assert out["gradient_clipping"] == 0.0 and out["train_micro_batch_size_per_gpu"] == 8
    assert "torch_autocast" not in out and "bf16" not in out and "comms_logger" not in out


@pytest.mark.parametrize(("amp", "name"), [(torch.bfloat16, "bfloat16"), (torch.float16, "float16")])
def test_autocast_keeps_fp32_weights_and_reduces_fp32_unless_asked(amp, name):
    fp32 = ds_config(DeepSpeedConfig(zero_stage=2, train_micro_batch_size_per_gpu=8), amp_dtype=amp, comms_logger=True)
    assert fp32["torch_autocast"] == {"enabled": True, "dtype": name, "lower_precision_safe_modules": []}
    assert "bf16" not in fp32 and "fp16" not in fp32 and fp32["comms_logger"]["enabled"] is True
    half = DeepSpeedConfig(zero_stage=2, train_micro_batch_size_per_gpu=8, reduce_dtype="autocast")
    assert ds_config(half, amp_dtype=amp, comms_logger=False)["torch_autocast"] == {"enabled": True, "dtype": name}


def test_the_engine_holds_half_weights():
    engine = DeepSpeedConfig(zero_stage=0, train_micro_batch_size_per_gpu=8, mixed_precision="engine")
    bf16 = ds_config(engine, amp_dtype=torch.bfloat16, comms_logger=False)
    assert bf16["bf16"] == {"enabled": True} and bf16["data_types"] == {"buffer_dtype": "bf16"}
    fp16 = ds_config(engine, amp_dtype=torch.float16, comms_logger=False)
    assert fp16["fp16"] == {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    assert "torch_autocast" not in fp16 and "compute_grad_norm" not in fp16["zero_optimization"]
