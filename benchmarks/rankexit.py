"""How a rank process ends: exit handlers and flushed output, then no interpreter finalization.

torch.distributed's gloo worker threads outlive destroy_process_group (DDP's reducer keeps the backend
alive; a collective called through torch.compiler.disable, as deepspeed.comm does, leaves them too) and may
still be releasing the last collectives' Python objects (tensors, comm hook callbacks), which takes the
GIL. A thread that takes the GIL while the interpreter finalizes is ended by CPython with pthread_exit,
whose unwinding through a noexcept destructor is std::terminate: "terminate called without an active
exception", SIGABRT, in a rank whose work had completed (1-2 of 60 two-rank CPU runs; 3 of 20 commbench
runs over deepspeed.comm). The exit handlers still run here, with every thread free to take the GIL; then
the process ends without module teardown, where those threads would be killed.

A rank its launcher forked (torchrun --start-method=fork, benchmarks/freshstart.py) returns instead once it
succeeded: the launcher's multiprocessing wrapper waits for its return value, then ends the process the
same way (os._exit, no finalization).
"""

from __future__ import annotations

import atexit
import os
import sys

from benchmarks.freshstart import is_forked_rank


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
