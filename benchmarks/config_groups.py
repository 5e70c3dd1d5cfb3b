"""The config groups and their options, as a user chooses them (group=option): read from the YAML files of the
shipped config root and the user's DDLBENCH_CONFIG, never from Hydra's ConfigStore, whose `<option>_schema`
entries (benchmarks/schema.py) are the typed schemas behind the options, not options. `python -m benchmarks
--help`, `ddlbench run --help` and the shell completion list these; composing a schema entry is refused
(benchmarks/config.py). Torch- and Hydra-free: `ddlbench --help` reads it."""

from __future__ import annotations

import textwrap
from pathlib import Path

from benchmarks import resources

SCHEMA_SUFFIX = "_schema"  # benchmarks/schema.py's names in the ConfigStore
# folders of the config root that hold data, not options: conf/stash/prices.yaml is the Stash study's price table
# (launchers/stash_config.py reads it), chosen by `stash.prices=PATH`, never by `stash=...`
NOT_GROUPS = ("stash",)


def _roots() -> list[Path]:
    return [resources.conf_dir(), *filter(None, [resources.user_conf_dir()])]


def group_options() -> dict[str, list[str]]:
    """{group: its options}, nested groups as Hydra names them (experiment/aach2023_loader), sorted."""
    found: dict[str, set[str]] = {}
    for root in _roots():
        for path in root.rglob("*.yaml"):
            group = path.parent.relative_to(root).as_posix()
            if group != "." and not group.startswith(("hydra", *NOT_GROUPS)):
                found.setdefault(group, set()).add(path.stem)
    return {group: sorted(found[group]) for group in sorted(found)}


def groups_text(width: int = 110) -> str:
    """One line per group ('framework: ddp, deepspeed, dp, fsdp, horovod'), a long one wrapped at width."""
    lines = (f"{group}: {', '.join(names)}" for group, names in group_options().items())
    return "\n".join(textwrap.fill(line, width=width, subsequent_indent="    ") for line in lines)


def schema_choice(override: str) -> str | None:
    """The one-line error for an override that chooses a schema entry (framework=ddp_schema), else None."""
    key, _, value = override.lstrip("+~").partition("=")
    group = key.partition("@")[0]
    if not value.endswith(SCHEMA_SUFFIX):
        return None
    names = group_options().get(group)
    if names is None or value in names:
        return None
    return (
        f"{group}={value} is the typed schema behind the {group} options, not an option to run; "
        f"choose one of: {', '.join(names)}"
    )
