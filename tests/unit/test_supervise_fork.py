"""A launcher started as a fork of this process (launchers/lifecycle/supervise.py, Launcher.forks) is `python -m <module>`
as a fresh interpreter runs it: its argv, its environment, its exit code, its stderr, Ctrl-C's death, and
none of this process's signal handlers, warnings filters or exit handlers. The training runs under torchrun
that every multiproc test makes go this way; these check the contract on a module of a few lines."""

from __future__ import annotations

import importlib
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from launchers.lifecycle import supervise

MODULE = """
import os, signal, sys, time, warnings
print("argv", sys.argv[1:], "env", os.environ.get("FORKED_X"), "name", __name__, file=sys.stderr)
print("sigterm default", signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, file=sys.stderr)
warnings.warn("deprecated", DeprecationWarning)  # ignored by a fresh interpreter outside __main__'s own code
what = sys.argv[1]
if what == "raise":
    raise ValueError("the launcher failed")
if what == "sleep":
    print("sleeping", file=sys.stderr, flush=True)
    time.sleep(60)
sys.exit(int(what))
"""


@pytest.fixture
def module(tmp_path, monkeypatch) -> str:
    """forked_pkg.launcher, its package imported here (as torch is where torchrun forks)."""
    (tmp_path / "forked_pkg").mkdir()
    (tmp_path / "forked_pkg" / "__init__.py").write_text("")
    (tmp_path / "forked_pkg" / "launcher.py").write_text(textwrap.dedent(MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "forked_pkg", raising=False)
    importlib.import_module("forked_pkg")
    return "forked_pkg.launcher"


def forked(module: str, *args: str) -> supervise._Forked:
    return supervise._Forked(module, args, env={"FORKED_X": "42", "PATH": "/usr/bin"}, own_group=True)


def test_argv_environment_exit_code_and_stderr_are_a_fresh_interpreters(module, recwarn):
    def handler(*_):
        raise AssertionError("this process's handler ran in the child")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        process = forked(module, "3")
        assert process.wait(timeout=30) == 3
    finally:
        signal.signal(signal.SIGTERM, previous)
    err = process.stderr.read().decode()
    assert "argv ['3'] env 42 name __main__" in err and "sigterm default True" in err, err
    assert "DeprecationWarning" not in err, err


def test_an_uncaught_exception_is_its_traceback_and_exit_1(module):
    process = forked(module, "raise")
    assert process.wait(timeout=30) == 1
    err = process.stderr.read().decode()
    assert "Traceback" in err and "ValueError: the launcher failed" in err, err


def test_ctrl_c_ends_it_as_it_ends_an_interpreter_and_wait_times_out_before(module):
    process = forked(module, "sleep")
    assert process.stderr.readline().startswith(b"argv")
    with pytest.raises(subprocess.TimeoutExpired):
        process.wait(timeout=0.2)
    time.sleep(0.5)  # into its sleep
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == -signal.SIGINT
    assert b"KeyboardInterrupt" in process.stderr.read()


def test_only_python_m_of_a_package_imported_here_forks(module):
    started = supervise._start([sys.executable, "-m", module, "0"], env={}, own_group=True, fork=True)
    assert isinstance(started, supervise._Forked) and started.wait(timeout=30) == 0
    where = Path(sys.modules["forked_pkg"].__file__).parent.parent
    unimported = module.replace("forked_pkg", "unimported_pkg")
    (where / "unimported_pkg").symlink_to("forked_pkg")
    for argv, fork in (
        ([sys.executable, "-m", module, "0"], False),  # the launcher does not fork
        ([sys.executable, "-m", unimported, "0"], True),  # its package is not imported here: nothing to spare
        (["true"], True),  # not `python -m`
    ):
        started = supervise._start(argv, env={"PYTHONPATH": str(where)}, own_group=True, fork=fork)
        assert isinstance(started, subprocess.Popen) and started.wait(timeout=30) == 0, argv
