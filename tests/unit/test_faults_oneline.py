"""Faults say one line (issue 50, item 4), simulated: a full disk (ENOSPC) and a refused path (EACCES) reach
the user as one `ddlbench: error:` line naming what and where, the traceback kept in a file; a summary.json
that meets a full disk gets the space reserved at the run's start; a rank log names its path when a write
fails; the launcher's output is hidden from the first traceback on. The real faults, with a small tmpfs and
real ranks: tests/multiproc/test_faults_hang.py."""

from __future__ import annotations

import argparse
import errno
import io
import json
import os
from pathlib import Path

import pytest

from benchmarks import runlog
from benchmarks.errors import ConfigError
from benchmarks.rundir import run_files, summary_schema
from ddlbench import cli
from launchers.lifecycle import fault_report, supervise


def enospc(path: Path) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def test_a_summary_that_meets_a_full_disk_gets_the_reserved_space(tmp_path, monkeypatch):
    run_files.reserve_space(tmp_path)
    assert (tmp_path / run_files.RESERVE).stat().st_size == run_files.RESERVE_BYTES
    real, calls = run_files._write_then_rename, []

    def full_until_released(path, text):
        calls.append(path.name)
        if (tmp_path / run_files.RESERVE).exists():
            raise enospc(path)
        real(path, text)

    monkeypatch.setattr(run_files, "_write_then_rename", full_until_released)
    with pytest.raises(OSError, match="No space left"):  # only summary.json may take the reserve
        run_files.write_json_atomic(tmp_path / "end_rank0.json", {"rank": 0})
    run_files.write_json_atomic(
        tmp_path / run_files.SUMMARY, summary_schema.failed_summary(enospc(tmp_path / "rank0.jsonl"))
    )
    assert calls == ["end_rank0.json", run_files.SUMMARY, run_files.SUMMARY]
    assert run_files.read_summary(tmp_path)["status"] == "failed" and not (tmp_path / run_files.RESERVE).exists()
    assert not list(tmp_path.glob(".*.tmp*"))  # no half-written temporary left behind


def test_a_completed_summary_gives_the_reserve_back(tmp_path):
    run_files.reserve_space(tmp_path)
    run_files.write_json_atomic(tmp_path / run_files.SUMMARY, {"status": "completed"})
    assert not (tmp_path / run_files.RESERVE).exists()


def test_a_rank_log_that_cannot_be_written_names_its_path_and_closes_quietly(tmp_path):
    log = runlog.RankLog(tmp_path, 3)
    log._file.close()
    log._file = open("/dev/full", "w")  # every flush: ENOSPC
    with pytest.raises(OSError) as raised:
        log.write({"kind": "header"})
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(tmp_path / "rank3.jsonl")
    log.close()  # the buffered line is dropped, not raised a second time over the run's own error


