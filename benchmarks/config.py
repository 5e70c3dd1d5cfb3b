"""Compose the Hydra config in-process (for `ddlbench run`, tests and tools) with one-line errors."""

from __future__ import annotations

import copy
import re
from collections import OrderedDict
from collections.abc import Sequence

from omegaconf import DictConfig, OmegaConf

from benchmarks import resources, schema
from benchmarks.config_groups import schema_choice
from benchmarks.errors import ConfigError

CONF_DIR = resources.conf_dir()
GROUPS = ("framework", "loader", "model", "precision", "system", "experiment")
# keys and values of overrides: what Hydra's grammar needs and nothing a shell would act on
_SAFE_OVERRIDE = re.compile(r"^[A-Za-z0-9_./@-]+=[A-Za-z0-9_.,:/@+\-\[\] ]*$")
# the one key that may be added: an environment variable for every rank (+system.env.NCCL_MAX_CTAS=8)
_NEW_ENV_VAR = re.compile(r"^\+system\.env\.[A-Z_][A-Z0-9_]*=")


def options(group: str) -> list[str]:
    """The selectable options of a config group (its YAML files, shipped and the user's own)."""
    folders = [CONF_DIR, *filter(None, [resources.user_conf_dir()])]
    return sorted({p.stem for folder in folders for p in (folder / group).glob("*.yaml")})


def check_override(override: str) -> None:
    if "=" not in override:
        raise ConfigError(f"override {override!r} is not key=value; e.g. framework=ddp or run.steps=50")
    if (refused := schema_choice(override)) is not None:
        raise ConfigError(refused)
    checked = override
    if _NEW_ENV_VAR.match(override):
        checked = override[1:]  # the value is checked as any other
    elif override.startswith("+system.env."):
        name = override.partition("=")[0][len("+system.env.") :]
        raise ConfigError(
            f"override {override!r}: {name!r} is no environment variable name for the ranks; "
            "use capitals, digits and _ (+system.env.NCCL_MAX_CTAS=8)"
        )
    elif override[0] in "+~":
        raise ConfigError(
            f"override {override!r}: adding or deleting keys is not supported; every key already exists "
            f"(see 'ddlbench run --cfg job'), so drop the leading {override[0]!r}. The one "
            "exception sets an environment variable for every rank: +system.env.NAME=value"
        )
    if not _SAFE_OVERRIDE.fullmatch(checked):  # fullmatch: '$' alone would let a final newline through
        key, _, value = checked.partition("=")
        bad = sorted({c for c in value if not re.match(r"[A-Za-z0-9_.,:/@+\-\[\] ]", c)} or set(key))
        raise ConfigError(
            f"override {override!r}: {key} has characters that are not allowed ({''.join(bad)!r}); "
            "use letters, digits and _ . , : / @ + - [ ]"
        )


def _explain(error: Exception, overrides: Sequence[str], *, suggest: bool = True) -> str:
    text = f"{error}\n{error.__cause__ or ''}".strip()
    missing = re.search(r"Could not find '(\w+)/([^']+)'", text)
    if missing and missing.group(1) in GROUPS:
        group, value = missing.groups()
        return f"{group}={value} is not an option; choose one of: {', '.join(options(group))}"
    key = re.search(r"[Kk]ey '([^']+)' (?:is not in struct|not in)", text)
    if key:
        full = re.search(r"full_key: ([\w.]+)", text)
        name = full.group(1) if full else key.group(1)
        if name.startswith("system.env."):
            return f"{name} is not set by this system profile; add it with a leading '+': +{name}=value"
        typed = [o.lstrip("+~").partition("=")[0] for o in overrides]
        mistyped = next((k for k in typed if k == name or k.startswith(f"{name}.")), name)  # mdoel.depth: mdoel
        # the keys there are depend on the options chosen (framework=horovod has its own), not on values set
        close = close_keys(mistyped, [o for o, k in zip(overrides, typed) if k in GROUPS]) if suggest else []
        hint = f"did you mean {' or '.join(close)}? " if close else ""
        return f"{name} is not a config key; {hint}'ddlbench run --cfg job' prints every key"
    exists = re.search(r"An item is already at '([\w.]+)'", text)
    if exists:
        return f"{exists.group(1)} already exists; set it without the leading '+': {exists.group(1)}=value"
    choice = re.search(r"Invalid value '([^']*)', expected one of \[([^\]]*)\]", text)
    if choice:  # a closed set (a Choice field of an adapter's config)
        full = re.search(r"full_key: ([\w.]+)", text)
        name, allowed = (full.group(1) if full else "a key"), [a.strip() for a in choice.group(2).split(",")]
        listed = allowed[0] if len(allowed) == 1 else f"{', '.join(allowed[:-1])} or {allowed[-1]}"
        return f"{name}={choice.group(1)} is not allowed; choose {listed} (e.g. {name}={allowed[0]})"
    value = re.search(r"Value '([^']*)'(?: of type '\w+')? (?:could not be converted to|is not a valid) (\w+)", text)
    if value:
        full = re.search(r"full_key: ([\w.]+)", text)
        return f"{full.group(1) if full else 'a key'}={value.group(1)} must be of type {value.group(2)}"
    first = text.splitlines()[0] if text else type(error).__name__
    return f"cannot compose the config from {list(overrides)}: {first}"


