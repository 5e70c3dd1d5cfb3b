"""Interruptions and deaths under the local launchers (launchers/lifecycle/supervise.py), with real ranks: Ctrl-C
and SIGTERM end every rank within seconds with one line and an `interrupted` run, a retry of the cell
runs (the old run moved into attic/), a run whose rank 0 is killed gets a failed summary, and a run
that fails before its first step does not block the retry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from tests.longrun import start, wait_for_steps


def stop(process: subprocess.Popen, sig: int) -> tuple[float, str]:
    start_s = time.monotonic()
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    return time.monotonic() - start_s, err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_run_ends_in_seconds_says_one_line_and_can_be_retried(tmp_path, rank_processes, sig):
    process = start(tmp_path)
    run_dir = wait_for_steps(tmp_path)
    took_s, err = stop(process, sig)
    assert process.returncode == 130 and took_s < 15, (process.returncode, took_s, err[-2000:])
    assert "Traceback" not in err and err.strip().splitlines()[-1].startswith(
        f"[ddlbench] interrupted ({signal.Signals(sig).name})"
    ), err[-2000:]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "interrupted"
    assert (run_dir / "interrupt.log").exists()  # the ranks' last words are kept, not shown
    assert not [p for p in os.popen("ps -eo args").read().splitlines() if str(run_dir) in p]  # no rank left
    if sig == signal.SIGTERM:
        return  # the retry of an interrupted run does not depend on the signal that stopped it: once, after SIGINT

    retry = start(tmp_path)
    deadline = time.monotonic() + 60
    while not (tmp_path / "default" / "attic").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    wait_for_steps(tmp_path)
    _, err = stop(retry, signal.SIGINT)
    assert "was interrupted: moved to" in err, err[-2000:]
    (kept,) = (tmp_path / "default" / "attic").iterdir()
    assert (
        kept.name.startswith(run_dir.name)
        and json.loads((kept / "summary.json").read_text())["status"] == "interrupted"
    )


def test_a_killed_rank_0_leaves_a_failed_summary(tmp_path, rank_processes):
    process = start(tmp_path)
    run_dir = wait_for_steps(tmp_path)
    header = json.loads((run_dir / "rank0.jsonl").read_text().splitlines()[0])
    os.kill(header["pid"], signal.SIGKILL)
    process.communicate(timeout=120)
    assert process.returncode != 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed" and "no rank wrote a summary" in summary["error"], summary


def test_a_run_that_fails_before_its_first_step_does_not_block_the_retry(tmp_path, ddlbench):
    data = tmp_path / "data" / "a"
    data.mkdir(parents=True)
    for i in range(4):
        (data / f"{i}.jpg").write_bytes(b"not a jpeg")  # passes the checks on the submit host, fails in a worker
    common = [
        "loader=native",
        f"data.path={tmp_path / 'data'}",
        "model=simple_cnn",
        "run.steps=2",
        "run.warmup_steps=1",
        "run.per_gpu_batch=2",
        "loader.num_workers=0",
        f"run.root={tmp_path / 'runs'}",
    ]
    first = ddlbench("run", *common)
    assert first.returncode != 0
    (run_dir,) = (tmp_path / "runs" / "default").glob("*-r0")
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "failed"
    from benchmarks.data.synth import synth_imagefolder

    for f in data.iterdir():
        f.unlink()
    data.rmdir()
    synth_imagefolder(
        tmp_path / "data", num_classes=1, images_per_class=4, width=32, height=24, quality=90, seed=0, progress=False
    )
    second = ddlbench("run", *common)
    assert second.returncode == 0 and "was failed: moved to" in second.stderr, second.stderr[-2000:]
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "completed"


def test_one_failing_rank_makes_a_failed_run_not_an_interrupted_one(tmp_path, ddlbench):
    """torchrun stops the surviving ranks with SIGTERM when one fails; the run is still a failure, with the
    failing rank's error, and not marked interrupted."""
    from benchmarks.data.synth import synth_imagefolder

    data = tmp_path / "data"
    synth_imagefolder(data, num_classes=1, images_per_class=8, width=32, height=24, quality=90, seed=0, progress=False)
    sorted(data.rglob("*.jpg"))[3].write_bytes(b"not a jpeg")  # in one rank's shard only
    result = ddlbench(
        "run",
        "loader=native",
        f"data.path={data}",
        "model=simple_cnn",
        "run.steps=4",
        "run.warmup_steps=1",
        "run.per_gpu_batch=1",
        "loader.num_workers=0",
        "loader.shuffle=false",
        f"run.root={tmp_path / 'runs'}",
    )
    assert result.returncode != 0
    (run_dir,) = (tmp_path / "runs" / "default").glob("*-r0")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "failed", summary
    # whichever rank wrote the summary (or none did), every rank's own error is kept: the bad image is named
    assert any("cannot identify image" in e for e in summary["rank_errors"].values()), summary
