"""A forked process made to start as a fresh interpreter would, for the program it runs next.

Two processes of a local CPU run start as forks rather than as fresh Pythons (about 6 s of CPU each on the
2-core machine: torch, hydra and the adapters imported anew):
- torchrun's agent, forked from `ddlbench run` (launchers/lifecycle/supervise.py, Launcher.forks);
- the ranks, forked from that agent (torchrun --run-path --start-method=fork, JobShape.fork_ranks); only a
  CPU run's of one thread per rank where no GPU driver is, as neither CUDA nor GNU OpenMP's thread pool
  survives a fork (launchers/local.py ranks_may_fork).
A fork inherits what its parent set; this resets what a program can tell: signal handlers, Python's stdout and
stderr, warnings filters, exit handlers, the logging configuration and Hydra's global state.
"""

from __future__ import annotations

import atexit
import io
import logging
import multiprocessing
import os
import signal
import sys
import warnings
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from benchmarks.frameworks.base import Framework


def as_fresh_interpreter(*, unbuffered: bool = False) -> None:
    """This process's interpreter-level state as `python` (`python -u`: unbuffered) starts with it; file
    descriptors and the environment are left as they are."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    buffering = {"write_through": True} if unbuffered else {"line_buffering": True}
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), **buffering)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), errors="backslashreplace", **buffering)
    warnings.resetwarnings()  # a fresh interpreter's filters (pytest's, for one, are not the program's)
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    atexit._clear()  # the parent's exit handlers are not the program's
    logging.root.handlers.clear()  # unconfigured (lastResort: stderr)
    if "hydra.core.global_hydra" in sys.modules:  # the parent composed configs: hydra.main initialises anew
        sys.modules["hydra.core.global_hydra"].GlobalHydra.instance().clear()


def is_forked_rank() -> bool:
    """Whether this process is a rank that its launcher started as a multiprocessing child (torchrun
    --start-method=fork): the launcher waits for it to return, not only to exit, once it succeeded."""
    return multiprocessing.parent_process() is not None


def import_what_ranks_import_late(framework: type[Framework]) -> None:
    """Import here what every training rank imports only once it runs, so that ranks forked from this process
    (JobShape.fork_ranks) share it rather than each importing it: torch._dynamo, which torch.optim imports on
    an optimizer's first parameter group (2.0 s of CPU on the 2-core machine); torchvision's models and
    datasets (0.2-0.3 s each); and the framework's library (Framework.preload: DeepSpeed, 1.8 s)."""
    import torch._dynamo  # noqa: F401
    import torchvision.datasets  # noqa: F401
    import torchvision.models  # noqa: F401

    framework.preload()


def exit_rank(code: int) -> None:
    """End this rank's process with `code`; returns only where a forked rank succeeded (code 0), to the
    launcher's wrapper that ends it."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if code == 0 and is_forked_rank():
        return
    os._exit(code)
