"""What a prediction is for and what a calibration run measured: `unmeasured` names, in one line, what the
calibration did not measure and what to measure."""

from __future__ import annotations

from typing import Any

import pandas as pd

# what a calibration run must share with the prediction: the compute it measured is for these alone
SAME_CELL = ("model", "per_gpu_batch", "precision")


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
    """What a run of the runs table measured, as `unmeasured` compares it: SAME_CELL and its loader case."""
    flat = row.to_dict() if hasattr(row, "to_dict") else dict(row)
    loader = {"name": flat.get("loader"), **config_of(flat, "loader")}
    framework = {"name": flat.get("framework"), **config_of(flat, "framework")}
    return {**{k: flat.get(k) for k in SAME_CELL}, "loader": loader_case(loader), "sharding": sharding_of(framework)}
