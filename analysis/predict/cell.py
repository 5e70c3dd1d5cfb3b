"""What a prediction is for and what a calibration run measured: `unmeasured` names, in one line, what the
calibration did not measure and what to measure.

The settings compared are derived from the config, not listed: every key of the groups that shape one rank's
compute (COMPUTE_GROUPS: the model and its keys, the precision and its keys) and the keys beyond them that do
(COMPUTE_KEYS), as the calibration run's config.yaml holds them against the configuration predicted. A key
that a run's config.yaml lacks (written before the key existed) has the value its options give today.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from enum import Enum
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.device import rank_words

# what a calibration run must share with the prediction: the compute it measured is for these alone
SAME_CELL = ("model", "per_gpu_batch", "precision")
# the config groups every key of which shapes one rank's compute, and the keys beyond them that do (the
# optimizer's step); a run's per-GPU batch is SAME_CELL's
COMPUTE_GROUPS = ("model", "precision")
COMPUTE_KEYS = ("optim.name",)
# values that a run decides and writes into its config.yaml (model.num_classes=auto: the data set's count):
# asked for, they match what the calibration run decided
DECIDED_BY_THE_RUN = {"model.num_classes": "auto"}


def _plain(value: Any) -> Any:
    """A config value as compared: an enum as its value, a list as a tuple."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return value


def compute_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """The dotted keys of a config (resolved, or a config.yaml) that shape the compute, with their values."""
    out = {}
    for group in COMPUTE_GROUPS:
        out.update({f"{group}.{k}": _plain(v) for k, v in (config.get(group) or {}).items() if k != "_target_"})
    for dotted in COMPUTE_KEYS:
        group, _, key = dotted.partition(".")
        if key in (config.get(group) or {}):
            out[dotted] = _plain(config[group][key])
    return out


@functools.cache
def _option_settings(arch: str, precision: str) -> dict[str, Any]:
    """compute_settings of the options a run chose (model=<arch>, precision=<name>) as they are today: what a
    config.yaml written before a key existed ran with."""
    from omegaconf import OmegaConf

    from benchmarks.config import compose, options

    overrides = [f"model={arch}"] if arch in options("model") else []
    overrides += [f"precision={precision}"] if precision in options("precision") else []
    return compute_settings(OmegaConf.to_container(compose(overrides), resolve=True))


def run_settings(run_dir: Path) -> dict[str, Any]:
    """compute_settings of a run from its config.yaml, over its options' values for keys it lacks."""
    import yaml

    config = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    model, precision = config.get("model") or {}, config.get("precision") or {}
    return {**_option_settings(str(model.get("arch")), str(precision.get("name"))), **compute_settings(config)}


def run_system(run_dir: Path) -> dict[str, Any]:
    """Where a run computed: its system's name and device (config.yaml), its GPU's name (meta.json), its ranks."""
    import json

    import yaml

    config = yaml.safe_load((Path(run_dir) / "config.yaml").read_text()) or {}
    system = config.get("system") or {}
    meta_file = Path(run_dir) / "meta.json"
    meta = json.loads(meta_file.read_text()) if meta_file.is_file() else {}
    gpus = (meta.get("hardware") or {}).get("gpus") or []
    return {
        "name": str(system.get("name")),
        "device": str(system.get("device") or "cpu"),
        "gpu": str(gpus[0]) if gpus else "",
        "ranks": int(meta.get("world_size") or 1),
    }


def device_words(system: Mapping[str, Any]) -> str:
    """What a run computed on: CPU, or its GPU's name (GPUs where meta.json names none)."""
    return "CPU" if system["device"] == "cpu" else (system["gpu"] or "GPUs")


def ranks_words(system: Mapping[str, Any]) -> str:
    """A run's ranks as they were, in the words of every table (analysis.device): '2 CPU ranks', '1 GPU
    (NVIDIA H200)'."""
    count = rank_words(system["device"]).count(system["ranks"])
    return count + (f" ({system['gpu']})" if system["device"] != "cpu" and system["gpu"] else "")


def other_device(run: str, measured: Mapping[str, Any], system: Mapping[str, Any]) -> str | None:
    """One line when the run computed on another system than the one predicted (the profiles name no GPU model,
    so another system's name is another device), else None."""
    if measured["name"] == system["name"] and measured["device"] == system["device"]:
        return None
    theirs = "GPUs" if system["device"] != "cpu" else "CPUs"
    return (
        f"{run} computed on {device_words(measured)} (system={measured['name']}), not on "
        f"system={system['name']}'s {theirs}"
    )


