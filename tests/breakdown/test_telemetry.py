"""Telemetry sampler: psutil fields always, NVML fields through pynvml where it loads (faked here)."""

from __future__ import annotations

import json
import sys
import time
import types

import pytest

from benchmarks import telemetry
from benchmarks.telemetry import GpuIdentity

HOST_FIELDS = {
    "t_s",
    "rank",
    "host",
    "cpu_percent",
    "proc_cpu_percent",
    "rss_bytes",
    "host_mem_used_bytes",
    "host_mem_total_bytes",
}
GPU_FIELDS = {
    "gpu",
    "gpu_util_percent",
    "gpu_mem_util_percent",
    "gpu_mem_used_bytes",
    "gpu_mem_total_bytes",
    "gpu_power_w",
    "gpu_sm_clock_mhz",
    "pcie_tx_bytes_s",
    "pcie_rx_bytes_s",
}


def read_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def fake_pynvml(*, refuse_power: bool = False) -> types.ModuleType:
    """The pynvml calls the sampler makes, answering like one H200 with NVLink counters."""
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    nv.NVMLError = NVMLError
    nv.NVML_CLOCK_SM, nv.NVML_PCIE_UTIL_TX_BYTES, nv.NVML_PCIE_UTIL_RX_BYTES = 1, 0, 1
    nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 138, 139
    nv.calls = {"init": 0, "shutdown": 0, "by_uuid": []}
    counter = {"kib": 0}

    def field(value):
        return types.SimpleNamespace(nvmlReturn=0, value=types.SimpleNamespace(ullVal=value))

    def field_values(handle, ids):
        counter["kib"] += 1000
        return [field(counter["kib"]), field(2 * counter["kib"])]

    def power(handle):
        if refuse_power:
            raise NVMLError("Not Supported")
        return 350_000  # mW

    nv.nvmlInit = lambda: nv.calls.__setitem__("init", nv.calls["init"] + 1)
    nv.nvmlShutdown = lambda: nv.calls.__setitem__("shutdown", nv.calls["shutdown"] + 1)
    nv.nvmlDeviceGetHandleByUUID = lambda uuid: nv.calls["by_uuid"].append(uuid) or "handle"
    nv.nvmlDeviceGetHandleByIndex = lambda index: "handle"
    nv.nvmlDeviceGetIndex = lambda handle: 3
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=97, memory=40)
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=60 * 2**30, total=141 * 2**30)
    nv.nvmlDeviceGetPowerUsage = power
    nv.nvmlDeviceGetClockInfo = lambda h, kind: 1980
    nv.nvmlDeviceGetPcieThroughput = lambda h, kind: 1000 + kind
    nv.nvmlDeviceGetFieldValues = field_values
    return nv


def test_without_nvml_the_psutil_fields_still_come(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    sampler = telemetry.start_sampler(tmp_path, rank=1, hz=50, gpu=GpuIdentity(index=0, uuid="GPU-x"))
    time.sleep(0.15)
    sampler.stop()
    lines = read_lines(tmp_path / "telemetry_rank1.jsonl")
    assert len(lines) >= 3
    assert all(HOST_FIELDS <= set(line) and not GPU_FIELDS & set(line) for line in lines)
    assert all(line["rank"] == 1 and line["rss_bytes"] > 0 for line in lines)
    assert lines == sorted(lines, key=lambda line: line["t_s"])


def test_nvml_library_missing_is_no_error(tmp_path):
    pytest.importorskip(
        "pynvml", reason="needs the nvidia-ml-py package (its library may be absent: that is the point)"
    )
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pytest.skip("NVML loads on this machine: nothing missing to test")
    assert telemetry.open_nvml(GpuIdentity(index=0, uuid=None)) is None


def test_cpu_device_has_no_gpu_identity(tmp_path):
    import torch

    assert telemetry.gpu_identity(torch.device("cpu")) is None
    sampler = telemetry.start_sampler(tmp_path, rank=0, hz=100, gpu=None)
    sampler.stop()
    assert HOST_FIELDS <= set(read_lines(tmp_path / "telemetry_rank0.jsonl")[0])


def test_with_nvml_the_gpu_fields_come(tmp_path, monkeypatch):
    """Our sampler's mapping of NVML answers to fields (units, NVLink rates from counters), with a stand-in
    pynvml: CI has no GPU. Real NVML values were read on the H200 (docs/results/2026-11-29-h200.md)."""
    nv = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    sampler = telemetry.start_sampler(tmp_path, rank=0, hz=50, gpu=GpuIdentity(index=0, uuid="GPU-abc"))
    time.sleep(0.15)
    sampler.stop()
    lines = read_lines(tmp_path / "telemetry_rank0.jsonl")
    assert nv.calls["by_uuid"] == ["GPU-abc"] and nv.calls["init"] == 1 and nv.calls["shutdown"] == 1
    assert all(HOST_FIELDS | GPU_FIELDS <= set(line) for line in lines)
    first = lines[0]
    assert first["gpu"] == 3 and first["gpu_util_percent"] == 97 and first["gpu_power_w"] == 350.0
    assert first["gpu_mem_total_bytes"] == 141 * 2**30 and first["pcie_rx_bytes_s"] == 1001 * 1024
    # NVLink: a rate needs two readings of the cumulative counters
    assert "nvlink_tx_bytes_s" not in first
    later = [line for line in lines if "nvlink_tx_bytes_s" in line]
    assert later and all(line["nvlink_rx_bytes_s"] == pytest.approx(2 * line["nvlink_tx_bytes_s"]) for line in later)


def test_a_metric_the_gpu_refuses_is_dropped_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml(refuse_power=True))
    sampler = telemetry.start_sampler(tmp_path, rank=0, hz=100, gpu=GpuIdentity(index=0, uuid=None))
    time.sleep(0.05)
    sampler.stop()
    lines = read_lines(tmp_path / "telemetry_rank0.jsonl")
    assert all("gpu_power_w" not in line and "gpu_util_percent" in line for line in lines)


def test_never_overwrites(tmp_path):
    (tmp_path / "telemetry_rank0.jsonl").write_text("")
    with pytest.raises(FileExistsError):
        telemetry.start_sampler(tmp_path, rank=0, hz=1, gpu=None)


def test_pynvml_is_imported_only_by_the_telemetry_module():
    from pathlib import Path

    root = Path(telemetry.__file__).resolve().parent.parent
    importers = [p for p in (root / "benchmarks").rglob("*.py") if "import pynvml" in p.read_text()]
    assert importers == [root / "benchmarks" / "telemetry.py"]
