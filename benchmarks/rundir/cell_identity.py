"""Which configuration a number belongs to: the run key, the cell hash, the run directory's name. Torch-free.

Everything that says which configuration a number belongs to lives here, and only here: a rank names its
directory with it, `campaign` and `stash` plan with it, the Slurm launch checks it, and analysis groups runs
with it.

- The run key (`identity`) is every resolved setting of the run (config.yaml, flattened to dotted keys) plus
  its world size and node count, minus the few keys that never change a measurement (NOT_IDENTITY: where the
  run is written, which repeat it is, progress output). Two runs with the same key are repeats of one cell; any
  other difference makes another cell.
- The directory name is readable and exact: `<framework>-<loader>-<model>-<precision>-g<W>-n<N>-b<B>-
  <cell hash>-r<repeat>`; the hash (`cell_hash`) is 8 hex digits of SHA-256 over the key.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HASH_DIGITS = 8

# settings that never change what is measured: where a run is written, which repeat it is, what it
# prints and keeps (run.keep_trace: the raw trace beside its breakdown), the campaign grid that planned
# it, the Slurm bookkeeping of its job (account, time limit, node cap) and the hosts it ran on. system.ranks_per_node is the
# local layout: the run key holds world_size and num_nodes instead, which is what the ranks really were.
NOT_IDENTITY = (
    "run.repeat",
    "run.dir",
    "run.root",
    "run.log_every",
    "run.save_params",
    "run.keep_trace",
    "run.stash_role",  # which of a Stash study's paired runs it is: the pairing, not the cell
    "campaign",
    "experiment",
    "hydra",
    "system.ranks_per_node",
    "system.account",
    "system.time_limit",
    "system.max_nodes",
    "system.network",  # a description of the machine for `ddlbench predict`, not a setting of the run
    "system.hosts",  # which machines ran it: the run key holds how many (num_nodes), as under Slurm
    "system.hostfile",
    "system.python",  # which interpreter path started the ranks: where the software is, not what was run
    "run.hang_timeout_s",  # when a stuck run is stopped: not what it measures
    # the image the ranks ran in is their software environment, as the package versions are: recorded in meta.json
    # (`container`: runtime, its version, image, digest) and compared from there, not a setting that parts cells
    "system.container",
    "system.mllog",  # MLPerf's submission keys (who, which platform, which division): a label, not a setting
    # where a node's staged copy goes and how large that disk is (data.stage=node_local): where, not what; the
    # cell holds data.stage itself
    "system.local_scratch",
    "system.local_scratch_gb",
)

# settings added after runs were recorded without them, each with the value at which a run runs as those did:
# at that value the setting is left out of the run key (and of the tables' settings: analysis/load/runs.py), so a
# run made before the setting existed and one made with it at that value are one cell; any other value is a cell
# of its own (run.stop_on_nan=true all-reduces a flag every step, which costs throughput)
ADDED_SETTING_DEFAULTS: dict[str, Any] = {
    "run.stop_on_nan": False,
    "data.stage": "none",  # reading data.path itself, as every run did before node-local staging
    "model.compile_mode": "default",  # torch.compile's own default, as model.compile=true ran before the key
    "optim.fused": False,  # torch's foreach kernels, as every run did before the key
}


def is_added_setting_default(key: str, value: Any) -> bool:
    """Whether `key` is a setting added later (ADDED_SETTING_DEFAULTS) holding the value that runs as before it existed."""
    # isinstance: a Choice (a str Enum) of a composed config is its value's str, as config.yaml has it
    return (
        key in ADDED_SETTING_DEFAULTS
        and isinstance(value, type(ADDED_SETTING_DEFAULTS[key]))
        and value == ADDED_SETTING_DEFAULTS[key]
    )


# keys of the run key that are not config settings
SIZE_KEYS = ("world_size", "num_nodes")


def flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings -> {"a.b.c": value}; lists stay lists."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = list(value) if isinstance(value, tuple) else value
    return out


def is_identity_key(key: str) -> bool:
    return not any(key == k or key.startswith(f"{k}.") for k in NOT_IDENTITY)


def identity(settings: Mapping[str, Any], *, world_size: int, num_nodes: int) -> dict[str, Any]:
    """The run key: the identity settings (a resolved config, nested or already flattened) + the run's size."""
    flat = flatten(settings) if any(isinstance(v, Mapping) for v in settings.values()) else dict(settings)
    key = {k: v for k, v in flat.items() if is_identity_key(k) and not is_added_setting_default(k, v)}
    key.update(world_size=int(world_size), num_nodes=int(num_nodes))
    return dict(sorted(key.items()))