def run_main(monkeypatch, tmp_path, error: BaseException, capsys) -> tuple[int, str]:
    """`ddlbench results X` whose handler raises `error`; (exit code, stderr)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))

    def handler(_args: argparse.Namespace) -> int:
        raise error

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["results"].set_defaults(func=handler)
    code = cli.main(["results", str(tmp_path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (enospc(Path("/scratch/runs/x/rank1.jsonl")), "no space left on device: /scratch/runs/x/rank1.jsonl; free"),
        (PermissionError(errno.EACCES, "Permission denied", "/scratch/runs"), "permission denied: /scratch/runs; fix"),
        (OSError(errno.EROFS, "Read-only file system", "/ro"), "read-only file system: /ro; choose a writable place"),
    ],
)
def test_a_fault_ends_with_one_line_naming_what_and_where_the_traceback_in_a_file(
    monkeypatch, tmp_path, capsys, error, says
):
    code, err = run_main(monkeypatch, tmp_path, error, capsys)
    assert code == 1 and "Traceback" not in err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"ddlbench: error: results: {says}"), line
    (kept,) = (tmp_path / "cache" / "ddlbench" / "logs").iterdir()
    assert f"(traceback: {kept})" in line and "Traceback (most recent call last)" in kept.read_text()


def test_an_internal_error_is_named_as_one_and_asks_for_a_report(monkeypatch, tmp_path, capsys):
    code, err = run_main(monkeypatch, tmp_path, ValueError("bad\nthing"), capsys)
    (line,) = err.strip().splitlines()
    assert code == 1 and line.startswith("ddlbench: error: results: internal error: ValueError: bad thing;")
    assert "please report it" in line


def test_the_traceback_is_shown_when_asked(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv(cli.SHOW_TRACEBACK, "1")
    with pytest.raises(ValueError):
        run_main(monkeypatch, tmp_path, ValueError("shown"), capsys)


def test_a_run_directory_that_takes_no_file_refuses_the_run_in_one_line(tmp_path, monkeypatch):
    def refused(run_dir, nbytes=0):
        raise PermissionError(errno.EACCES, "Permission denied", str(run_dir))

    monkeypatch.setattr(run_files, "reserve_space", refused)
    with pytest.raises(ConfigError) as raised:
        supervise._reserve(tmp_path / "runs" / "r0")
    text = str(raised.value)
    assert "\n" not in text and f"{tmp_path / 'runs' / 'r0'}" in text and "Permission denied" in text
    assert "choose another run.root" in text


def test_the_launcher_s_output_from_the_first_traceback_on_goes_to_the_fault_log(tmp_path, monkeypatch):
    lines = [
        b"[ddlbench] rank 0/2 on cpu: x\n",
        b"Error executing job with overrides: ['model=simple_cnn']\n",
        b"Traceback (most recent call last):\n",
        b'  File "app.py", line 1, in run\n',
        b"OSError: [Errno 28] No space left on device\n",
        b"ddlbench: interrupted (SIGTERM)\n",
        b"[ddlbench] still ours\n",
    ]
    terminal = io.BytesIO()
    monkeypatch.setattr(supervise.sys, "stderr", type("E", (), {"buffer": terminal})())
    output = supervise._Output(io.BytesIO(b"".join(lines)), tmp_path)
    output.join(5.0)
    assert not output.thread.is_alive()
    assert terminal.getvalue() == lines[0] + lines[-1]
    assert (tmp_path / supervise.FAULT_LOG).read_bytes() == b"".join(lines[1:-1])
    assert output.log_path == tmp_path / supervise.FAULT_LOG


def write_rank(
    run_dir: Path, rank: int, *, host: str, steps: int, error: str | None, wrote_end: bool = True, pid: int = 0
) -> None:
    lines = [json.dumps({"kind": "header", "rank": rank, "host": host, "pid": pid or 1000 + rank})]
    lines += [json.dumps({"step": s, "samples": 2, "warmup": False, "step_s": 0.1}) for s in range(steps)]
    (run_dir / f"rank{rank}.jsonl").write_text("\n".join(lines) + "\n")
    if wrote_end:
        run_files.write_json_atomic(
            summary_schema.end_path(run_dir, rank),
            summary_schema.end_record(rank=rank, peaks={}, error=None if error is None else RuntimeError(error)),
        )


def test_the_run_s_line_names_the_rank_whose_own_error_stopped_it_not_the_peer_that_lost_it(tmp_path):
    write_rank(tmp_path, 0, host="node-a", steps=5, error="Connection closed by peer [10.0.0.2]:4321")
    write_rank(tmp_path, 1, host="node-b", steps=4, error="CUDA out of memory. Tried to allocate 2.00 GiB\nmore")
    line = fault_report.fault_text(tmp_path, rank0_error=None, written=True, output=None)
    assert line.startswith(
        "rank 1 on node-b, after step 3: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB;"
    )
    assert line.endswith(f"the run is marked failed; logs in {tmp_path}")


def test_a_rank_killed_without_a_word_is_the_cause_and_a_missing_summary_is_said(tmp_path):
    write_rank(tmp_path, 0, host="node-a", steps=5, error="Connection reset by peer")
    write_rank(tmp_path, 1, host="node-b", steps=5, error=None, wrote_end=False)  # SIGKILLed: no end record
    line = fault_report.fault_text(tmp_path, rank0_error=None, written=False, output=None)
    assert line.startswith("rank 1 on node-b, after step 4: ended without an error of its own (killed")
    assert "no summary could be written: the next launch retries the run" in line


@pytest.mark.parametrize(
    "said",
    [
        "[E1205 api.py:874] failed (exitcode: -9) local_rank: 1 (pid: 4242) of binary: python\n",
        "traceback : Signal 9 (SIGKILL) received by PID 4242\n",
        "mpirun noticed that process rank 1 with PID 4242 on node vm exited on signal 9 (Killed).\n",
    ],
)
def test_of_two_silent_ranks_the_one_the_launcher_saw_killed_is_named_however_their_logs_tie(tmp_path, said):
    """Both ranks logged step 4 and neither wrote an end record (the launcher stopped rank 0 before it saw its
    peer go); rank 0's log was written last: the launcher's own word on who died of a signal decides."""
    write_rank(tmp_path, 1, host="node-b", steps=5, error=None, wrote_end=False, pid=4242)
    write_rank(tmp_path, 0, host="node-a", steps=5, error=None, wrote_end=False, pid=4241)
    os.utime(tmp_path / "rank1.jsonl", (1, 1))  # rank 1's log the older: the tie-break would name it anyway
    os.utime(tmp_path / "rank0.jsonl", (0, 0))  # so make rank 0's look older: only the launcher's word names 1
    output = supervise._Output(io.BytesIO(b""), tmp_path)
    output.join(5.0)
    output.unwritten.append(("[W] Sending process 4241 closing signal SIGTERM\n" + said).encode())
    line = fault_report.fault_text(tmp_path, rank0_error=None, written=True, output=output)
    assert line.startswith("rank 1 on node-b, after step 4: ended without an error of its own (killed"), line
    without = fault_report.fault_text(tmp_path, rank0_error=None, written=True, output=None)
    assert without.startswith("rank 0 on node-a"), without  # what the logs alone say, for contrast
