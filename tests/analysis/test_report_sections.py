"""Which runs a report section or row is about: CUDA and NCCL versions of GPU runs only (issue 36)."""

from __future__ import annotations

import pandas as pd

from analysis.report import _provenance


def _rows(runs: pd.DataFrame) -> dict[str, str]:
    table = _provenance(runs)
    return dict(zip(table["what"], table["value (runs)"]))


def test_a_cpu_run_lists_no_cuda_or_nccl_version():
    """torch's CUDA build is in every run's meta.json; on a CPU run it is no fact of the run."""
    cpu = {"config.system.device": "cpu", "meta.hardware.gpus": "[]", "meta.hardware.cuda": "13.0"}
    rows = _rows(pd.DataFrame([{**cpu, "meta.hardware.host": "laptop"}]))
    assert rows == {"hardware.host": "laptop"}
    gpu = {"config.system.device": "cuda", "meta.hardware.gpus": '["NVIDIA H200"]', "meta.hardware.cuda": "13.0"}
    rows = _rows(pd.DataFrame([{**cpu, "meta.hardware.cuda": "12.8"}, {**gpu, "meta.hardware.nccl": "2.27.3"}]))
    assert (rows["hardware.cuda"], rows["hardware.nccl"]) == ("13.0", "2.27.3")  # the GPU run's only
    # a CPU run on a GPU host (system=local_cpu on an H200) is a CPU run; no device recorded: its GPUs say
    rows = _rows(pd.DataFrame([{**cpu, "meta.hardware.gpus": '["NVIDIA H200"]'}]))
    assert "hardware.cuda" not in rows
    cpu["meta.hardware.cuda"] = "12.8"
    rows = _rows(pd.DataFrame([{**gpu, "config.system.device": None}, {**cpu, "config.system.device": None}]))
    assert rows["hardware.cuda"] == "13.0"
