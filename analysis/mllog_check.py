"""`ddlbench results --check-mllog`: MLPerf's compliance checker (mlperf_logging.compliance_checker, the
`mllog` extra) on the mllog.txt of every counted run that had a target (run.target_top1), and what it said.
ddlbench's runs are not MLPerf submissions: the checker lists the submission keys they lack (submission_org,
the benchmark's own hyperparameters); what the check is for is that the events ddlbench writes parse and
keep MLPerf's order (init, run_start, epochs, evaluations, run_stop)."""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.errors import ConfigError
from benchmarks.rundir.run_files import MLLOG_FILE

RULESET = "6.1.0"  # MLPerf Training's rules the checker holds a log to (the newest this package knows)


@dataclass(frozen=True, slots=True)
class MllogCheck:
    run_id: str
    compliant: bool | None  # None: no mllog.txt
    messages: list[str]


def check_file(path: Path, *, ruleset: str = RULESET) -> tuple[bool, list[str]]:
    """(compliant, the checker's messages) of one MLLOG file."""
    try:
        from mlperf_logging.compliance_checker.mlp_compliance import ComplianceChecker
    except ImportError as error:
        raise ConfigError(
            "--check-mllog needs the mlperf-logging package; install it with pip install 'ddlbench[mllog]'"
        ) from error
    checker = ComplianceChecker("training", ruleset, quiet=False, werror=False)
    quiet = logging.getLogger()
    level, quiet.level = quiet.level, logging.CRITICAL  # the checker logs its messages too: we print them once
    try:
        with contextlib.redirect_stdout(None):
            compliant = bool(checker.check_file(str(path), f"training_{ruleset}/common.yaml"))
    finally:
        quiet.level = level
    messages = [*checker.warnings.values(), *checker.overwritable.values(), *checker.not_overwritable]
    return compliant, [" ".join(str(m).split()) for m in messages]


def check_runs(runs: pd.DataFrame, *, ruleset: str = RULESET) -> list[MllogCheck]:
    """The check of each run with a target (target_top1 set), in run_id order."""
    if "target_top1" not in runs or "run_dir" not in runs:
        return []
    targeted = runs[pd.to_numeric(runs["target_top1"], errors="coerce").notna()].sort_values("run_id")
    out = []
    for run_id, run_dir in zip(targeted["run_id"], targeted["run_dir"]):
        path = Path(run_dir) / MLLOG_FILE
        if not path.is_file():
            out.append(MllogCheck(str(run_id), None, [f"no {MLLOG_FILE} (mlperf-logging was not installed?)"]))
            continue
        out.append(MllogCheck(str(run_id), *check_file(path, ruleset=ruleset)))
    return out


def format_checks(checks: list[MllogCheck], *, shown: int = 5) -> str:
    """One line per run (compliant, or its count of messages) and its first `shown` messages under it."""
    if not checks:
        return "--check-mllog: no counted run has a target (run.target_top1): nothing to check"
    lines = [f"MLLOG compliance (mlperf_logging.compliance_checker, training {RULESET}):"]
    for check in checks:
        said = "no file" if check.compliant is None else "compliant" if check.compliant else "not compliant"
        lines.append(f"  {check.run_id}: {said}" + (f" ({len(check.messages)} messages)" if check.messages else ""))
        lines += [f"    {m[:160]}" for m in check.messages[:shown]]
    return "\n".join(lines)
