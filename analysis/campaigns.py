"""Which campaigns a runs folder holds, and choosing one. A folder may hold several (`run.root` holds one
folder per `run.campaign`): `results` and `report` show them side by side, a campaign column on every table
and each campaign named in the header, and `--campaign NAME` keeps one. No figure pools two campaigns: the
campaign is a setting, so it is in the cell hash and in every scaling curve's (docs/analysis.md).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmarks.errors import ConfigError


def campaign_counts(runs: pd.DataFrame) -> dict[str, int]:
    """{campaign: its run directories}, in name order; runs whose campaign is not recorded under '-'."""
    if runs.empty:
        return {}
    names = runs["campaign"].astype("object").where(runs["campaign"].notna(), "-") if "campaign" in runs else None
    if names is None:
        return {"-": len(runs)}
    return {str(k): int(v) for k, v in names.astype(str).value_counts().sort_index().items()}


def campaigns_line(root: Path | str, counts: dict[str, int]) -> str:
    """'runs/ holds 2 campaigns: demo (3 runs), tour (4 runs); ...', or '' for one campaign."""
    if len(counts) < 2:
        return ""
    named = ", ".join(f"{name} ({n} run{'s' if n != 1 else ''})" for name, n in counts.items())
    return (
        f"{root} holds {len(counts)} campaigns: {named}. Each row is one campaign's cell (the campaign is in the "
        f"cell hash: nothing is pooled across them); --campaign NAME shows one"
    )


def campaign_folder(root: Path, name: str | None, *, usage: str) -> Path:
    """The folder of campaign `name` under `root` (run.root/<run.campaign>), or `root` itself for None, or a
    one-line error naming the campaigns there and the flag to pass."""
    if name is None:
        return root
    if (root / name).is_dir():
        return root / name
    found = sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != "attic") if root.is_dir() else []
    raise ConfigError(
        f"--campaign {name}: no folder {root / name}; {root} holds {', '.join(found) or 'no campaign folder'}: "
        f"pass one of them, e.g. {usage.replace('NAME', found[0] if found else 'NAME')}"
    )
