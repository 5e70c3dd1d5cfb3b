"""DeepSpeed's gradient bytes by reduce dtype (DeepSpeedConfig.gradient_messages): with torch_autocast at ZeRO >= 1
and reduce_dtype=autocast it reduces Conv/Linear gradients in the autocast dtype, in a bucket of their own."""

from __future__ import annotations

import pytest

from benchmarks import gradients as G
from benchmarks.frameworks.configs import framework_config

# two Conv/Linear gradients of 400 fp32 bytes (100 elements) and one BatchNorm gradient of 40
GRADS = [
    G.Gradient("fc.weight", 400, 0.2, True),
    G.Gradient("bn.weight", 40, 0.5, False),
    G.Gradient("conv.weight", 400, 1.0, True),
]
ZERO2 = {"name": "deepspeed", "zero_stage": 2, "reduce_bucket_size": 150, "mixed_precision": "autocast"}


def test_autocast_halves_conv_and_linear_gradients_in_their_own_buckets():
    out = framework_config({**ZERO2, "reduce_dtype": "autocast"}).gradient_messages(GRADS, amp=True)
    # the half bucket: 150 elements; fc's 100 then conv's 100 close it at 200 elements = 400 bytes
    assert [(b.bytes, b.ready_fraction) for b in out] == [(40, 0.5), (400, 1.0)]
    assert sum(b.bytes for b in out) == 400 + 40  # (400 + 400) / 2 + 40


@pytest.mark.parametrize(
    "framework, amp_dtype",
    [
        ({**ZERO2, "reduce_dtype": "fp32"}, "bfloat16"),  # reduce_dtype=fp32: no safe modules
        ({**ZERO2, "reduce_dtype": "autocast"}, None),  # precision=fp32: no autocast
        ({**ZERO2, "reduce_dtype": "autocast", "zero_stage": 0}, "float16"),  # ZeRO-0 reduces fp32
        ({**ZERO2, "reduce_dtype": "autocast", "mixed_precision": "engine"}, "bfloat16"),  # not torch_autocast
    ],
)
def test_everything_else_reduces_fp32(framework, amp_dtype):
    config = framework_config(framework)
    out = config.gradient_messages(GRADS, amp=amp_dtype is not None)
    assert sum(b.bytes for b in out) == 840
    assert not config.halves_conv_linear(amp=amp_dtype is not None)


def test_resnet50_under_amp_sends_about_half_and_all_gathers_fp32_parameters():
    from analysis.predict import model as M

    layout = G.layout({"arch": "resnet", "depth": 50, "num_classes": 1000, "batch_norm": True}, image_size=224)
    fp32 = sum(g.bytes for g in layout.gradients)
    framework = {**ZERO2, "reduce_bucket_size": 500_000_000, "reduce_dtype": "autocast", "overlap_comm": True}
    half = framework_config(framework).gradient_messages(layout.gradients, amp=True)
    norm = sum(g.bytes for g in layout.gradients if not g.lower_precision_safe)  # BatchNorm's: fp32 still
    assert 0 < norm < 0.01 * fp32
    assert sum(b.bytes for b in half) == (fp32 - norm) // 2 + norm
    plan = M.messages(framework, half, param_bytes=fp32)
    assert plan[-1].op == "all_gather" and plan[-1].bytes == fp32  # the parameters stay fp32 under autocast
