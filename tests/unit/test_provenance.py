"""meta.json's hardware: what a reader needs to tell one machine's runs from another's, the CPU's model and the
flags that change how it computes bfloat16 (docs/testing.md) among them."""

from __future__ import annotations

from benchmarks import runlog


def test_the_cpu_model_and_its_bf16_flags_are_recorded(tmp_path, monkeypatch):
    info = runlog.hardware_provenance()
    assert {"cpu_model", "cpu_bf16_flags", "cpu_count"} <= set(info)
    assert set(info["cpu_bf16_flags"] or []) <= set(runlog.BF16_FLAGS)
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: Some Xeon\nflags\t\t: fpu sse avx2 avx512_bf16 amx_tile\n")
    real_open = open
    monkeypatch.setattr("builtins.open", lambda f, *a, **k: real_open(cpuinfo if f == "/proc/cpuinfo" else f, *a, **k))
    assert runlog.cpu_model() == "Some Xeon" and runlog.cpu_bf16_flags() == ["avx512_bf16"]
