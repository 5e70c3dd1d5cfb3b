"""What every adapter's config shares (framework, loader and model options). Torch-free.

Each adapter declares its settings as a dataclass next to itself, in a torch-free `configs.py` of its
package (benchmarks/frameworks/configs.py, loaders/configs.py, models/configs.py), not in the
adapter's own module: campaign planning, `ddlbench stash`, analysis and Hydra's ConfigStore compose
and check configs on machines and in processes that never import torch, horovod, deepspeed or DALI,
while an adapter module imports torch at its top. The dataclass is the one home of each default;
the option YAMLs in conf/ hold only what an option changes (its `name`, `_target_`, real overrides).

- `Choice`: a closed set of values, as a str-valued Enum whose member names ARE their values.
  OmegaConf looks a member up by name and writes names to YAML, so YAML, overrides and config.yaml
  keep the plain strings, and a bad value fails at compose time with the allowed names.
- `AdapterConfig`: the base dataclass. `check()` is an option's ONE place for the rules across its
  fields (run by validate() before anything launches, and by the adapter's constructor).
- `Installation`: what an adapter's library looks like on this machine (`ddlbench doctor`).
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Self

from benchmarks.errors import ConfigError

# what a dataclass field holds before composition fills it: MISSING, or an unresolved ${...}
_UNSET_PREFIXES = ("???", "${")


class Choice(enum.StrEnum):
    """A closed set of string values. Members are declared `name = "name"` (tests hold them equal)."""

    @classmethod
    def listed(cls) -> str:
        """'a, b or c': the allowed values as error messages name them."""
        names = [m.value for m in cls]
        return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"

    @classmethod
    def parse(cls, key: str, value: object) -> Self:
        """The member for `value` (a member or its string), or ConfigError naming the key, the allowed
        values and a fix."""
        if isinstance(value, cls):
            return value
        try:
            return cls(value)
        except ValueError:
            first = next(iter(cls)).value
            raise ConfigError(f"{key}={value!r} is not allowed; choose {cls.listed()} (e.g. {key}={first})") from None


@functools.cache
def _choice_fields(cls: type) -> dict[str, type[Choice]]:
    """The fields of a config dataclass typed with a Choice (or Choice | None)."""
    hints = typing.get_type_hints(cls)
    out = {}
    for f in fields(cls):
        hint = hints[f.name]
        if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
            hint = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
        if isinstance(hint, type) and issubclass(hint, Choice):
            out[f.name] = hint
    return out


def is_unset(value: object) -> bool:
    """A field composition has not filled yet: MISSING or an interpolation such as ${system.cpus_per_rank}."""
    return isinstance(value, str) and value.startswith(_UNSET_PREFIXES)


@dataclass
class AdapterConfig:
    """The base of every adapter option's config. GROUP is the config group it belongs to (for messages)."""

    GROUP: ClassVar[str]

    def __post_init__(self) -> None:
        # composition (OmegaConf.to_object) hands in members already; a config built in Python may pass
        # the plain strings, which become members here (or a one-line error naming the allowed values)
        for name, choice in _choice_fields(type(self)).items():
            value = getattr(self, name)
            if value is not None and not is_unset(value):
                setattr(self, name, choice.parse(self.key(name), value))

    def settings(self) -> dict[str, Any]:
        """The option's settings as plain values (a Choice as its string), for meta.json: every field but
        the ones that name the option (`_target_`, `name`)."""
        return {
            f.name: (v.value if isinstance(v := getattr(self, f.name), Choice) else v)
            for f in fields(self)
            if f.name not in ("_target_", "name")
        }

    def key(self, name: str) -> str:
        """The dotted config key of one of this config's fields, as users override it."""
        return f"{self.GROUP}.{name}"

    def check(self) -> None:
        """The rules across this option's fields: ConfigError (key, value, what is allowed, the fix).
        Options that have such rules override this; the value sets are the fields' types."""

    def at_least(self, name: str, minimum: float, *, hint: str = "") -> None:
        """ConfigError unless field `name` is a number >= minimum."""
        value = getattr(self, name)
        if is_unset(value):
            raise ConfigError(
                f"{self.key(name)}={value!r} is unresolved: it is filled in when the config is composed "
                f"(conf/); a config built in Python passes {name}=<number>"
            )
        if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
            raise ConfigError(f"{self.key(name)}={value!r} must be >= {minimum}{hint}")


@dataclass(frozen=True, slots=True)
class Installation:
    """What `ddlbench doctor` says about an adapter's library: usable or not, what was found, the fix."""

    ok: bool
    detail: str
    fix: str = ""
    # what a run on GPUs needs beyond `ok` (Horovod: its NCCL operations); gpu_fix says how to get it
    gpu_ok: bool = True
    gpu_fix: str = ""


def adapter_config(node: Any) -> AdapterConfig:
    """An option's own config object (its dataclass), from its node of a composed config, resolved:
    closed sets are Choice members, interpolations such as ${system.cpus_per_rank} are filled in."""
    from omegaconf import OmegaConf

    config = OmegaConf.to_object(node)
    assert isinstance(config, AdapterConfig), type(config)
    return config


def config_default(cls: type, name: str) -> Any:
    """The default of field `name` of a config dataclass (its one home), for code that needs the value
    outside a composed config."""
    (f,) = [f for f in fields(cls) if f.name == name]
    return f.default
