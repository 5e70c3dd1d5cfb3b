"""benchmarks/mllog.py writes through mlperf_logging.mllog: the file parses with MLPerf's own parser, the times
are MlLog's clock, the call site is the caller's; without the package the run goes on and says so."""

from __future__ import annotations

import sys

import pytest

from benchmarks import mllog
from benchmarks.mllog import MlLog

pytest.importorskip("mlperf_logging", reason="needs the mlperf-logging package (the mllog or test extra)")


def test_events_parse_with_mlperf_logging(tmp_path):
    from mlperf_logging.compliance_checker.mlp_parser import parse_file

    times = iter([1.0, 2.0, 3.0, 3.5, 4.0, 9.0, 10.0, 11.0])
    log = MlLog(tmp_path, clock=lambda: next(times))
    log.start("init_start")
    log.event("global_batch_size", 64)
    log.run_start()
    log.start("epoch_start", epoch_num=1)
    log.end("epoch_stop", epoch_num=1)
    assert log.run_stop(status="success") == pytest.approx(10.0 - 3.5)
    log.close()
    lines, errors = parse_file(str(tmp_path / "mllog.txt"), ruleset="6.1.0")
    assert not errors
    assert [(line.key, line.timestamp) for line in lines] == [
        ("init_start", 1000),
        ("global_batch_size", 2000),
        ("init_stop", 3000),
        ("run_start", 3500),
        ("epoch_start", 4000),
        ("epoch_stop", 9000),
        ("run_stop", 10000),
        ("time_to_train", 11000),
    ]
    assert lines[4].value["metadata"]["epoch_num"] == 1 and lines[6].value["metadata"]["status"] == "success"
    assert lines[4].value["metadata"]["file"].endswith("test_mllog.py")  # the caller's site, not mllog.py's


def test_without_the_package_no_file_and_said_once(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "mlperf_logging.mllog.mllog", None)  # import fails
    log = MlLog(tmp_path)
    log.run_start()
    log.run_stop(status="success")
    log.close()
    assert not (tmp_path / "mllog.txt").exists()
    assert capsys.readouterr().err.count(mllog.MISSING) == 1