def loader_case(loader: dict[str, Any]) -> str:
    """The loader as `ddlbench loaderbench` names its cases (benchmarks/loaderbench.py's loader_overrides):
    its name, dali-tfrecord for DALI's TFRecord reader, native_gpu-nvimgcodec for nvImageCodec."""
    name = str(loader["name"])
    if name == "dali" and str(loader.get("reader", "file")) == "tfrecord":
        return "dali-tfrecord"
    if name == "native_gpu" and str(loader.get("gpu_decoder", "torchvision")) == "nvimgcodec":
        return "native_gpu-nvimgcodec"
    return name


# how a framework holds the parameters: a sharded mode's measured compute holds its own host work per unit
# (gathers issued, shards copied in and out), which a replicated mode's does not, and the other way round;
# FSDP2's units are its shard_unit
REPLICATED = "replicated"


def sharding_of(framework: dict[str, Any]) -> str:
    """replicated, fsdp:<shard_unit> or zero3: how the framework holds the parameters (sharding_words)."""
    name = str(framework.get("name"))
    if name == "fsdp":
        return f"fsdp:{framework.get('shard_unit') or 'children'}"
    if name == "deepspeed" and int(framework.get("zero_stage", 0) or 0) == 3:
        return "zero3"
    return REPLICATED


def sharding_words(sharding: str) -> str:
    """A sharding as the overrides that select it."""
    if sharding.startswith("fsdp:"):
        return f"framework=fsdp framework.shard_unit={sharding.removeprefix('fsdp:')}"
    if sharding == "zero3":
        return "framework=deepspeed framework.zero_stage=3"
    return "framework=ddp, horovod or deepspeed with framework.zero_stage 0-2"


def unmeasured(run: str, measured: dict[str, Any], cell: dict[str, Any]) -> str | None:
    """One line naming what the calibration run `run` did not measure and what to measure, or None."""
    for key in SAME_CELL:
        if str(measured[key]) != str(cell[key]):
            return (
                f"{key}={cell[key]}: the calibration run {run} ran {key}={measured[key]}; pass --from a run of "
                f"{key}={cell[key]} (ddlbench run ... on a GPU of the kind it ran on), or predict {key}={measured[key]}"
            )
    asked_settings, ran_settings = cell.get("settings", {}), measured.get("settings", {})
    for key, value in asked_settings.items():
        ran = ran_settings.get(key)
        decided = key in DECIDED_BY_THE_RUN and DECIDED_BY_THE_RUN[key] in (value, ran)
        if key not in ran_settings or value == ran or decided:
            continue
        return (
            f"{key}={_word(value)}: the calibration run {run} ran {key}={_word(ran)}; pass --from a run of "
            f"{key}={_word(value)} (ddlbench run ... on a GPU of the kind it ran on), or predict {key}={_word(ran)}"
        )
    if measured.get("sharding", REPLICATED) != cell.get("sharding", REPLICATED):
        asked, ran = sharding_words(cell["sharding"]), sharding_words(measured["sharding"])
        return (
            f"{asked}: the calibration run {run} ran {ran}, whose compute lacks (or holds) the sharded mode's own "
            f"work per unit; pass --from a run of {asked}"
        )
    if measured["loader"] != cell["loader"]:
        asked = loader_words(cell["loader"])
        return (
            f"{asked}: the calibration run {run} was fed by {loader_words(measured['loader'])}; pass --from "
            f"a run with {asked}, or --loader-capacity FILE from 'ddlbench loaderbench' on that machine"
        )
    return None


def _word(value: Any) -> str:
    """A value as an override spells it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "[" + ",".join(_word(v) for v in value) + "]"
    return str(value)


def loader_words(case: str) -> str:
    """A loader case as the overrides that select it."""
    return {
        "dali-tfrecord": "loader=dali loader.reader=tfrecord",
        "native_gpu-nvimgcodec": "loader=native_gpu loader.gpu_decoder=nvimgcodec",
    }.get(case, f"loader={case}")


def config_of(flat: dict[str, Any], prefix: str) -> dict[str, Any]:
    """config.<prefix>.<key> columns of a runs row -> {key: value} (one level; lists stay JSON text)."""
    start = f"config.{prefix}."
    return {k[len(start) :]: v for k, v in flat.items() if k.startswith(start) and not pd.isna(v)}


def measured_cell(row: Any) -> dict[str, Any]:
    """What a run of the runs table measured, as `unmeasured` compares it: SAME_CELL, the settings that shape
    its compute (run_settings), its loader case and its parameter sharding."""
    flat = row.to_dict() if hasattr(row, "to_dict") else dict(row)
    loader = {"name": flat.get("loader"), **config_of(flat, "loader")}
    framework = {"name": flat.get("framework"), **config_of(flat, "framework")}
    return {
        **{k: flat.get(k) for k in SAME_CELL},
        "settings": run_settings(Path(flat["run_dir"])),
        "loader": loader_case(loader),
        "sharding": sharding_of(framework),
    }
