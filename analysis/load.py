"""Run directories (any depth below a root) -> tidy pandas DataFrames."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pandas as pd

SUMMARY = "summary.json"


def find_run_dirs(root: Path) -> list[Path]:
    """Every directory below root that looks like a run (holds meta.json or a rank log)."""
    dirs = {p.parent for p in root.rglob("meta.json")} | {p.parent for p in root.rglob("rank*.jsonl")}
    return sorted(dirs)


def load_runs(root: Path) -> pd.DataFrame:
    """One row per run directory: the summary's fields, `status`, and `reason` for runs not counted.

    A directory without summary.json is `incomplete` (a run that died or is still running); a
    summary that cannot be parsed is `corrupt`. Only status == 'completed' rows carry metrics.
    """
    rows: list[dict] = []
    for run_dir in find_run_dirs(Path(root)):
        row: dict = {"run_dir": str(run_dir), "cell": run_dir.name}
        path = run_dir / SUMMARY
        if not path.exists():
            row.update(status="incomplete", reason="no summary.json (the run died or is still running)")
        else:
            try:
                row.update(json.loads(path.read_text()))
            except (OSError, json.JSONDecodeError) as error:
                warnings.warn(f"{path}: unreadable summary ({error}); run excluded", stacklevel=2)
                row.update(status="corrupt", reason=f"unreadable summary.json: {error}")
            if row.get("status") == "failed":
                row.setdefault("reason", row.get("error", "failed"))
        rows.append(row)
    runs = pd.DataFrame(rows)
    if "reason" not in runs:
        runs["reason"] = None
    return runs
