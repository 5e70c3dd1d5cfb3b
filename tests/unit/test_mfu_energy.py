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
        ("NVIDIA H200 NVL", "bf16", 835.5),
        ("NVIDIA H100 80GB HBM3", "tf32", 494.5),
        ("NVIDIA H100 NVL", "bf16", 835.5),
        ("NVIDIA H100 PCIe", "fp16", 756.5),
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


# Each row against its datasheet, checked once (2026-12-06) and written down here with the source: the figures as
# the datasheet prints them, FP32 dense, the tensor-core ones "with sparsity" (the row holds half) where marked *
DATASHEETS = {
    "H200 SXM": (peaks.H200_URL, {"fp32": 67, "tf32": "989*", "bf16": "1979*", "fp16": "1979*"}),
    "H200 NVL": (peaks.H200_URL, {"fp32": 60, "tf32": "835*", "bf16": "1671*", "fp16": "1671*"}),
    "H100 SXM": (peaks.H100_URL, {"fp32": 67, "tf32": "989*", "bf16": "1979*", "fp16": "1979*"}),
    "H100 NVL": (peaks.H100_URL, {"fp32": 60, "tf32": "835*", "bf16": "1671*", "fp16": "1671*"}),
    "H100 PCIe": (peaks.H100_PCIE_URL, {"fp32": 51, "tf32": "756*", "bf16": "1513*", "fp16": "1513*"}),
    # the A100 datasheet prints dense and sparse (156 | 312*): the dense one
    "A100": (peaks.A100_URL, {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312}),
    "V100 PCIe": (peaks.V100_URL, {"fp32": 14, "fp16": 112}),
    "V100 SXM2": (peaks.V100_URL, {"fp32": 15.7, "fp16": 125}),
    "Tesla K80 (one of its two GPUs)": ("https://www.nvidia.com/en-gb/data-center/tesla-k80/", {"fp32": "8.73/2"}),
}


def _dense(printed) -> float:
    text = str(printed)
    if text.endswith("*"):
        return float(text[:-1]) / 2
    if "/" in text:
        board, gpus = text.split("/")
        return float(board) / int(gpus)
    return float(text)


@pytest.mark.parametrize("row", peaks.TABLE, ids=lambda row: row.name)
def test_each_row_is_its_datasheet(row):
    source, printed = DATASHEETS[row.name]
    assert row.source == source
    assert row.tflops == {math: _dense(value) for math, value in printed.items()}


@pytest.mark.parametrize(
    ("name", "board"),
    [
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 SXM5 94GB", "H100 SXM"),
        ("NVIDIA H200", "H200 SXM"),
    ],
)
def test_nvl_and_pcie_boards_are_not_the_sxm_row(name, board):
    assert peaks.peak(name, "bf16").reason.startswith(f"{board} bf16")


TF32_DEFAULT = peaks.Tf32(convolutions=True, matmuls=False)  # PyTorch's defaults


def test_fp32_peak_takes_convolutions_and_matmuls_apart():
    # a model all in matmuls (BERT) without autocast: cuBLAS runs fp32, its peak the fp32 one (67, not 494.5)
    bert = peaks.run_peak("NVIDIA H100 80GB HBM3", amp_dtype=None, tf32=TF32_DEFAULT, conv_share=0.0)
    assert bert.tflops == pytest.approx(67.0)
    assert "0.0% of the FLOPs in convolutions" in bert.reason and "allow_tf32 off" in bert.reason
    # all in convolutions: cuDNN's TF32
    conv = peaks.run_peak("NVIDIA H100 80GB HBM3", amp_dtype=None, tf32=TF32_DEFAULT, conv_share=1.0)
    assert conv.tflops == pytest.approx(494.5)
    # ResNet-50's mix: each kind at its own peak, the time adds up
    mixed = peaks.run_peak("NVIDIA H100 80GB HBM3", amp_dtype=None, tf32=TF32_DEFAULT, conv_share=0.99)
    assert 1 / mixed.tflops == pytest.approx(0.99 / 494.5 + 0.01 / 67.0)
    assert "99.0% of the FLOPs in convolutions at tf32 (cuDNN's default) 494.5" in mixed.reason
    # matmuls allowed TF32 too, or autocast: one math, the plain row
    both = peaks.run_peak("NVIDIA H100 80GB HBM3", amp_dtype=None, tf32=peaks.Tf32(True, True), conv_share=0.0)
    assert both == peaks.peak("NVIDIA H100 80GB HBM3", "tf32")
    assert peaks.run_peak("NVIDIA H200", amp_dtype="bfloat16", tf32=TF32_DEFAULT, conv_share=0.5) == peaks.peak(
        "NVIDIA H200", "bf16"
    )
    # no split known: the higher peak (MFU never overstated); a GPU without TF32; a CPU
    unknown = peaks.run_peak("NVIDIA H100 80GB HBM3", amp_dtype=None, tf32=TF32_DEFAULT, conv_share=None)
    assert unknown.tflops == 494.5 and "not split" in unknown.reason
    assert peaks.run_peak("Tesla V100-SXM2-32GB", amp_dtype=None, tf32=TF32_DEFAULT, conv_share=0.3).tflops == 15.7
    assert peaks.run_peak(None, amp_dtype=None, tf32=TF32_DEFAULT, conv_share=0.3) == peaks.Peak(None, peaks.CPU_REASON)


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
    + backward (twice the forward): about 3x. All but the classifier's matmul (2 x 2048 x 1000 x 3 of
    24.5 G) are convolutions."""
    counted, _ = _counted("resnet", depth=50, num_classes=1000, image_size=224)
    assert counted.flops / 3 == pytest.approx(2 * 4.09e9, rel=0.02)
    assert 1 - counted.conv_share == pytest.approx(3 * 2 * 2048 * 1000 / counted.flops, rel=1e-6)


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
    assert counted.conv_share == 0.0  # no convolution: an fp32 run's peak is cuBLAS's
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
