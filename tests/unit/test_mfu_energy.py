"""MFU's parts (benchmarks/peaks.py, benchmarks/flops.py) and the measured window's energy (telemetry.EnergyMeter,
summary_schema.energy_fields): the peak table's lookups and refusals, the FLOP counts against published figures, the
energy arithmetic with NVML replaced, RAPL from a fake sysfs tree and absent for real on this machine."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from benchmarks import peaks, telemetry
from benchmarks.rundir import summary_schema


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


def test_bert_large_flops_per_token_six_times_parameters():
    counted, model = _counted("bert", size="large", seq_len=384)
    parameters = sum(p.numel() for p in model.parameters())
    assert counted.flops / 384 == pytest.approx(6 * parameters, rel=0.10)


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
    fields = summary_schema.energy_fields(
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
    fields = summary_schema.energy_fields(
        {"gpu_j": None, "host_j": None, "note": window.note}, measured_samples=10, wall_s=1.0
    )
    assert fields["energy_j"] is None and fields["energy_j_per_sample"] is None and fields["energy_note"] == window.note
