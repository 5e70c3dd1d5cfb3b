"""Peak dense TFLOPS of a GPU for a math mode, from the vendor's datasheet: the denominator of MFU.

Keyed by the device name torch reports (torch.cuda.get_device_name: "NVIDIA H200", "NVIDIA H100 80GB HBM3",
"NVIDIA H100 NVL", "NVIDIA A100-SXM4-80GB", "Tesla V100-SXM2-32GB", "Tesla K80"); the first row whose pattern
matches wins, so a board's variant (H100 NVL, H100 PCIe) comes before its family. Figures are dense (NVIDIA
quotes tensor-core figures "with sparsity": those are halved here) and per GPU as torch sees it (a K80 board is
two GPUs); tests/unit/test_mfu_energy.py holds each row to its datasheet's figures, once. A GPU or a math
mode without a row gets no peak and says why (`Peak.reason`): MFU is left out rather than computed from a
guessed peak. Torch-free: analysis reads it too (`torch_tf32` reads torch's switches when it is called).

Math modes: "fp32", "tf32" (fp32 on TF32 tensor cores), "bf16", "fp16" (autocast: the matmuls and
convolutions run in it). Without autocast the two kinds of kernel that hold the FLOPs run apart (`run_peak`):
convolutions in cuDNN, which PyTorch lets use TF32 by default (torch.backends.cudnn.allow_tf32), and matmuls
(attention's too) in cuBLAS, in fp32 unless allowed (torch.backends.cuda.matmul.allow_tf32,
torch.set_float32_matmul_precision("high")). The run's peak is then the one the model's own FLOPs meet: each
kind at its own peak, weighted by its share of the FLOPs (flops.SampleFlops.conv_share), so an fp32 ResNet is
held to nearly the TF32 peak and an fp32 BERT to the fp32 one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MATHS = ("fp32", "tf32", "bf16", "fp16")
CPU_REASON = "CPU: no peak table"


@dataclass(frozen=True, slots=True)
class GpuPeaks:
    pattern: str  # a regular expression searched in torch's device name (case-insensitive)
    name: str  # the board, as the datasheet names it
    tflops: dict[str, float]  # math mode -> dense TFLOPS; a mode the GPU lacks has no entry
    source: str  # the datasheet


H100_URL = "https://www.nvidia.com/en-us/data-center/h100/"  # H100 SXM and H100 NVL columns
# the H100 datasheet of 2022-2023, with its SXM and PCIe columns (the H100 page above now lists NVL for PCIe)
H100_PCIE_URL = "https://resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet"
H200_URL = "https://www.nvidia.com/en-us/data-center/h200/"  # H200 SXM and H200 NVL columns
A100_URL = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
V100_URL = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"

# the datasheets' with-sparsity tensor figures (TF32 989, BF16 / FP16 1,979 on the H100 SXM) halved
_HOPPER_SXM = {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}
_HOPPER_NVL = {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}  # TF32 835, BF16 / FP16 1,671

TABLE: tuple[GpuPeaks, ...] = (
    # the NVL boards (PCIe cards with an NVLink bridge, 350-600 W) are slower than the SXM modules: rows of
    # their own, before their family's
    GpuPeaks(r"\bH200\b.*\bNVL\b", "H200 NVL", _HOPPER_NVL, H200_URL),
    # H200 SXM: the H100 SXM's compute, more and faster memory
    GpuPeaks(r"\bH200\b", "H200 SXM", _HOPPER_SXM, H200_URL),
    GpuPeaks(r"\bH100\b.*\bNVL\b", "H100 NVL", _HOPPER_NVL, H100_URL),
    # TF32 756, BF16 / FP16 1,513 with sparsity
    GpuPeaks(
        r"\bH100\b.*PCIe", "H100 PCIe", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.5, "fp16": 756.5}, H100_PCIE_URL
    ),
    GpuPeaks(r"\bH100\b", "H100 SXM", _HOPPER_SXM, H100_URL),
    # every A100 (SXM4 and PCIe, 40 and 80 GB) has the same compute
    GpuPeaks(r"\bA100\b", "A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}, A100_URL),
    # Volta: no TF32, no bfloat16 tensor cores (bf16 autocast runs, emulated: no peak to hold it to)
    GpuPeaks(r"\bV100\b.*PCIE", "V100 PCIe", {"fp32": 14.0, "fp16": 112.0}, V100_URL),
    GpuPeaks(r"\bV100\b", "V100 SXM2", {"fp32": 15.7, "fp16": 125.0}, V100_URL),
    # 8.73 TFLOPS fp32 per board at boost clocks, two GPUs per board; no fp16 arithmetic of its own
    GpuPeaks(
        r"\bK80\b",
        "Tesla K80 (one of its two GPUs)",
        {"fp32": 4.365},
        "https://www.nvidia.com/en-gb/data-center/tesla-k80/",
    ),
)


@dataclass(frozen=True, slots=True)
class Peak:
    tflops: float | None  # None: no peak known, `reason` says why
    reason: str  # the row used (board, math, source) or why there is none


def math_of(amp_dtype: str | None, *, tf32: bool) -> str:
    """The math mode of one kind of kernel: autocast's dtype, else tf32 where that kind may use it, else fp32."""
    if amp_dtype in ("bfloat16", "bf16"):
        return "bf16"
    if amp_dtype in ("float16", "fp16"):
        return "fp16"
    return "tf32" if tf32 else "fp32"


