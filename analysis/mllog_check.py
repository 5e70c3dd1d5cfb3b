"""`ddlbench results --check-mllog`: MLPerf's compliance checker (mlperf_logging.compliance_checker, the
`mllog` extra) on the mllog.txt of every counted run that had a target (run.target_top1), its messages sorted.

What is checked: the checker's common rules (training_<ruleset>/common.yaml, and the division's
<division>_common.yaml where the log names a division): the events parse, keep MLPerf's order (init,
run_start, epochs, evaluations, run_stop) and carry the keys every log must (the precision and parallelism
disclosure, train_samples, ...). Not checked: a benchmark's own rules (<division>_<benchmark>.yaml: MLPerf's
reference hyperparameters for its benchmarks, which ddlbench's models are not bound to; the checker stops with
a missing file where its ruleset has no such benchmark).

Its messages fall in three kinds, printed apart:
- submission-only: the keys only an MLPerf submission has (submission_org, submission_platform,
  submission_division: the site profile's system.mllog sets them; a submission_benchmark outside the ruleset's
  list) and what follows from one missing (without submission_division the checker allows init no time at all:
  its compile_time_mins stays 0, so init_stop always fails). Not failures.
- errors: everything else, in full, each; any one makes the command exit non-zero.
- warnings: the checker's own (a key repeated with the same value): printed, not failures.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from benchmarks.errors import ConfigError
from benchmarks.rundir.run_files import MLLOG_FILE

RULESET = "6.1.0"  # MLPerf Training's rules the checker holds a log to (the newest this package knows)
SUBMISSION_KEYS = ("submission_org", "submission_platform", "submission_division")
FIX = "set system.mllog.submission_org, submission_platform and submission_division in the site's profile"


@dataclass(frozen=True, slots=True)
class MllogCheck:
    run_id: str
    compliant: bool | None  # None: no mllog.txt; True: no error (submission-only messages aside)
    errors: list[str]  # the checker's messages that are failures, each in full
    submission: list[str] = field(default_factory=list)  # one line per submission-only message
    warnings: list[str] = field(default_factory=list)


def _first_line(message: str) -> str:
    return str(message).strip().splitlines()[0] if str(message).strip() else ""


def sort_messages(checker, *, logged_keys: set[str]) -> tuple[list[str], list[str], list[str]]:
    """(errors, submission-only lines, warnings) of a ComplianceChecker that has checked a file."""
    errors, submission = [], []
    for key, message in checker.overwritable.items():
        if key in SUBMISSION_KEYS:
            submission.append(f"{key}: missing ({_first_line(message)})")
        elif key == "submission_benchmark":
            submission.append(f"submission_benchmark: not one of MLPerf training {RULESET}'s benchmarks")
        elif key == "init_stop" and "compile_time_mins" in message and "submission_division" not in logged_keys:
            submission.append(
                "init_stop: fails only because submission_division is missing (the checker's init time limit, "
                "compile_time_mins, is 0 without it; 30 min closed, 240 open)"
            )
        else:
            errors.append(str(message).strip())
    errors += [str(m).strip() for m in checker.not_overwritable]
    return errors, submission, [str(m).strip() for m in checker.warnings.values()]


def check_file(path: Path, *, ruleset: str = RULESET) -> MllogCheck:
    """The checker's common rules on one MLLOG file (run_id: the file's folder name)."""
    try:
        from mlperf_logging.compliance_checker import mlp_compliance
        from mlperf_logging.compliance_checker.mlp_parser import parse_file
    except ImportError as error:
        raise ConfigError(
            "--check-mllog needs the mlperf-logging package; install it with pip install 'ddlbench[mllog]'"
        ) from error
    checker = mlp_compliance.ComplianceChecker("training", ruleset, quiet=False, werror=False)
    queue = mlp_compliance.enqueued_configs  # the checker's module-wide queue of rule files

    def common_only(config: str) -> None:  # a division's common rules, never a benchmark's own
        if Path(config).name.endswith("common.yaml"):
            queue.append(config)

    quiet = logging.getLogger()
    level, quiet.level = quiet.level, logging.CRITICAL  # the checker logs its messages too: we print them once
    plain = mlp_compliance.enqueue_config
    queue.clear()
    mlp_compliance.enqueue_config = common_only
    try:
        with contextlib.redirect_stdout(None):
            checker.check_file(str(path), f"training_{ruleset}/common.yaml")
    finally:
        mlp_compliance.enqueue_config = plain
        queue.clear()
        quiet.level = level
    lines, _ = parse_file(str(path), ruleset=ruleset)
    errors, submission, warnings = sort_messages(checker, logged_keys={line.key for line in lines})
    return MllogCheck(path.parent.name, not errors, errors, submission, warnings)


def check_runs(runs: pd.DataFrame, *, ruleset: str = RULESET) -> list[MllogCheck]:
    """The check of each run with a target (target_top1 set), in run_id order."""
    if "target_top1" not in runs or "run_dir" not in runs:
        return []
    targeted = runs[pd.to_numeric(runs["target_top1"], errors="coerce").notna()].sort_values("run_id")
    out = []
    for run_id, run_dir in zip(targeted["run_id"], targeted["run_dir"]):
        path = Path(run_dir) / MLLOG_FILE
        if not path.is_file():
            out.append(MllogCheck(str(run_id), None, [f"no {MLLOG_FILE}: the run had no mlperf-logging installed"]))
            continue
        check = check_file(path, ruleset=ruleset)
        out.append(MllogCheck(str(run_id), check.compliant, check.errors, check.submission, check.warnings))
    return out


def failed(checks: list[MllogCheck]) -> bool:
    """Whether any run has an error or no file: `results --check-mllog` exits 1."""
    return any(not check.compliant for check in checks)


def _indented(message: str, *, first: str) -> list[str]:
    lines = message.splitlines() or [""]
    return [f"{first}{lines[0]}", *(f"      {line}" for line in lines[1:])]


def format_checks(checks: list[MllogCheck]) -> str:
    """Per run: compliant or not; its errors in full, numbered; its submission-only keys apart, on one line."""
    if not checks:
        return "--check-mllog: no counted run has a target (run.target_top1): nothing to check"
    lines = [f"MLLOG compliance (mlperf_logging.compliance_checker, training {RULESET}, its common rules):"]
    for check in checks:
        if check.compliant is None:
            lines.append(f"  {check.run_id}: no file: {check.errors[0]}")
            continue
        said = "compliant" if check.compliant else f"NOT compliant, {len(check.errors)} error(s)"
        lines.append(f"  {check.run_id}: {said}")
        for number, error in enumerate(check.errors, start=1):
            lines += _indented(error, first=f"    error {number}: ")
        for warning in check.warnings:
            lines += _indented(warning, first="    warning: ")
        if check.submission:
            lines.append(f"    submission-only (not failures; {FIX}):")
            lines += [f"      {line}" for line in check.submission]
    return "\n".join(lines)
