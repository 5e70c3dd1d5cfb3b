"""Interference judged (launchers/lifecycle/interference.py) over written samples, and NVML's half through a FAKE
pynvml module (no GPU here: the foreign compute process and the throttle reason are the fake's, not a device's);
the marks it writes read back by analysis/caveats.py and compare. Real runs: tests/multiproc/test_interference_real.py."""

from __future__ import annotations

import sys
import types

import pandas as pd

from analysis.caveats import GPU_SHARED, SHARED_HOST, THROTTLED, cell_marks, interfered_changes, notes, short
from benchmarks import telemetry
from launchers.lifecycle import interference


def _samples(*, own_cpus: float, busy_cpus: float, seconds: int = 10, **extra) -> list[dict]:
    """A window of samples, one a second, where the run's processes and the host use these CPUs on average."""
    return [
        {"t_s": 100.0 + t, "host_busy_cpu_s": busy_cpus * t, "own_cpu_s": {7: own_cpus * t}, "runnable": 2, **extra}
        for t in range(seconds + 1)
    ]


def test_a_run_alone_is_unmarked_and_a_cpu_hog_beside_it_marks_a_shared_host():
    alone = interference.judge(_samples(own_cpus=1.0, busy_cpus=1.1), cpus=2, host="n1")
    assert alone["verdicts"] == {} and alone["foreign_cpus"] == 0.1
    hog = interference.judge(_samples(own_cpus=1.0, busy_cpus=2.0), cpus=2, host="n1")
    assert "other processes used 1.0 of 2 CPUs" in hog["verdicts"][SHARED_HOST]["detail"]
    # other work that fit in CPUs the run left idle did not compete with it
    roomy = interference.judge(_samples(own_cpus=2.0, busy_cpus=10.0), cpus=64, host="n1")
    assert roomy["verdicts"] == {} and roomy["foreign_cpus"] == 8.0


def test_another_ddlbench_run_or_slurm_job_on_the_node_marks_a_shared_host():
    other = {"others": [{"pid": 42, "command": "python -m benchmarks model=x"}]}
    record = interference.judge(_samples(own_cpus=1.0, busy_cpus=1.0, **other), cpus=8, host="n1")
    assert "another ddlbench run (1 processes: pid 42)" in record["verdicts"][SHARED_HOST]["detail"]
    jobs = {"slurm_jobs": [{"job": "17", "user": "bob", "start": "2026-12-06T07:00:00"}]}
    record = interference.judge(_samples(own_cpus=1.0, busy_cpus=1.0, **jobs), cpus=8, host="n1")
    assert record["verdicts"][SHARED_HOST]["slurm_jobs"][0]["job"] == "17"


def test_the_window_is_cut_from_the_samples_that_bracket_it():
    samples = [{"t_s": t} for t in (1.0, 2.0, 3.0, 4.0, 5.0)]
    assert [s["t_s"] for s in interference.window_samples(samples, 2.5, 3.5)] == [2.0, 3.0, 4.0]
    assert interference.judge(samples[:1], cpus=2, host="n")["verdicts"] == {}


class _FakeNvml(types.ModuleType):
    """A FAKE pynvml: two GPUs; the run (pid 7) computes on GPU 0 beside a foreign pid 99, which holds a power
    cap (0x4) in every sample and one XID 79; GPU 1 is another job's (pid 55) and never judged."""

    NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, nvmlEventTypeXidCriticalError = 1, 0, 8

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        super().__init__("pynvml")
        self.xids = [types.SimpleNamespace(device="h0", eventData=79)]

    def nvmlInit(self): ...
    def nvmlShutdown(self): ...
    def nvmlDeviceGetCount(self):
        return 2  # noqa: E704

    def nvmlDeviceGetHandleByIndex(self, k):
        return f"h{k}"  # noqa: E704

    def nvmlEventSetCreate(self):
        return "events"  # noqa: E704

    def nvmlDeviceRegisterEvents(self, handle, kind, events): ...
    def nvmlEventSetFree(self, events): ...

    def nvmlEventSetWait(self, events, timeout_ms):
        if not self.xids:
            raise self.NVMLError("timeout")
        return self.xids.pop()

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        pids = [7, 99] if handle == "h0" else [55]
        return [types.SimpleNamespace(pid=p) for p in pids]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return 0x4 | 0x1

    def nvmlDeviceGetTotalEccErrors(self, handle, kind, counter):
        raise self.NVMLError("not supported")  # a GPU without ECC: left out


