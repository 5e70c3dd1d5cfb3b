"""Hydra app, run on every rank: python -m benchmarks framework=ddp loader=native model.depth=50"""
from __future__ import annotations

import atexit
import os
import sys

import hydra
from omegaconf import DictConfig

from benchmarks import schema
from benchmarks.errors import ConfigError

schema.register()


@hydra.main(config_path="../conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from benchmarks.app import run

    try:
        code = run(cfg)
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        code = 2
    _exit(code)


def _exit(code: int) -> None:
    """End the rank after its run without interpreter finalization.

    torch.distributed's gloo worker threads outlive destroy_process_group (DDP's reducer keeps the backend
    alive) and may still be releasing the last collectives' Python objects (tensors, comm hook callbacks),
    which takes the GIL. A thread that takes the GIL while the interpreter finalizes is ended by CPython with
    pthread_exit, whose unwinding through a noexcept destructor is std::terminate: "terminate called without
    an active exception", SIGABRT, in a rank whose run had completed (1-2 of 60 two-rank CPU runs). The exit
    handlers still run here, with every thread free to take the GIL; then the process ends without module
    teardown, where those threads would be killed. An exception other than ConfigError never gets here: Hydra
    prints it and exits 1.
    """
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