def close_keys(name: str, overrides: Sequence[str]) -> list[str]:
    """The keys of the config these overrides compose that are spelled most like `name` (a mistyped key's
    "did you mean"), best first; none where the overrides do not compose either."""
    import difflib

    try:
        cfg = _compose(overrides, suggest=False)  # a mistake among these too: no suggestion, and no recursion
    except ConfigError:
        return []
    keys: list[str] = []

    def walk(node: dict, prefix: str) -> None:
        for key, child in node.items():
            keys.append(f"{prefix}{key}")
            if isinstance(child, dict):
                walk(child, f"{prefix}{key}.")

    walk(OmegaConf.to_container(cfg, resolve=False), "")  # unresolved: a missing value is no error here
    return difflib.get_close_matches(name, keys, n=3, cutoff=0.75)


def compose(overrides: Sequence[str]) -> DictConfig:
    """The resolved config for these overrides, or ConfigError naming the key, the value and the fix."""
    return _compose(overrides, suggest=True)


_INITIALISED: dict[str, str] = {}  # the config root GlobalHydra was initialised on by _compose
# Compositions of the shipped config's option choices (the group overrides: framework=, model=, ...), newest
# last. Hydra reads and merges every YAML file anew each time (0.14-0.4 s); a copy of a memoised one costs
# 0.02 s, and the value overrides (run.steps=3) are applied to the copy by Hydra's own code, as its compose does
# after the defaults list. A user's DDLBENCH_CONFIG is never memoised: its files may change between two calls.
_MEMO: OrderedDict[tuple[str, ...], DictConfig] = OrderedDict()
_MEMO_SIZE = 128


def _is_choice(override: str) -> bool:
    """An override Hydra takes into the defaults list (an option of a config group), or one of Hydra's own;
    the others set values of the composed config."""
    name = override.lstrip("+~").partition("=")[0].partition("@")[0]  # a group may carry its package: g@_global_
    return name in GROUPS or "/" in name or name.split(".")[0] == "hydra"  # a/b: a nested group (experiment/x)


def _compose(overrides: Sequence[str], *, suggest: bool) -> DictConfig:
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in overrides:
        check_override(override)
    schema.register()
    search_path = resources.search_path_override()  # a bad DDLBENCH_CONFIG: its own one-line error
    try:
        if search_path:
            cfg = _hydra_compose([*overrides, *search_path])
        else:
            choices = tuple(o for o in overrides if _is_choice(o))
            values = OverridesParser.create().parse_overrides([o for o in overrides if not _is_choice(o)])
            if any(v.is_sweep_override() for v in values):
                cfg = _hydra_compose(list(overrides))  # refused by Hydra in its own words (a sweep in a run)
            else:
                if choices not in _MEMO:
                    _MEMO[choices] = _hydra_compose(list(choices))
                    if len(_MEMO) > _MEMO_SIZE:
                        _MEMO.popitem(last=False)
                _MEMO.move_to_end(choices)
                cfg = copy.deepcopy(_MEMO[choices])
                ConfigLoaderImpl._apply_overrides_to_config(values, cfg)  # what Hydra's compose does with them
    except Exception as error:  # Hydra and OmegaConf raise many types; all are bad input here
        raise ConfigError(_explain(error, overrides, suggest=suggest)) from None
    _check_env_values(cfg, overrides)
    return cfg


def _hydra_compose(overrides: list[str]) -> DictConfig:
    """Hydra's composition of the shipped config with these overrides. Hydra stays initialised on the shipped
    config root between compositions (a campaign plan composes dozens: 0.28 -> 0.17 s each); anything else
    that initialised it is cleared first. A user's DDLBENCH_CONFIG travels in the overrides (search path)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    hydra = GlobalHydra.instance()
    if not (hydra.is_initialized() and _INITIALISED.get("config_dir") == str(CONF_DIR)):
        hydra.clear()
        initialize_config_dir(config_dir=str(CONF_DIR), version_base=None)
        _INITIALISED["config_dir"] = str(CONF_DIR)
    return hydra_compose(config_name="config", overrides=overrides)


def _check_env_values(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """The ranks get system.env as text: refuse a value that Hydra read as something else (true -> True,
    1e3 -> 1000.0), which would reach them changed."""
    for override in overrides:
        key, _, value = override.lstrip("+").partition("=")
        if key.startswith("system.env.") and str(cfg.system.env[key[len("system.env.") :]]) != value:
            raise ConfigError(
                f"{key}={value} would reach the ranks as {cfg.system.env[key[len('system.env.') :]]!r} "
                "(Hydra reads it as a boolean or number); write it as the program expects it, e.g. 1 for true"
            )