def _canonical(value: Any) -> Any:
    # 2 and 2.0 are one setting (YAML and Hydra may disagree on which they write)
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


def key_hash(key: Mapping[str, Any]) -> str:
    """HASH_DIGITS hex digits of SHA-256 over the key as canonical JSON (sorted keys)."""
    text = json.dumps(
        {k: _canonical(v) for k, v in sorted(key.items())}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_DIGITS]


def cell_hash(settings: Mapping[str, Any], *, world_size: int, num_nodes: int) -> str:
    return key_hash(identity(settings, world_size=world_size, num_nodes=num_nodes))


# strong scaling holds the global batch, not the per-GPU one (DeepSpeed's micro batch mirrors run.per_gpu_batch)
PER_GPU_BATCH_KEYS = ("run.per_gpu_batch", "framework.train_micro_batch_size_per_gpu")


def group_hash(settings: Mapping[str, Any], *, world_size: int, mode: str = "weak") -> str:
    """The scaling curve a run belongs to: its run key without the size (weak scaling), or without the
    size and the per-GPU batch but with the global batch (strong scaling)."""
    key = {k: v for k, v in identity(settings, world_size=0, num_nodes=0).items() if k not in SIZE_KEYS}
    if mode == "strong":
        batch = key.get("run.per_gpu_batch")
        key = {k: v for k, v in key.items() if k not in PER_GPU_BATCH_KEYS}
        key["global_batch"] = None if batch is None else int(batch) * int(world_size)
    elif mode != "weak":
        raise ValueError(f"mode={mode!r}: use 'weak' or 'strong'")
    return key_hash(key)


def model_name(
    arch: str,
    depth: int | None,
    *,
    width: float | None = None,
    batch_norm: bool | None = None,
    residual: bool = True,
    size: str | None = None,
) -> str:
    """The name used in run directories and tables, from every key that shapes the network
    (benchmarks/models/configs.py): resnet50, resnet50_nobn, resnet50_noskip, vgg16, vgg16_bn,
    shufflenet_v2_x1_0, mobilenet_v2, bert_base, bert_large, retinanet. None is a record without the key:
    the family's own network (ResNet with BatchNorm, VGG without). Keys a family ignores do not show."""
    arch = str(arch)
    if arch == "bert" and size is not None:
        return f"{arch}_{size}"
    if arch == "shufflenet_v2" and width is not None:
        return f"{arch}_x{str(float(width)).replace('.', '_')}"
    if arch not in ("resnet", "vgg") or depth is None:
        return arch
    if arch == "vgg":
        return f"vgg{depth}{'_bn' if batch_norm else ''}"
    return f"resnet{depth}{'_nobn' if batch_norm is False else ''}{'_noskip' if residual is False else ''}"


def model_name_of(model: Mapping[str, Any]) -> str:
    """model_name of a model section (config.yaml's `model:`, a composed cfg.model)."""
    return model_name(
        model["arch"],
        model.get("depth"),
        width=model.get("width"),
        batch_norm=model.get("batch_norm"),
        residual=model.get("residual", True),
        size=model.get("size"),
    )


def dir_name(settings: Mapping[str, Any], *, world_size: int, num_nodes: int, repeat: int) -> str:
    """<framework>-<loader>-<model>-<precision>-g<W>-n<N>-b<B>-<cell hash>-r<repeat> of a resolved config."""
    flat = flatten(settings)
    model = model_name_of({k.removeprefix("model."): v for k, v in flat.items() if k.startswith("model.")})
    return (
        f"{flat['framework.name']}-{flat['loader.name']}-{model}-{flat['precision.name']}-g{world_size}"
        f"-n{num_nodes}-b{flat['run.per_gpu_batch']}-{cell_hash(flat, world_size=world_size, num_nodes=num_nodes)}"
        f"-r{repeat}"
    )


def run_dir(settings: Mapping[str, Any], *, world_size: int, num_nodes: int) -> Path:
    """run.dir when set, else <run.root>/<run.campaign>/<dir_name> (the same on every host of a job)."""
    flat = flatten(settings)
    if flat.get("run.dir"):
        return Path(flat["run.dir"])
    name = dir_name(flat, world_size=world_size, num_nodes=num_nodes, repeat=int(flat["run.repeat"]))
    return Path(flat["run.root"]) / str(flat["run.campaign"]) / name