def test_nvml_foreign_process_and_power_cap_mark_gpu_shared_and_throttled_with_a_fake_nvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _FakeNvml())
    gpus = telemetry.host_gpus()
    snapshots = [gpus.snapshot({7}) for _ in range(3)]
    gpus.close()
    assert [g["index"] for g in snapshots[0]] == [0]  # GPU 1 has none of the run's processes
    assert snapshots[0][0] | {"xids": []} == {
        "index": 0, "foreign_pids": [99], "xids": [], "reasons": 0x5, "ecc_uncorrected": None,
    }  # fmt: skip
    samples = [s | {"gpus": g} for s, g in zip(_samples(own_cpus=1.0, busy_cpus=1.0, seconds=2), snapshots)]
    verdicts = interference.judge(samples, cpus=8, host="g1")["verdicts"]
    assert verdicts[GPU_SHARED]["detail"] == "g1 GPU 0: pid 99"
    assert verdicts[THROTTLED]["detail"] == "g1 GPU 0 power cap in 100% of samples, GPU 0 XID 79"
    # an idle reason (0x1) alone, or a cap in too few samples, is no throttle
    brief = [s | {"gpus": [{"index": 0, "reasons": 0x4 if k == 0 else 0x1}]} for k, s in enumerate(samples * 2)]
    assert THROTTLED not in interference.judge(brief, cpus=8, host="g1")["verdicts"]


def test_the_marks_reach_the_cells_and_compare_says_a_change_on_a_marked_cell():
    record = interference.judge(_samples(own_cpus=1.0, busy_cpus=2.0), cpus=2, host="n1")
    text = interference.marks_text([record])
    runs = pd.DataFrame(
        {"run_id": ["a", "b", "c"], "cell_hash": ["x", "x", "y"], "interference_marks": [text, "", None]}
    )
    marks = cell_marks(runs)
    assert short(marks["x"]) == SHARED_HOST and "(in 1 of 2 repeats)" in marks["x"] and marks["y"] == ""
    assert notes([marks["x"]])[0].endswith(
        "sbatch --exclusive; a campaign's benchmark jobs one node each) and run alone"
    )
    table = pd.DataFrame({"flag": ["improvement", "ok"], "marks_a": ["", ""], "marks_b": [marks["x"], marks["x"]]})
    assert interfered_changes(table)[0].startswith("1 of 1 changes called here")
    assert interfered_changes(table.assign(marks_b="")) == []


def test_a_slurm_profile_that_does_not_ask_for_whole_nodes_is_warned_about(compose):
    from launchers.submit import shared_nodes_warning

    assert "pass system.exclusive=true" in shared_nodes_warning(compose(["system=slurm_cpu"]).system)
    assert shared_nodes_warning(compose(["system=slurm_cpu", "system.exclusive=true"]).system) is None
    assert shared_nodes_warning(compose(["system=juwels_booster"]).system) is None  # exclusive: true
    assert shared_nodes_warning(compose(["system=local_cpu"]).system) is None  # no Slurm


def test_a_process_of_another_ddlbench_run_is_told_by_its_command_line():
    """A CPU run's torchrun agent and ranks fork from `ddlbench run` and keep its command line; a GPU run's ranks
    are `python -m benchmarks`, or name the rank program's file (torchrun --run-path); other commands are no run."""
    from launchers.lifecycle.interference import is_ddlbench_run

    python = "/venv/bin/python"
    runs = [
        [python, "-m", "ddlbench", "run", "model=simple_cnn"],
        [python, "/venv/bin/ddlbench", "campaign", "run", "experiment=smoke"],
        [python, "-m", "benchmarks", "framework=ddp"],
        [python, "-m", "benchmarks.commbench"],
        [python, "-m", "torch.distributed.run", "--run-path", "/src/benchmarks/__main__.py"],
    ]
    others = [
        [python, "-m", "ddlbench", "report", "runs"],
        [python, "/venv/bin/ddlbench", "campaign", "submit"],
        ["/usr/sbin/slurmd", "-f", "slurm.conf"],
        [],
    ]
    assert all(is_ddlbench_run(c) for c in runs) and not any(is_ddlbench_run(c) for c in others)
