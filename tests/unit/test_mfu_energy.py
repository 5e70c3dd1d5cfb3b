"""MFU's parts (benchmarks/peaks.py, benchmarks/flops.py) and the measured window's energy (telemetry.EnergyMeter,
rundir.energy_fields): the peak table's lookups and refusals, the FLOP counts against published figures, the
energy arithmetic with NVML replaced, RAPL from a fake sysfs tree and absent for real on this machine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmarks import peaks, rundir, telemetry


@pytest.mark.parametrize(
    ("name", "math", "tflops"),
    [
        ("NVIDIA H200", "bf16", 989.5),
        ("NVIDIA H100 80GB HBM3", "tf32", 494.5),
        ("NVIDIA H100 PCIe", "fp16", 756.0),
        ("NVIDIA A100-SXM4-80GB", "tf32", 156.0),
        ("NVIDIA A100-PCIE-40GB", "fp32", 19.5),
        ("Tesla V100-SXM2-32GB", "fp16", 125.0),
        ("Tesla V100-PCIE-16GB", "tf32", 14.0),  # no TF32 on Volta: fp32 runs as fp32
        ("Tesla K80", "fp32", 4.365),
    ],
)
def test_peak_rows(name, math, tflops):
    found = peaks.peak(name, math)
    assert found.tflops == tflops
    assert "https://" in found.reason  # each row names its datasheet


def test_no_peak_says_why():
    assert peaks.peak(None, "fp32") == peaks.Peak(None, "CPU: no peak table")
    unknown = peaks.peak("NVIDIA GeForce RTX 4090", "bf16")
    assert unknown.tflops is None and "not in the peak table" in unknown.reason
    lacking = peaks.peak("Tesla V100-SXM2-16GB", "bf16")
    assert lacking.tflops is None and "no bf16 peak" in lacking.reason
    # no MFU from a missing peak, never a fallback one
    assert peaks.mfu(flops_per_sample=1e9, per_gpu_samples_s=100.0, peak_tflops=None) == (0.1, None)


def test_math_and_mfu_arithmetic():
    assert peaks.math_of("bfloat16", tf32=True) == "bf16"
    assert peaks.math_of("float16", tf32=False) == "fp16"
    assert peaks.math_of(None, tf32=True) == "tf32"
    assert peaks.math_of(None, tf32=False) == "fp32"
    achieved, mfu = peaks.mfu(flops_per_sample=24.6e9, per_gpu_samples_s=3000.0, peak_tflops=989.5)
    assert achieved == pytest.approx(73.8) and mfu == pytest.approx(73.8 / 989.5)


def _counted(arch: str, **fields):
    from benchmarks.flops import meta_model, model_flops_per_sample
    from benchmarks.models.configs import ModelConfig
    from benchmarks.tasks import build_task

    config = ModelConfig(arch=arch, **fields)
    plain = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    plain = {k: str(v) if hasattr(v, "value") else v for k, v in plain.items()}
    return model_flops_per_sample(plain, build_task(config)), meta_model(plain)


def test_resnet50_flops_match_torchvision():
    """torchvision's ResNet-50 card: 4.09 G multiply-adds forward at 224 px, 8.18 GFLOPs; training is forward
    + backward (twice the forward): about 3x."""
    counted, _ = _counted("resnet", depth=50, num_classes=1000, image_size=224)
    assert counted.flops / 3 == pytest.approx(2 * 4.09e9, rel=0.02)


def test_bert_large_flops_per_token_six_times_parameters(transformers):
    counted, model = _counted("bert", size="large", seq_len=384)
    parameters = sum(p.numel() for p in model.parameters())
    assert counted.flops / 384 == pytest.approx(6 * parameters, rel=0.10)


# BERT-large at 384 tokens, by hand (benchmarks/flops.py bert_flops_per_sample's terms): 24 layers x (8 x 1024^2
# projections + 4 x 1024 x 4096 feed-forward + 4 x 384 x 1024 attention) + 4 x 1024 span head, x 3 x 384
BERT_LARGE_384 = 3 * 384 * (24 * (8 * 1024**2 + 4 * 1024 * 4096 + 4 * 384 * 1024) + 4 * 1024)
BERT_LARGE_384_ATTENTION = 3 * 384 * 24 * 4 * 384 * 1024  # QK^T and attention x V, forward + backward


@pytest.mark.parametrize(("size", "seq_len"), [("large", 384), ("large", 128), ("base", 384), ("tiny", 16)])
def test_bert_flops_counted_on_the_meta_device_equal_the_analytic_count(size, seq_len, transformers):
    """The installed transformers (4.x or 5.x: docs/mfu.md) runs on the meta device and its count is the analytic
    one exactly: attention's matmuls, 5.9% of BERT-large's FLOPs at 384 tokens, would show at any tolerance under that."""
    import transformers as library

    from benchmarks.flops import bert_flops_per_sample

    counted, _ = _counted("bert", size=size, seq_len=seq_len)
    assert counted.reason.endswith("meta device"), (library.__version__, counted.reason)
    assert counted.flops == pytest.approx(bert_flops_per_sample(size, seq_len=seq_len), rel=1e-9)


def test_bert_analytic_count_by_hand():
    from benchmarks.flops import bert_flops_per_sample

    assert bert_flops_per_sample("large", seq_len=384) == BERT_LARGE_384 == 739_275_964_416
    assert BERT_LARGE_384_ATTENTION / BERT_LARGE_384 == pytest.approx(0.0588, abs=1e-3)
    without_attention = BERT_LARGE_384 - BERT_LARGE_384_ATTENTION
    assert bert_flops_per_sample("large", seq_len=384) != pytest.approx(without_attention, rel=0.01)


def test_bert_falls_back_to_the_analytic_count_where_the_meta_device_cannot_run_it(monkeypatch, transformers):
    from benchmarks import flops

    def cannot(*_args, **_kwargs):
        raise RuntimeError("Tensor.item() cannot be called on meta tensors")

    monkeypatch.setattr(flops, "counted", cannot)
    counted, _ = _counted("bert", size="large", seq_len=384)
    assert counted.flops == BERT_LARGE_384
    assert counted.reason.startswith("analytic (benchmarks/flops.py bert_flops_per_sample); FLOPs not countable")
    assert "Tensor.item() cannot be called on meta tensors" in counted.reason


class _FakeNvml:
    """pynvml's energy counter, in millijoules, advanced by the test."""

    class NVMLError(Exception):
        pass

    def __init__(self, readings):
        self.readings = iter(readings)
        self.nv, self.handle = self, object()

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802 (pynvml's name)
        return next(self.readings)

    def close(self):
        pass


def _rapl(root: Path, zone: str, uj: int, max_uj: int = 262143328850) -> None:
    (root / zone).mkdir(parents=True, exist_ok=True)
    (root / zone / "energy_uj").write_text(f"{uj}\n")
    (root / zone / "max_energy_range_uj").write_text(f"{max_uj}\n")


def test_energy_window_with_nvml_replaced_and_fake_rapl(tmp_path):
    _rapl(tmp_path, "intel-rapl:0", 1_000_000)
    _rapl(tmp_path, "intel-rapl:1", 262143328000)  # wraps during the window
    _rapl(tmp_path, "intel-rapl:0:0", 5)  # a subzone (core): inside its package, not added again
    meter = telemetry.EnergyMeter(_FakeNvml([10_000, 460_000]), host=True, powercap=tmp_path)
    meter.start()
    _rapl(tmp_path, "intel-rapl:0", 31_000_000)
    _rapl(tmp_path, "intel-rapl:1", 1_000)
    _rapl(tmp_path, "intel-rapl:0:0", 999_999_999)
    window = meter.stop()
    assert window.gpu_j == pytest.approx(450.0)
    assert window.host_j == pytest.approx(30.0 + (262143328850 - 262143328000 + 1 + 1_000) / 1e6)
    assert window.note == ""
    fields = rundir.energy_fields(
        {"gpu_j": 900.0, "host_j": window.host_j, "note": ""}, measured_samples=3000, wall_s=3.0
    )
    assert fields["energy_j_per_sample"] == pytest.approx(0.3)
    assert fields["avg_power_w"] == pytest.approx(300.0)
    assert fields["energy_note"] is None


def test_energy_absent_on_this_machine():
    """No GPU and, on these CPU machines, no powercap: nothing is read and the note says both."""
    if telemetry.rapl_packages_uj() is not None:
        pytest.skip("this host has a readable /sys/class/powercap: the absent path needs one without")
    meter = telemetry.energy_meter(__import__("torch").device("cpu"), host=True)
    meter.start()
    window = meter.stop()
    assert (window.gpu_j, window.host_j) == (None, None)
    assert "GPU: none (no NVML)" in window.note and "no readable RAPL" in window.note
    fields = rundir.energy_fields({"gpu_j": None, "host_j": None, "note": window.note}, measured_samples=10, wall_s=1.0)
    assert fields["energy_j"] is None and fields["energy_j_per_sample"] is None and fields["energy_note"] == window.note
