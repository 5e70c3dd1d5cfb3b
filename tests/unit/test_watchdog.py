"""The hang watchdog's logic (launchers/lifecycle/watchdog.py) without a run: the limit it derives, the phases the step
timer tells it, what it writes when a rank stops advancing, and the line the supervisor makes of it. The
real case (a SIGSTOPped rank of a 2-rank gloo run) is tests/multiproc/test_faults_hang.py."""

from __future__ import annotations

import os

import pytest

from benchmarks.errors import ConfigError
from benchmarks.rundir import run_files, summary_schema
from launchers.lifecycle import rundir_state, watchdog


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Timer:
    """benchmarks/timing.py's protocol, recording the calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def start_step(self) -> None:
        self.calls.append("start")

    def mark(self) -> None:
        self.calls.append("mark")

    def cancel_step(self) -> None:
        self.calls.append("cancel")

    def end_step(self) -> None:
        self.calls.append("end")

    def pop_ready(self) -> list[dict[str, float]]:
        return [{"step_s": 1.0}]

    def flush(self) -> list[dict[str, float]]:
        return []


def test_the_limit_is_the_setting_or_derived_from_the_steps_with_a_floor():
    assert watchdog.limits_of(0, device_type="cuda") is None  # 0: no watchdog
    fixed = watchdog.limits_of(7.5, device_type="cpu")
    assert fixed.limit_s("setup", []) == fixed.limit_s("backward", [0.01] * 50) == 7.5
    gpu = watchdog.limits_of(None, device_type="cuda")
    assert gpu.limit_s("setup", []) == watchdog.HANG_START_S["cuda"]
    assert gpu.limit_s("backward", [0.1] * (watchdog.MIN_STEPS - 1)) == watchdog.HANG_START_S["cuda"]  # too few steps
    assert gpu.limit_s("backward", [0.1] * 20) == watchdog.HANG_FLOOR_S["cuda"]  # 20 x 0.1 s is under the floor
    assert gpu.limit_s("data", [30.0] * 10 + [1.0]) == watchdog.HANG_FACTOR * 30.0  # the median: one fast step
    assert gpu.limit_s("evaluation", [30.0] * 10) == watchdog.HANG_START_S["cuda"]
    cpu = watchdog.limits_of(None, device_type="cpu")
    assert cpu.limit_s("forward", [0.01] * 10) == watchdog.HANG_FLOOR_S["cpu"] < watchdog.HANG_FLOOR_S["cuda"]


@pytest.mark.parametrize("value", [-1, float("nan")])
def test_a_negative_limit_is_refused_in_one_line(value):
    with pytest.raises(ConfigError, match=r"run.hang_timeout_s=.* pass seconds > 0, 0 .* or null"):
        watchdog.limits_of(value, device_type="cpu")


def test_the_step_timer_tells_the_watchdog_each_phase(tmp_path):
    dog = watchdog.Watchdog(tmp_path, rank=0, limits=watchdog.limits_of(5, device_type="cpu"), clock=Clock())
    timer = Timer()
    watched = dog.watch(timer)
    seen = [dog._where[:2]]
    watched.start_step()
    seen.append(dog._where[:2])
    for _ in range(4):  # the loop's four marks: data, forward, backward, optimizer done
        watched.mark()
        seen.append(dog._where[:2])
    watched.end_step()
    seen.append(dog._where[:2])
    assert seen == [
        (0, "setup"),
        (0, "data"),
        (0, "forward"),
        (0, "backward"),
        (0, "optimizer"),
        (0, "optimizer"),
        (1, "between steps"),
    ]
    assert timer.calls == ["start", "mark", "mark", "mark", "mark", "end"]
    assert watched.pop_ready() == [{"step_s": 1.0}]
    evaluate = dog.around(lambda *args: dog._where[1])
    assert evaluate(1, 0, 8, 0.0) == "evaluation" and dog._where[1] == "between steps"


def test_a_rank_that_does_not_advance_within_the_limit_dumps_its_stacks_and_says_where_it_was(tmp_path):
    clock, hung = Clock(), []
    dog = watchdog.Watchdog(
        tmp_path, rank=1, limits=watchdog.limits_of(10, device_type="cpu"), clock=clock, on_hang=lambda: hung.append(1)
    ).start()
    try:
        dog._stop.set()  # the thread stops at its next look: the test looks itself, on its own clock
        dog._thread.join(5)
        for _ in range(3):
            dog.enter("data")
            dog.enter("backward")
            clock.now += 2.0
            dog.step_done()
            assert dog.check() is None
        dog.enter("backward")
        clock.now += 9.0
        assert dog.check() is None and not hung  # 9 s: within the limit
        progress = run_files.read_progress(tmp_path)[1]
        assert (progress["step"], progress["phase"], progress["hung"]) == (3, "backward", False)
        clock.now += 2.0
        assert dog.check() == pytest.approx(11.0) and hung == [1]
    finally:
        dog.stop()
    progress = run_files.read_progress(tmp_path)[1]
    assert progress["hung"] is True and (progress["step"], progress["phase"]) == (3, "backward")
    mark = watchdog.hang_noticed(tmp_path)
    assert mark["rank"] == 1 and mark["step"] == 3 and mark["phase"] == "backward" and mark["limit_s"] == 10
    stacks = run_files.stacks_path(tmp_path, 1).read_text()
    assert "rank 1 on" in stacks and "at step 3 in backward" in stacks
    assert "test_watchdog.py" in stacks  # faulthandler's dump of this thread


def test_a_rank_that_finishes_keeps_its_progress_record_and_no_empty_stacks_file(tmp_path):
    dog = watchdog.Watchdog(tmp_path, rank=0, limits=watchdog.limits_of(60, device_type="cpu")).start()
    dog.enter("conclude")
    dog.stop()
    assert run_files.read_progress(tmp_path)[0]["phase"] in ("setup", "conclude")
    assert not run_files.stacks_path(tmp_path, 0).exists()


def test_the_hang_line_puts_the_rank_that_did_not_answer_first():
    now = 5000.0
    progress = {
        0: {"host": "a", "pid": 1, "step": 7, "phase": "backward", "beat": now - 0.3, "beat_every_s": 0.5,
            "since": now - 11, "hung": True},
        1: {"host": "b", "pid": 2, "step": 7, "phase": "forward", "beat": now - 12, "beat_every_s": 0.5,
            "since": now - 12.2, "hung": False},
    }  # fmt: skip
    ranks = watchdog.where_ranks_were(progress, at=now)
    assert ranks["0"]["answered"] and not ranks["1"]["answered"]
    text = watchdog.hang_text({"stuck_s": 11.0, "limit_s": 10.0}, ranks, num_processes=3)
    assert text.startswith(
        "no step advanced for 11 s (limit 10 s, run.hang_timeout_s): rank 1 (b) at step 7 in forward"
    )
    assert "rank 0 (a) at step 7 in backward: waited" in text and "rank(s) 2 never reported" in text
    summary = summary_schema.hung_summary(text, ranks=ranks)
    assert summary["status"] == "hung" and summary["hung_ranks"]["1"]["phase"] == "forward"


def test_a_hung_summary_is_its_own_state_and_a_retried_one(tmp_path):
    (tmp_path / run_files.CONFIG).write_text("run: {}\n")
    run_files.write_json_atomic(tmp_path / run_files.SUMMARY, summary_schema.hung_summary("stuck", ranks={}))
    assert (
        rundir_state.state(tmp_path) == "hung"
        and "hung" in summary_schema.STATES
        and "hung" in summary_schema.RETRIED_STATES
    )


def test_the_flight_recorder_dumps_into_the_run_directory_and_the_user_s_settings_win(tmp_path, monkeypatch):
    env = watchdog.flight_recorder_env(tmp_path)
    assert env["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1" and int(env["TORCH_NCCL_TRACE_BUFFER_SIZE"]) > 0
    assert env["TORCH_FR_DUMP_TEMP_FILE"] == str(tmp_path.resolve() / "nccl_trace_rank")
    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "5")
    monkeypatch.delenv("TORCH_FR_DUMP_TEMP_FILE", raising=False)
    watchdog.set_up_flight_recorder(tmp_path)
    assert os.environ["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "5"
    assert os.environ["TORCH_FR_DUMP_TEMP_FILE"].startswith(str(tmp_path.resolve()))
