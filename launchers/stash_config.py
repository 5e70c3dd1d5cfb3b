"""The Stash study's own config: `stash.<key>=<value>` beside the runs' overrides (StashConfig, typed and closed
as Hydra keys are), the experiment's study (experiment.stash: its values and its sweep of paired studies), and
the keys stash sets per run itself, which no override may. Planning and running the paired runs:
launchers/stash.py.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass

from benchmarks import resources
from benchmarks.adapter_config import Choice
from benchmarks.errors import ConfigError

CONF_DIR = resources.conf_dir() / "stash"


class StashLauncher(Choice):
    """stash.launcher: local (ddlbench run; the network run in emulated nodes) | slurm (sbatch per run)."""

    local = "local"
    slurm = "slurm"


class StashLoader(Choice):
    """stash.loader: the real-data loader of the cpu/disk pairs; none: no such pairs."""

    native = "native"
    dali = "dali"
    none = "none"


@dataclass(frozen=True, kw_only=True)
class StashConfig:
    """The study's own keys (`stash.<key>=<value>` beside the runs' overrides): a structured config, typed and
    closed by OmegaConf as the runs' config is by Hydra."""

    gpus: int = 2  # N: GPUs (ranks) of the distributed runs
    nodes: int = 2  # k: nodes of the network run (1: no network pair)
    loader: StashLoader = StashLoader.native
    repeats: int = 1  # runs per role (medians and t-intervals in the report)
    launcher: StashLauncher = StashLauncher.local
    net_bandwidth_mbit: float = 1000.0  # emulated nodes: each node's uplink (tc tbf); 0: unshaped
    net_latency_ms: float = 0.0  # emulated nodes: added one-way delay (tc netem; needs sch_netem)
    epoch_samples: int = 1_281_167  # samples of one epoch for $/epoch (ImageNet-1k train)
    prices: str = str(CONF_DIR / "prices.yaml")  # price and link table per system
    only: str = ""  # the experiment's sweep entries to plan, comma-separated (empty: every entry)


def parse_stash(overrides: list[str], *, check: bool = True) -> tuple[StashConfig, list[str]]:
    """Split `stash.key=value` overrides off and type them (StashConfig through OmegaConf: a misspelt key, a
    value of the wrong type or outside a closed set is one line naming it); the rest are the runs' Hydra
    overrides. check=False: the keys and types only, not the rules between values (an experiment's may
    settle them)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import ConfigKeyError, ValidationError

    fields = {f.name: f for f in dataclasses.fields(StashConfig)}
    kinds = typing.get_type_hints(StashConfig)
    merged = OmegaConf.structured(StashConfig)
    rest = []
    for item in overrides:
        if not item.startswith("stash."):
            rest.append(item)
            continue
        key, _, value = item.partition("=")
        name = key[len("stash.") :]
        try:
            merged = OmegaConf.merge(merged, OmegaConf.from_dotlist([f"{name}={value}"]))
        except ConfigKeyError:
            raise ConfigError(
                f"{key} is not a stash key; use one of: {', '.join('stash.' + n for n in fields)}"
            ) from None
        except ValidationError:
            kind = kinds[name]
            if issubclass(kind, Choice):
                raise ConfigError(f"{key}={value} is unknown; use {key}={kind.listed()}") from None
            example = fields[name].default
            raise ConfigError(f"{key}={value} must be of type {kind.__name__}; e.g. {key}={example}") from None
    cfg = OmegaConf.to_object(merged)
    if not check:
        return cfg, rest
    for name in ("gpus", "nodes", "repeats", "epoch_samples"):
        if getattr(cfg, name) < 1:
            raise ConfigError(f"stash.{name}={getattr(cfg, name)} must be >= 1")
    if cfg.gpus % cfg.nodes:
        raise ConfigError(
            f"stash.nodes={cfg.nodes} does not divide stash.gpus={cfg.gpus}; pick a divisor "
            "(every node runs the same number of ranks)"
        )
    if cfg.net_bandwidth_mbit < 0 or cfg.net_latency_ms < 0:
        raise ConfigError("stash.net_bandwidth_mbit and stash.net_latency_ms must be >= 0 (0: not shaped)")
    return cfg, rest


def campaign_name(cfg) -> str:
    return "stash" if cfg.run.campaign == "default" else cfg.run.campaign


# the keys stash sets per run: never an override of the study's
PER_RUN_KEYS = (
    "loader",
    "system.ranks_per_node",
    "run.dir",
    "data.cache",
    "loader.samples_per_epoch",
    "run.stash_role",
)


def check_overrides(items: list[str], *, where: str = "") -> None:
    for item in items:
        key = item.partition("=")[0]
        if key in PER_RUN_KEYS:
            raise ConfigError(
                f"{item}{where}: stash sets {key} per run itself; drop it (real-data loader: stash.loader=...)"
            )


def experiment_study(cfg, overrides: list[str]) -> tuple[StashConfig, list[tuple[str, list[str]]]]:
    """The stash config (the experiment's experiment.stash values under the command line's stash.* keys) and
    the sweep: (entry name, its Hydra overrides) per entry of experiment.stash.sweep, or one unnamed entry."""
    from omegaconf import OmegaConf

    section = OmegaConf.select(cfg, "experiment.stash", default=None)
    section = {} if section is None else OmegaConf.to_container(section, resolve=True)
    if not isinstance(section, dict):
        raise ConfigError(f"experiment.stash={section!r} must be a mapping of stash keys (gpus: 8, sweep: ...)")
    sweep = section.pop("sweep", None) or {}
    preset = [f"stash.{key}={value}" for key, value in section.items()]
    stash, _ = parse_stash([*preset, *overrides])  # the command line's come last: they win
    if not isinstance(sweep, dict) or not all(
        isinstance(v, list) and all(isinstance(o, str) for o in v) for v in sweep.values()
    ):
        raise ConfigError(
            "experiment.stash.sweep must map each entry's name to its Hydra overrides, e.g. "
            "resnet50: [model=resnet, model.depth=50]"
        )
    for name, items in sweep.items():
        check_overrides(items, where=f" (experiment.stash.sweep.{name})")
        if any(o.startswith("stash.") for o in items):
            raise ConfigError(
                f"experiment.stash.sweep.{name} sets a stash key; an entry holds Hydra overrides only, the stash "
                "keys are the study's (experiment.stash.<key>)"
            )
    if stash.only:
        if not sweep:
            raise ConfigError(
                f"stash.only={stash.only} picks sweep entries, but this study has no experiment.stash.sweep"
            )
        wanted = [w.strip() for w in stash.only.split(",") if w.strip()]
        unknown = [w for w in wanted if w not in sweep]
        if unknown:
            raise ConfigError(
                f"stash.only={stash.only}: {', '.join(unknown)} is no entry of experiment.stash.sweep; "
                f"choose from {', '.join(sweep)}"
            )
        sweep = {name: items for name, items in sweep.items() if name in wanted}
    return stash, list(sweep.items()) or [("", [])]
