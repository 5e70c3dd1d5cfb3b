"""The `ddlbench` command: its parser, built from each command group's module (ddlbench/<group>.py: run and
demo, data, maxbatch, loaderbench, results/report/compare/paper/synthlogs, predict, doctor, campaign,
commbench, stash, completion), and `main`."""

from __future__ import annotations

import argparse
import sys

from benchmarks.errors import ConfigError
from ddlbench import campaign, commbench, completion, data, doctor, loaderbench, maxbatch, predict, reports, run, stash

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
    for group in (run, data, maxbatch, loaderbench, reports, predict, doctor, campaign, commbench, stash):
        group.add_parser(sub)
    completion.add_parser(sub, commands=sorted(sub.choices))  # ddlbench completion bash (every command above)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before or after a launcher ran (a run's own interruption: launchers/supervise.py)
        print("ddlbench: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
