"""The `ddlbench` command: its parser, built from each command group's module (ddlbench/<group>.py: run and
demo, data, maxbatch, loaderbench, results/report/compare/paper/synthetic-logs, history, predict, doctor, campaign,
preflight, commbench, stash, completion), and `main`."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from pathlib import Path

from benchmarks.errors import ConfigError
from ddlbench import (
    campaign,
    commbench,
    completion,
    data,
    doctor,
    history,
    loaderbench,
    maxbatch,
    predict,
    preflight,
    reports,
    run,
    stash,
)

EPILOG = """examples:
  ddlbench data synth --out data/synth --classes 10 --per-class 64
  ddlbench run loader=native data.path=data/synth model=resnet model.depth=18 run.per_gpu_batch=16
  ddlbench run framework=ddp system=h200 precision=amp_bf16 model.depth=50 run.per_gpu_batch=256
  ddlbench maxbatch framework=fsdp system=h200 precision=amp_bf16 model.depth=50
  ddlbench results runs/
  ddlbench predict model=resnet model.depth=50 run.per_gpu_batch=64 --from runs/one --system juwels_booster
overrides are Hydra's: see 'python -m benchmarks --help' for groups and 'ddlbench run --cfg job' for keys"""


def package_version() -> str:
    """This package's version from its installed metadata (pyproject's version); a source tree on
    PYTHONPATH, not installed, has none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ddlbench")
    except PackageNotFoundError:
        return "(not installed: no package metadata; pip install -e .)"


class _VersionAction(argparse.Action):
    """--version: `ddlbench <version>` on stdout; the metadata is read only when asked (it costs an import)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"ddlbench {package_version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ddlbench",
        description="Distributed deep-learning training benchmark: frameworks x loaders x GPUs.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction, help="print ddlbench's version and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    # each command group registers itself from its module (ddlbench/<group>.py), in the order `--help` lists them
    for group in (
        run,
        data,
        maxbatch,
        loaderbench,
        reports,
        history,
        predict,
        doctor,
        campaign,
        preflight,
        commbench,
        stash,
    ):
        group.add_parser(sub)
    completion.add_parser(sub, commands=sorted(sub.choices))  # ddlbench completion bash (every command above)
    return parser


# what an OSError's errno means to the user, and what to do about it
OS_FAULTS = {
    errno.ENOSPC: ("no space left on device", "free space there or write somewhere else"),
    errno.EDQUOT: ("disk quota exceeded", "free space there or write somewhere else"),
    errno.EACCES: ("permission denied", "fix its permissions or choose another place"),
    errno.EPERM: ("operation not permitted", "fix its permissions or choose another place"),
    errno.EROFS: ("read-only file system", "choose a writable place"),
    errno.ENOENT: ("no such file or directory", "check the path"),
    errno.EIO: ("input/output error", "check the disk or the file system's mount"),
}
SHOW_TRACEBACK = "DDLBENCH_TRACEBACK"  # set to 1: an unexpected error shows its traceback, as Python would


def fault_text(error: BaseException) -> str:
    """One line for an error that is no ConfigError: an OSError says what, where (its path) and the fix; an
    out-of-memory says so; anything else is named as an internal error."""
    if isinstance(error, OSError):
        what, fix = OS_FAULTS.get(error.errno, (error.strerror or str(error), "check the path"))
        where = " -> ".join(str(f) for f in (error.filename, error.filename2) if f is not None)
        return f"{what}{f': {where}' if where else ''}; {fix}"
    if isinstance(error, MemoryError):
        return "out of memory in ddlbench itself; free memory, or pass fewer runs (a smaller RUNS_DIR)"
    text = " ".join(str(error).split())[:300]
    return f"internal error: {type(error).__name__}{f': {text}' if text else ''}"


def keep_traceback(command: str) -> Path | None:
    """The current exception's traceback in ~/.cache/ddlbench/logs/ (not on the terminal); None where no file
    could be written there."""
    import time
    import traceback

    logs = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ddlbench" / "logs"
    path = logs / f"ddlbench-{command}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}.log"
    try:
        logs.mkdir(parents=True, exist_ok=True)
        path.write_text(f"ddlbench {' '.join(sys.argv[1:])}\n{traceback.format_exc()}")
    except OSError:
        return None
    return path


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        return 2
    except (
        KeyboardInterrupt
    ):  # before or after a launcher ran (a run's own interruption: launchers/lifecycle/supervise.py)
        print("ddlbench: interrupted", file=sys.stderr)
        return 130
    except Exception as error:  # a full disk, a refused directory, a bug: one line, the traceback in a file
        if os.environ.get(SHOW_TRACEBACK) == "1":
            raise
        log = keep_traceback(args.command)
        kept = f" (traceback: {log})" if log else ""
        report = "; please report it with the traceback" if not isinstance(error, OSError | MemoryError) else ""
        print(f"ddlbench: error: {args.command}: {fault_text(error)}{report}{kept}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
