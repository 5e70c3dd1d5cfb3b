"""Telemetry sampler thread: NVML (the rank's own GPU) and psutil (this process and its host) at
run.telemetry_hz into <run dir>/telemetry_rank<R>.jsonl, one JSON object per sample.

Each rank samples the GPU it drives (found by UUID, so CUDA_VISIBLE_DEVICES cannot mix them up)
and its own process; host-wide fields (CPU %, host memory, disk reads) repeat on every rank of a
host, and analysis keeps one per `host`. One file per rank: no two processes append to one file
(unsafe on NFS/Lustre), and runs over many nodes are covered without a per-node leader.

The thread is off the hot path: the NVML and psutil calls are ctypes/syscalls that release the GIL
(NVML's PCIe counter waits ~20 ms), lines are written with one flush per sample. Without NVML
(no library, no GPU, no pynvml package) the GPU fields are left out and the psutil fields still
come. pynvml (package nvidia-ml-py) is imported here only.

Fields (units in the names): t_s (Unix time), rank, host, cpu_percent (host), proc_cpu_percent,
rss_bytes, host_mem_used_bytes, host_mem_total_bytes, disk_read_bytes (host, since the sampler
started), disk_read_bytes_s; with NVML: gpu (NVML index), gpu_util_percent, gpu_mem_util_percent,
gpu_mem_used_bytes, gpu_mem_total_bytes, gpu_power_w, gpu_sm_clock_mhz, pcie_tx_bytes_s,
pcie_rx_bytes_s, and nvlink_tx_bytes_s / nvlink_rx_bytes_s where the GPU exposes NVLink counters.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    index: int  # CUDA index in this process (after CUDA_VISIBLE_DEVICES)
    uuid: str | None  # NVML's "GPU-..." form


def gpu_identity(device) -> GpuIdentity | None:
    """The NVML identity of a torch device (None for CPU)."""
    if getattr(device, "type", "cpu") != "cuda":
        return None
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    uuid = getattr(torch.cuda.get_device_properties(index), "uuid", None)
    text = str(uuid) if uuid is not None else None
    return GpuIdentity(index=index, uuid=(text if text is None or text.startswith("GPU-") else f"GPU-{text}"))


class _Nvml:
    """One GPU through NVML; every metric the GPU refuses is dropped after its first refusal."""

    def __init__(self, gpu: GpuIdentity) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        try:
            self.handle = pynvml.nvmlDeviceGetHandleByUUID(gpu.uuid) if gpu.uuid else None
        except pynvml.NVMLError:
            self.handle = None
        if self.handle is None:  # no UUID match: the CUDA index, right when CUDA_VISIBLE_DEVICES is unset
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(gpu.index)
        self.index = pynvml.nvmlDeviceGetIndex(self.handle)
        self._nvlink_last: tuple[float, int, int] | None = None
        self._broken: set[str] = set()
        nv = pynvml
        self._metrics: dict[str, Callable[[], dict[str, Any]]] = {
            "util": lambda: (lambda u: {"gpu_util_percent": u.gpu, "gpu_mem_util_percent": u.memory})(
                nv.nvmlDeviceGetUtilizationRates(self.handle)
            ),
            "memory": lambda: (lambda m: {"gpu_mem_used_bytes": m.used, "gpu_mem_total_bytes": m.total})(
                nv.nvmlDeviceGetMemoryInfo(self.handle)
            ),
            "power": lambda: {"gpu_power_w": nv.nvmlDeviceGetPowerUsage(self.handle) / 1e3},
            "clock": lambda: {"gpu_sm_clock_mhz": nv.nvmlDeviceGetClockInfo(self.handle, nv.NVML_CLOCK_SM)},
            # KB/s over NVML's ~20 ms window
            "pcie": lambda: {
                "pcie_tx_bytes_s": nv.nvmlDeviceGetPcieThroughput(self.handle, nv.NVML_PCIE_UTIL_TX_BYTES) * 1024,
                "pcie_rx_bytes_s": nv.nvmlDeviceGetPcieThroughput(self.handle, nv.NVML_PCIE_UTIL_RX_BYTES) * 1024,
            },
            "nvlink": self._nvlink,
        }

    def _nvlink(self) -> dict[str, Any]:
        # cumulative KiB over all links (scopeId UINT_MAX); a rate needs two samples
        fields = [self.nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, self.nv.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX]
        values = self.nv.nvmlDeviceGetFieldValues(self.handle, fields)
        if any(v.nvmlReturn != 0 for v in values):
            raise self.nv.NVMLError(values[0].nvmlReturn or values[1].nvmlReturn)
        now = time.monotonic()
        tx, rx = (int(v.value.ullVal) * 1024 for v in values)
        last, self._nvlink_last = self._nvlink_last, (now, tx, rx)
        if last is None or now <= last[0]:
            return {}
        return {
            "nvlink_tx_bytes_s": (tx - last[1]) / (now - last[0]),
            "nvlink_rx_bytes_s": (rx - last[2]) / (now - last[0]),
        }

    def sample(self) -> dict[str, Any]:
        record: dict[str, Any] = {"gpu": self.index}
        for name, read in self._metrics.items():
            if name in self._broken:
                continue
            try:
                record.update(read())
            except (self.nv.NVMLError, AttributeError):  # not supported here / older binding
                self._broken.add(name)
        return record

    def close(self) -> None:
        try:
            self.nv.nvmlShutdown()
        except self.nv.NVMLError:
            pass


def open_nvml(gpu: GpuIdentity | None) -> _Nvml | None:
    """NVML for this GPU, or None where there is no GPU, no pynvml package or no NVML library."""
    if gpu is None:
        return None
    try:
        return _Nvml(gpu)
    except ImportError:
        return None
    except Exception as error:  # pynvml.NVMLError_* (library not found, driver not loaded) and friends
        if type(error).__module__ == "pynvml" or type(error).__name__.startswith("NVMLError"):
            return None
        raise


class HostSampler:
    """psutil fields of this process and its host."""

    def __init__(self) -> None:
        self.process = psutil.Process(os.getpid())
        self.process.cpu_percent(None)  # the first call only sets the reference point
        psutil.cpu_percent(None)
        self._disk0 = self._disk_read()
        self._last = (time.monotonic(), self._disk0)

    @staticmethod
    def _disk_read() -> int | None:
        counters = psutil.disk_io_counters()  # None in some containers
        return None if counters is None else counters.read_bytes

    def sample(self) -> dict[str, Any]:
        memory = psutil.virtual_memory()
        record: dict[str, Any] = {
            "cpu_percent": psutil.cpu_percent(None),
            "proc_cpu_percent": self.process.cpu_percent(None),
            "rss_bytes": self.process.memory_info().rss,
            "host_mem_used_bytes": memory.total - memory.available,
            "host_mem_total_bytes": memory.total,
        }
        disk = self._disk_read()
        if disk is not None and self._disk0 is not None:
            now = time.monotonic()
            record["disk_read_bytes"] = disk - self._disk0
            record["disk_read_bytes_s"] = (disk - self._last[1]) / max(1e-9, now - self._last[0])
            self._last = (now, disk)
        return record


class Sampler:
    """A daemon thread writing one line per period until stop(); stop() writes a last sample."""

    def __init__(self, path: Path, *, rank: int, hz: float, nvml: _Nvml | None) -> None:
        self.path, self.rank, self.period_s = path, rank, 1.0 / hz
        self.nvml = nvml
        self.host_sampler = HostSampler()
        self.host = socket.gethostname()
        self._file = open(path, "x")  # never overwrite
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ddlbench-telemetry", daemon=True)
        self.error: BaseException | None = None

    def sample(self) -> dict[str, Any]:
        record: dict[str, Any] = {"t_s": time.time(), "rank": self.rank, "host": self.host}
        record.update(self.host_sampler.sample())
        if self.nvml is not None:
            record.update(self.nvml.sample())
        return record

    def _write(self) -> None:
        self._file.write(json.dumps(self.sample(), separators=(",", ":")) + "\n")
        self._file.flush()

    def _run(self) -> None:
        try:
            next_t = time.monotonic()
            while not self._stop.is_set():
                self._write()
                next_t += self.period_s
                self._stop.wait(max(0.0, next_t - time.monotonic()))
        except BaseException as error:  # reported by stop(): a broken sampler must not pass unseen
            self.error = error

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        try:
            if self.error is None:
                self._write()
        finally:
            self._file.close()
            if self.nvml is not None:
                self.nvml.close()
        if self.error is not None:
            raise RuntimeError(f"telemetry sampler failed: {type(self.error).__name__}: {self.error}") from self.error


def telemetry_path(run_dir: Path, rank: int) -> Path:
    return Path(run_dir) / f"telemetry_rank{rank}.jsonl"


def start_sampler(run_dir: Path, *, rank: int, hz: float, gpu: GpuIdentity | None) -> Sampler:
    """Start sampling this rank (and its GPU where NVML is there) at `hz` samples per second."""
    return Sampler(telemetry_path(run_dir, rank), rank=rank, hz=hz, nvml=open_nvml(gpu)).start()


# --- energy over the measured window -------------------------------------------------------------------

POWERCAP = Path("/sys/class/powercap")


def rapl_packages_uj(root: Path = POWERCAP) -> dict[str, tuple[int, int]] | None:
    """Each RAPL package zone's (energy_uj, max_energy_range_uj) (intel-rapl:N, not its core/dram subzones,
    which the package includes); None where the host has no readable powercap (no zone, or root-only)."""
    zones = {}
    for zone in sorted(root.glob("intel-rapl:*")):
        if zone.name.count(":") != 1:
            continue
        try:
            zones[zone.name] = (int((zone / "energy_uj").read_text()), int((zone / "max_energy_range_uj").read_text()))
        except (OSError, ValueError):
            return None
    return zones or None


@dataclass(frozen=True, slots=True)
class WindowEnergy:
    gpu_j: float | None  # this rank's GPU over the window (NVML's total-energy counter); None: not read
    host_j: float | None  # the host's RAPL packages (read by one rank per host); None: not read
    note: str  # why a figure is missing ("" when both are there)
    start_t_s: float | None = None  # the window's ends, Unix time (where telemetry samples are cut)
    end_t_s: float | None = None


class EnergyMeter:
    """NVML's total-energy counter of the rank's GPU (millijoules since the driver loaded) and the host's RAPL
    packages, read at the measured window's start() and stop(): the energy of the window, as MLPerf's power
    rules measure it. `host`: whether this rank reads RAPL (one rank per host: the counter is the host's)."""

    def __init__(self, nvml: _Nvml | None, *, host: bool, powercap: Path = POWERCAP) -> None:
        self.nvml, self.host, self.powercap = nvml, host, powercap
        self._gpu0: int | None = None
        self._rapl0: dict[str, tuple[int, int]] | None = None
        self._t0: float | None = None
        self.result = WindowEnergy(None, None, "the measured window did not end")

    def _gpu_mj(self) -> int | None:
        if self.nvml is None:
            return None
        try:
            return int(self.nvml.nv.nvmlDeviceGetTotalEnergyConsumption(self.nvml.handle))
        except self.nvml.nv.NVMLError:  # before Volta: no energy counter
            return None

    def start(self) -> None:
        self._t0 = time.time()
        self._gpu0 = self._gpu_mj()
        self._rapl0 = rapl_packages_uj(self.powercap) if self.host else None

    def stop(self) -> WindowEnergy:
        gpu1 = self._gpu_mj()
        gpu_j = (gpu1 - self._gpu0) / 1e3 if gpu1 is not None and self._gpu0 is not None else None
        host_j = None
        rapl1 = rapl_packages_uj(self.powercap) if self.host and self._rapl0 is not None else None
        if rapl1 is not None and self._rapl0 is not None and rapl1.keys() == self._rapl0.keys():
            # a counter wraps at its max_energy_range_uj
            host_j = sum((rapl1[z][0] - self._rapl0[z][0]) % (self._rapl0[z][1] + 1) for z in rapl1) / 1e6
        notes = []
        if gpu_j is None:
            notes.append("GPU: no NVML energy counter" if self.nvml is not None else "GPU: none (no NVML)")
        if self.host and host_j is None:
            notes.append(f"host: no readable RAPL ({self.powercap}/intel-rapl:*/energy_uj)")
        self.result = WindowEnergy(gpu_j, host_j, "; ".join(notes), self._t0, time.time())
        return self.result

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.close()


def energy_meter(device, *, host: bool) -> EnergyMeter:
    """An EnergyMeter for the rank's device (NVML where there is one) and, where `host`, its host's RAPL."""
    return EnergyMeter(open_nvml(gpu_identity(device)), host=host)


class HostGpus:
    """Every GPU of the host through NVML, for launchers/lifecycle/interference.py: per GPU on which one of the
    run's processes computes, the other compute processes on it, its clock-event reasons (a bitmask), its
    uncorrected ECC errors (volatile) and the XID events since the last look. What a GPU refuses is left out."""

    def __init__(self) -> None:
        import pynvml

        self.nv = pynvml
        pynvml.nvmlInit()
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(k) for k in range(pynvml.nvmlDeviceGetCount())]
        self.events = None
        with _refused(pynvml):
            self.events = pynvml.nvmlEventSetCreate()
            for handle in self.handles:
                with _refused(pynvml):
                    pynvml.nvmlDeviceRegisterEvents(handle, pynvml.nvmlEventTypeXidCriticalError, self.events)

    def _xids(self) -> dict[int, list[int]]:
        found: dict[int, list[int]] = {}
        while self.events is not None:
            try:
                event = self.nv.nvmlEventSetWait(self.events, 0)
            except self.nv.NVMLError:  # a timeout: no event waiting (or none supported)
                break
            index = self.handles.index(event.device) if event.device in self.handles else -1
            found.setdefault(index, []).append(int(event.eventData))
        return found

    def snapshot(self, own_pids: set[int]) -> list[dict[str, Any]]:
        nv, gpus, xids = self.nv, [], self._xids()
        for index, handle in enumerate(self.handles):
            try:
                pids = {p.pid for p in nv.nvmlDeviceGetComputeRunningProcesses(handle)}
            except nv.NVMLError:
                continue
            if not pids & own_pids:
                continue  # not one of the run's GPUs
            gpu: dict[str, Any] = {"index": index, "foreign_pids": sorted(pids - own_pids), "xids": xids.get(index, [])}
            gpu["reasons"] = gpu["ecc_uncorrected"] = None
            with _refused(nv):
                reasons = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)  # older: ...ThrottleReasons
                gpu["reasons"] = int((reasons or nv.nvmlDeviceGetCurrentClocksThrottleReasons)(handle))
            with _refused(nv):
                gpu["ecc_uncorrected"] = int(
                    nv.nvmlDeviceGetTotalEccErrors(handle, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nv.NVML_VOLATILE_ECC)
                )
            gpus.append(gpu)
        return gpus

    def close(self) -> None:
        with _refused(self.nv):
            if self.events is not None:
                self.nv.nvmlEventSetFree(self.events)
            self.nv.nvmlShutdown()


class _refused:
    """Leaves out what NVML refuses (an NVMLError: not supported, no permission) or an older binding lacks."""

    def __init__(self, nv) -> None:
        self.nv = nv

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, error, trace) -> bool:
        return kind is not None and issubclass(kind, (self.nv.NVMLError, AttributeError))


def host_gpus() -> HostGpus | None:
    """NVML over the host's GPUs, or None where there is no pynvml package or NVML library."""
    try:
        return HostGpus()
    except ImportError:
        return None
    except Exception as error:  # pynvml.NVMLError_* (library not found, driver not loaded)
        if type(error).__module__ == "pynvml" or type(error).__name__.startswith("NVMLError"):
            return None
        raise
