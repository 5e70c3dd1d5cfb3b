"""Peak dense TFLOPS of a GPU for a math mode, from the vendor's datasheet: the denominator of MFU.

Keyed by the device name torch reports (torch.cuda.get_device_name: "NVIDIA H200", "NVIDIA A100-SXM4-80GB",
"Tesla V100-SXM2-32GB", "Tesla K80"); the first row whose pattern matches wins, so a board's variant
(H100 PCIe) comes before its family. Figures are dense (NVIDIA quotes tensor-core figures "with
sparsity" too: those are halved here) and per GPU as torch sees it (a K80 board is two GPUs).
A GPU or a math mode without a row gets no peak and says why (`Peak.reason`): MFU is left out rather
than computed from a guessed peak. Torch-free: analysis reads it too.

Math modes (`math_of`): "fp32", "tf32" (fp32 where cuDNN or cuBLAS may use TF32 tensor cores: PyTorch
lets cuDNN's convolutions use it by default), "bf16", "fp16" (autocast: the matmuls and convolutions run
in it).
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


H100_URL = "https://www.nvidia.com/en-us/data-center/h100/"
A100_URL = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
V100_URL = "https://images.nvidia.com/content/technologies/volta/pdf/volta-v100-datasheet-update-us-1165301-r5.pdf"

TABLE: tuple[GpuPeaks, ...] = (
    # H200 SXM: the H100 SXM's compute (989 TF32 / 1,979 BF16 with sparsity), more and faster memory
    GpuPeaks(
        r"\bH200\b",
        "H200 SXM",
        {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5},
        "https://www.nvidia.com/en-us/data-center/h200/",
    ),
    GpuPeaks(r"\bH100\b.*PCIe", "H100 PCIe", {"fp32": 51.0, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}, H100_URL),
    GpuPeaks(r"\bH100\b", "H100 SXM", {"fp32": 67.0, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5}, H100_URL),
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
    """The math mode a run's matmuls and convolutions use: autocast's dtype, else tf32 where allowed, else fp32."""
    if amp_dtype in ("bfloat16", "bf16"):
        return "bf16"
    if amp_dtype in ("float16", "fp16"):
        return "fp16"
    return "tf32" if tf32 else "fp32"


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