@dataclass(frozen=True, slots=True)
class Tf32:
    """Where fp32 may run on TF32 tensor cores: torch's two switches."""

    convolutions: bool  # torch.backends.cudnn.allow_tf32 (True by default)
    matmuls: bool  # torch.backends.cuda.matmul.allow_tf32 (False by default; set_float32_matmul_precision("high"))


def torch_tf32() -> Tf32:
    """torch's switches as this process has them now."""
    import torch

    return Tf32(convolutions=bool(torch.backends.cudnn.allow_tf32), matmuls=bool(torch.backends.cuda.matmul.allow_tf32))


def run_peak(device_name: str | None, *, amp_dtype: str | None, tf32: Tf32, conv_share: float | None) -> Peak:
    """The peak a run's kernels can meet: autocast's math for all of them; without autocast, the convolutions'
    math (cuDNN) and the matmuls' (cuBLAS) apart, each at its own peak for its share of the model's FLOPs
    (conv_share: the convolutions' fraction; the time at peak is the sum of each kind's FLOPs over its peak).
    A share unknown (FLOPs not counted) takes the higher peak: no MFU is overstated."""
    conv = peak(device_name, math_of(amp_dtype, tf32=tf32.convolutions))
    matmul = peak(device_name, math_of(amp_dtype, tf32=tf32.matmuls))
    if conv.tflops is None or matmul.tflops is None:  # a CPU, a GPU or a math without a row: the one that says why
        return conv if conv.tflops is None else matmul
    if conv.tflops == matmul.tflops:  # autocast, both kinds allowed TF32 or neither, a GPU without TF32
        return matmul
    if conv_share is None:
        higher = max(conv, matmul, key=lambda p: p.tflops)
        return Peak(higher.tflops, f"{higher.reason}; the higher of convolutions' and matmuls' (FLOPs not split)")
    assert 0.0 <= conv_share <= 1.0, conv_share
    tflops = 1.0 / (conv_share / conv.tflops + (1.0 - conv_share) / matmul.tflops)
    conv_math = "tf32 (cuDNN's default)" if tf32.convolutions else "fp32"
    matmul_math = "tf32 (allowed)" if tf32.matmuls else "fp32 (cuBLAS: torch.backends.cuda.matmul.allow_tf32 off)"
    return Peak(
        tflops,
        f"{tflops:.1f} TFLOPS dense: {conv_share:.1%} of the FLOPs in convolutions at {conv_math} "
        f"{conv.tflops:g}, {1 - conv_share:.1%} in matmuls at {matmul_math} {matmul.tflops:g} ({conv.reason})",
    )


def peak(device_name: str | None, math: str) -> Peak:
    """The dense peak of `device_name` (torch's name; None or "cpu": a CPU) for `math` (MATHS)."""
    assert math in MATHS, math
    if not device_name or device_name.lower() == "cpu":
        return Peak(None, CPU_REASON)
    for row in TABLE:
        if re.search(row.pattern, device_name, re.IGNORECASE):
            if math == "tf32" and "tf32" not in row.tflops:
                math = "fp32"  # a GPU without TF32 runs fp32 as fp32
            if math not in row.tflops:
                return Peak(None, f"{device_name}: no {math} peak in benchmarks/peaks.py ({row.name} lacks it)")
            return Peak(row.tflops[math], f"{row.name} {math} {row.tflops[math]:g} TFLOPS dense ({row.source})")
    return Peak(None, f"{device_name}: not in the peak table (benchmarks/peaks.py); add its datasheet row")


def mfu(*, flops_per_sample: float | None, per_gpu_samples_s: float | None, peak_tflops: float | None) -> tuple:
    """(achieved TFLOPS per GPU, MFU): model FLOPs per sample x samples per second per GPU, and that over the
    peak; None where a factor is missing."""
    if flops_per_sample is None or per_gpu_samples_s is None:
        return None, None
    achieved = flops_per_sample * per_gpu_samples_s / 1e12
    return achieved, (achieved / peak_tflops if peak_tflops else None)
