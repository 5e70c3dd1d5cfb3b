"""Cross-field checks on a composed config: ConfigError before any process group exists. And the one
setting filled in from the data: model.num_classes=auto becomes the data set's class count here
(resolve_num_classes), in the config itself, before anything is named, launched or built from it."""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from benchmarks import optim_configs
from benchmarks.adapter_config import adapter_config
from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import framework_config, node_layout
from benchmarks.models.configs import AUTO, NUM_CLASSES_WITHOUT_DATA, TaskKind, task_of
from benchmarks.rundir import cell_identity
from benchmarks.schema import staging_enabled


def validate(cfg: DictConfig, *, check_device: bool = True) -> None:
    """Raise ConfigError (one line: key, value, fix) for a config that cannot run; model.num_classes=auto
    becomes the data set's class count (resolve_num_classes: every launch path and every rank validates
    before it names a run directory or builds a model)."""
    run = cfg.run
    for key, minimum in (
        ("per_gpu_batch", 1),
        ("steps", 1),
        ("warmup_steps", 0),
        ("repeat", 0),
        ("log_every", 0),
        ("trace_steps", 0),
    ):
        if run[key] < minimum:
            raise ConfigError(f"run.{key}={run[key]} must be >= {minimum}")
    if run.epochs is not None and run.epochs < 1:
        raise ConfigError(f"run.epochs={run.epochs} must be >= 1 (or null to run run.steps steps)")
    check_hang_timeout_s(run.hang_timeout_s)
    if cfg.system.ranks_per_node < 1:
        raise ConfigError(f"system.ranks_per_node={cfg.system.ranks_per_node} must be >= 1")
    _check_system_keys(cfg)
    for key in ("campaign",):
        value = str(run[key])
        if (
            not value
            or "/" in value
            or value.startswith(".")
            or not value.replace("-", "").replace("_", "").replace(".", "").isalnum()
        ):
            raise ConfigError(
                f"run.{key}={value!r} must be letters, digits, '-', '_' or '.'; e.g. run.{key}=scaling_2026"
            )
    # each adapter option's own rules (its closed sets are checked by Hydra when the config is composed)
    for group in ("framework", "loader", "model"):
        adapter_config(cfg[group]).check()
    adapter_config(cfg.loader).check_device(str(cfg.system.device))
    optim_configs.check(cfg.optim)
    _check_optimizer_with_framework(cfg)
    _check_task(cfg)
    _check_validation(cfg)
    if cfg.loader.needs_data:
        path = cfg.data.path
        if path is None:
            variable = _env_variable(cfg.data, "path")
            if variable is not None:  # an experiment's data set comes from the environment (aach2023_scaling)
                raise ConfigError(
                    f"loader={cfg.loader.name} reads data but data.path is not set: it reads ${variable}, which "
                    f"is unset; export {variable}=<folder> or pass data.path=<folder>"
                )
            raise ConfigError(
                f"loader={cfg.loader.name} reads data but data.path is not set; "
                "make a dataset with 'ddlbench data synth --out data/synth' and pass data.path=data/synth"
            )
        if os.path.exists(path) and not os.path.isdir(path):
            raise ConfigError(
                f"data.path={path!r} is a file, not a folder; pass the dataset's folder (an ImageFolder: "
                "<class>/<image>.jpg), or make one with 'ddlbench data synth --out data/synth' and pass "
                "data.path=data/synth"
            )
        if not os.path.isdir(path):
            raise ConfigError(
                f"data.path={path!r} is not a directory; check the path or run 'ddlbench data synth --out {path}'"
            )
    _check_staging(cfg)
    resolve_num_classes(cfg)
    if check_device and cfg.system.device == "cuda":
        import torch

        available = torch.cuda.device_count()
        if available == 0:
            raise ConfigError(
                f"system={cfg.system.name} wants CUDA GPUs but this machine has none; use system=local_cpu"
            )
        if cfg.system.ranks_per_node > available:
            raise ConfigError(
                f"system.ranks_per_node={cfg.system.ranks_per_node} but this node has {available} GPU(s); "
                f"use system.ranks_per_node={available} or fewer"
            )


def _check_staging(cfg: DictConfig) -> None:
    """data.stage=node_local needs data to copy and a place on the node to copy it to."""
    if not staging_enabled(cfg.data):
        return
    if not cfg.loader.needs_data:
        raise ConfigError(
            f"data.stage=node_local but loader={cfg.loader.name} reads no data set; drop data.stage or pick a "
            "loader that reads data.path (loader=native, loader=dali)"
        )
    if not cfg.system.local_scratch:
        raise ConfigError(
            f"data.stage=node_local but system={cfg.system.name} names no system.local_scratch; pass "
            "system.local_scratch=<a folder on the node's own disk> (a system profile may say local_scratch: $TMPDIR, "
            "expanded on the node) or data.stage=none"
        )


def _env_variable(node: DictConfig, key: str) -> str | None:
    """The environment variable node.key is read from (`${oc.env:NAME,...}`), or None when it is not."""
    raw = OmegaConf.to_container(node, resolve=False).get(key)
    match = re.fullmatch(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)(,[^}]*)?\}", raw) if isinstance(raw, str) else None
    return match[1] if match else None


def _check_system_keys(cfg: DictConfig) -> None:
    """A system key the profile's device does not use (the `devices` of its field in schema.SystemConfig:
    system.gpus_per_node on a CPU profile) would change nothing in the run yet name a cell of its own (every
    system.* setting is in the cell hash): refused, with the key, its value and the fix."""
    from benchmarks.schema import SystemConfig

    system, device = cfg.system, str(cfg.system.device)
    for key in dataclasses.fields(SystemConfig):
        devices = [str(d) for d in key.metadata.get("devices", ())]
        if devices and device not in devices and system.get(key.name) != key.default:
            users = " or ".join(f"system.device={d}" for d in devices)
            raise ConfigError(
                f"system.{key.name}={system.get(key.name)} but system={system.name} computes on "
                f"system.device={device}, which uses no {key.name} (only {users} does); drop it "
                f"(system.{key.name}={key.default}) or pick a system profile with {users}"
            )


def host_cpus(*, pid: int = 0) -> int | None:
    """The CPUs this host gives the job's ranks: a Slurm job's on this node (SLURM_CPUS_ON_NODE), else those
    process `pid` may run on (0: this one; a rank asks its launcher, as it binds itself to its share of them:
    system.cpu_bind=cores), which a taskset or a container's cpuset limits, else the machine's. None where
    the OS cannot say."""
    slurm = os.environ.get("SLURM_CPUS_ON_NODE", "")
    if slurm.isdigit() and int(slurm) > 0:
        return int(slurm)
    try:
        return len(os.sched_getaffinity(pid))
    except (AttributeError, OSError):  # no sched_getaffinity (macOS), or the process is gone
        return os.cpu_count()


def oversubscription(*, ranks: int, cores: int | None) -> dict:
    """meta.json's record of the host's CPUs: `oversubscribed` when more ranks run on the host than it has
    CPUs (ranks then share a core and their step times measure the sharing, not the framework), with both
    numbers (host_cores: logical CPUs, as host_cpus counts them; None where unknown)."""
    return {"oversubscribed": cores is not None and ranks > cores, "host_ranks": ranks, "host_cores": cores}


def _check_optimizer_with_framework(cfg: DictConfig) -> None:
    """LARS scales each weight tensor by its own trust ratio: frameworks that flatten or shard the tensors
    the optimizer sees (DeepSpeed ZeRO >= 1, FSDP) would make it plain momentum SGD or cost a collective per
    parameter, so they are refused."""
    if str(cfg.optim.name) != "lars":
        return
    name = cfg.framework.name
    if framework_config(cfg.framework).shards_tensors():
        raise ConfigError(
            f"optim.name=lars with framework={name} "
            + (f"(framework.zero_stage={cfg.framework.zero_stage}) " if name == "deepspeed" else "")
            + "would see flattened or sharded tensors, not layers; use framework=ddp or horovod, or "
            "framework=deepspeed framework.zero_stage=0, or optim.name=sgd"
        )


def _check_task(cfg: DictConfig) -> None:
    """The model's task (benchmarks/tasks/) against the loader, the framework's layout and the loss: a loader
    yields the batches of the tasks it declares (LoaderConfig.TASKS; only synthetic has token sequences and
    boxes); DataParallel's scatter splits a detection batch's per-image boxes over its GPUs; label smoothing
    is classification's."""

    task, arch = task_of(cfg.model.arch), cfg.model.arch
    if task not in adapter_config(cfg.loader).TASKS:
        raise ConfigError(
            f"loader={cfg.loader.name} yields images and class labels, not the {task.value.replace('_', ' ')} "
            f"batches model={arch} trains on; use loader=synthetic (the task makes its own data: docs/models.md)"
        )
    devices = node_layout(cfg)[1]
    if task is TaskKind.detection and devices > 1:
        raise ConfigError(
            f"model={arch} with framework={cfg.framework.name} on {devices} GPUs per process: DataParallel "
            "would split each image's boxes over the GPUs; use framework=ddp (one process per GPU) or "
            "system.ranks_per_node=1"
        )
    if task is not TaskKind.classification and cfg.optim.label_smoothing:
        raise ConfigError(
            f"optim.label_smoothing={cfg.optim.label_smoothing} smooths class labels, which model={arch} "
            f"({task.value.replace('_', ' ')}) has none of; drop it (optim.label_smoothing=0)"
        )


def _check_validation(cfg: DictConfig) -> None:
    """data.val_path / data.val_split / run.eval_every_steps|epochs / run.target_top1: one held-out set, a
    loader that reads data, and evaluations during training for a target to stop at."""
    data, run = cfg.data, cfg.run
    if not 0.0 <= data.val_split < 1.0:
        raise ConfigError(
            f"data.val_split={data.val_split} must be in [0, 1): the share of data.path held out, "
            "e.g. data.val_split=0.1"
        )
    if data.val_path and data.val_split:
        raise ConfigError(
            f"data.val_path={data.val_path} and data.val_split={data.val_split} both set; choose one "
            "held-out set (data.val_split=0 to use the folder)"
        )
    for key in ("eval_every_steps", "eval_every_epochs"):
        if run[key] < 0:
            raise ConfigError(f"run.{key}={run[key]} must be >= 0 (0: evaluate after the last step only)")
    if run.eval_every_steps and run.eval_every_epochs:
        raise ConfigError(
            f"run.eval_every_steps={run.eval_every_steps} and run.eval_every_epochs={run.eval_every_epochs} "
            "both set; choose one cadence (the other =0)"
        )
    held_out = bool(data.val_path or data.val_split)
    for key in ("eval_every_steps", "eval_every_epochs", "target_top1"):
        if run[key] and not held_out:
            raise ConfigError(
                f"run.{key}={run[key]} needs a validation set: pass data.val_split=0.1 (held out "
                "of data.path) or data.val_path=DIR"
            )
    if run.target_top1 is not None:
        if not 0.0 < run.target_top1 <= 1.0:
            raise ConfigError(
                f"run.target_top1={run.target_top1} must be a fraction in (0, 1], e.g. run.target_top1=0.759"
            )
        if not (run.eval_every_steps or run.eval_every_epochs):
            raise ConfigError(
                f"run.target_top1={run.target_top1} needs evaluations during training to stop at: set "
                "run.eval_every_epochs=1 or run.eval_every_steps=N"
            )
    if held_out and not cfg.loader.needs_data:
        raise ConfigError(
            f"loader={cfg.loader.name} reads no data set, so there is none to hold out; use a loader "
            "that reads data.path (loader=native) or drop data.val_path / data.val_split"
        )
    if data.val_path and not os.path.isdir(data.val_path):
        raise ConfigError(
            f"data.val_path={data.val_path!r} is not a directory; pass the held-out folder "
            "(the same layout as data.path)"
        )


def data_classes(cfg: DictConfig, *, strict: bool = True) -> tuple[int, str] | None:
    """(the classes of the run's data set, as a model's head needs them: the largest label + 1; what was
    counted), or None where there is nothing to count: a task without class labels (question answering,
    detection), or no data.path. A folder of *.tfrecord files has its labels' range (tfrecord.label_range:
    dataset.json, else the records); any other is an ImageFolder, whose labels are its class folders in
    sorted order (torchvision's find_classes), as every loader reads it. With data.val_path, the larger of
    the two. The synthetic loader counts data.path too when it is given: it then trains the model the
    real-data runs it is compared with train (Stash's pairs, a campaign's loader axis). strict: a folder
    that cannot be counted (missing, empty, unreadable) is a ConfigError, as auto needs its count; else it
    counts for nothing (an explicit number needs none; check_data says what is wrong with the data)."""
    if task_of(cfg.model.arch) is not TaskKind.classification or not cfg.data.path:
        return None
    counts = []
    for key, name in (("data.path", "path"), ("data.val_path", "val_path")):
        try:
            counts.append(_folder_classes(key, cfg.data[name]))
        except ConfigError:
            if strict:
                raise
    return max((c for c in counts if c is not None), key=lambda c: c[0], default=None)


def _data_classes_for(cfg: DictConfig) -> tuple[int, str] | None:
    """data_classes() of the data set an explicit model.num_classes is held to: the one the loader reads."""
    return data_classes(cfg, strict=False) if cfg.loader.needs_data else None


def resolved_num_classes(cfg: DictConfig) -> int | str:
    """model.num_classes as the run has it: auto is the data set's class count (data_classes), or
    NUM_CLASSES_WITHOUT_DATA where there is none; an explicit value as given."""
    if cfg.model.num_classes != AUTO:
        return cfg.model.num_classes
    counted = data_classes(cfg)
    return NUM_CLASSES_WITHOUT_DATA if counted is None else counted[0]


def resolve_run_dir(cfg: DictConfig, *, world_size: int, num_nodes: int) -> Path:
    """run.dir when given, else runs/<campaign>/<readable name>-<cell hash>-r<repeat> (benchmarks/rundir/)."""
    return cell_identity.run_dir(settings(cfg), world_size=world_size, num_nodes=num_nodes)


def settings(cfg: DictConfig) -> dict:
    """The resolved config as plain data: what config.yaml holds and the run key is made of, with
    model.num_classes=auto as the number validate() writes (a config named before it is validated gets
    the run directory its run will have)."""
    out = OmegaConf.to_container(cfg, resolve=True)
    out["model"]["num_classes"] = resolved_num_classes(cfg)
    return out


def resolve_num_classes(cfg: DictConfig) -> None:
    """model.num_classes=auto -> the number (resolved_num_classes), written into cfg: config.yaml, the run key and
    the model's head see the count, never the word. An explicit number below the class count of a data set
    the loader reads is a ConfigError: its larger labels would have no output (cross-entropy fails, or top-1
    reads 0 where chance is 1/classes). A larger one runs, with a warning (warnings())."""
    if cfg.model.num_classes == AUTO:
        cfg.model.num_classes = resolved_num_classes(cfg)
        return
    counted, given = _data_classes_for(cfg), cfg.model.num_classes
    if counted is not None and isinstance(given, int) and given < counted[0]:
        raise ConfigError(
            f"model.num_classes={given} but the data set has {counted[0]} classes ({counted[1]}): labels "
            f"{given}-{counted[0] - 1} have no output; pass model.num_classes={counted[0]} or auto"
        )


def _folder_classes(key: str, path: str | None) -> tuple[int, str] | None:
    if not path:
        return None
    root = os.path.abspath(path)
    if not os.path.isdir(root):
        raise ConfigError(
            f"{key}={path!r} is not a directory, and model.num_classes=auto counts its classes; fix the path, "
            f"or pass model.num_classes=<n>"
        )
    count, what = _counted_classes(key, root, _modified_ns(root))
    if count < 1:
        raise ConfigError(
            f"{key}={path} holds no class folders (<class>/<image>.jpg) and no labelled *.tfrecord files, so "
            "model.num_classes=auto has none to count; pass an ImageFolder (e.g. from 'ddlbench data synth "
            "--out DIR') or model.num_classes=<n>"
        )
    return count, f"{what} in {key}={path}"


@functools.lru_cache(maxsize=256)
def _counted_classes(key: str, root: str, _changed_ns) -> tuple[int, str]:
    """Counted once per (folder, modification time), as check_data's samples: a campaign's cells share it."""
    from benchmarks.data.tfrecord import find_tfrecords, label_range

    if find_tfrecords(Path(root)):
        return label_range(Path(root), key=key)
    try:
        return sum(1 for entry in os.scandir(root) if entry.is_dir()), "class folders"
    except OSError as error:
        raise ConfigError(
            f"{key}={root} cannot be listed ({error.strerror}); fix its permissions or pass another {key}"
        ) from None


def warnings(cfg: DictConfig) -> list[str]:
    """One-line warnings about a config that runs but measures less than it seems to: more ranks on this host
    than it has CPUs (oversubscription: meta.json records it too); a loader given far fewer CPU workers than
    the rank has CPUs (benchmarks/loaders/configs.py: one rule for every loader); a model head with more
    classes than the data set has."""
    from benchmarks.loaders.configs import loader_cpus

    out = []
    load = oversubscription(ranks=node_layout(cfg)[0], cores=host_cpus())
    if load["oversubscribed"]:
        out.append(
            f"system.ranks_per_node={cfg.system.ranks_per_node} starts {load['host_ranks']} ranks on this host's "
            f"{load['host_cores']} CPU(s): ranks share cores, so step times measure the sharing (meta.json "
            f"records oversubscribed: true and the tables mark the run); use system.ranks_per_node="
            f"{load['host_cores']} or fewer"
        )
    counted, given = _data_classes_for(cfg), cfg.model.num_classes
    if counted is not None and isinstance(given, int) and given > counted[0]:
        out.append(
            f"model.num_classes={given} but the data set has {counted[0]} classes ({counted[1]}): "
            f"{given - counted[0]} of the head's outputs are for labels it never has (chance top-1 is "
            f"1/{counted[0]}, not 1/{given}); pass model.num_classes={counted[0]} or auto"
        )
    workers = adapter_config(cfg.loader).cpu_workers()
    fair = loader_cpus(cfg.system.cpus_per_rank)
    if workers is not None and workers[1] < fair / 2:
        key, value = workers
        out.append(
            f"{key}={value} gives loader={cfg.loader.name} {value} of the rank's {cfg.system.cpus_per_rank} CPUs "
            f"(system.cpus_per_rank): its figures are a handicapped loader's, not a fair comparison; leave "
            f"the default ({fair}: the rank's CPUs less one) or pass {key}={fair}"
        )
    return out


# the files each loader reads: torchvision's ImageFolder (native), DALI's file reader, nvJPEG (native_gpu)
IMAGE_SUFFIXES = {
    "native": (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"),
    "dali": (".jpg", ".jpeg", ".png"),
    "native_gpu": (".jpg", ".jpeg"),
}


def check_data(cfg: DictConfig, *, world_size: int) -> None:
    """What the submit host can tell about the data set before any rank starts (the ranks do not scan it:
    on a parallel file system a thousand ranks listing a million files is a load of its own): it holds
    the loader's files, enough of them for one step of every rank (world_size x run.per_gpu_batch), and
    they can be read. Counting stops once there are enough."""
    if not cfg.loader.needs_data or cfg.data.path is None:
        return
    root = os.path.abspath(cfg.data.path)
    needed = world_size * int(cfg.run.per_gpu_batch)
    # the counts are kept per (folder, its modification time): a campaign checks one data set for many
    # cells, and a data set written anew at the same path in the same process is checked afresh
    changed_ns = _modified_ns(root)
    if cfg.loader.get("reader") == "tfrecord":
        files, count = _tfrecord_samples(root, needed, changed_ns)
        what = "TFRecord samples (lines of the .idx files)"
    else:
        suffixes = IMAGE_SUFFIXES.get(str(cfg.loader.name), IMAGE_SUFFIXES["native"])
        files, count = _imagefolder_samples(root, needed, suffixes, changed_ns)
        what = f"images ({', '.join(suffixes)}) in class folders"
    if count == 0:
        fix = (
            "write them with 'ddlbench data convert --from IMAGEFOLDER --out DIR'"
            if what.startswith("TFRecord")
            else "pass an ImageFolder (<class>/<image>.jpg), e.g. from 'ddlbench data synth --out DIR'"
        )
        raise ConfigError(f"data.path={cfg.data.path} holds no {what} for loader={cfg.loader.name}; {fix}")
    if count < needed:
        raise ConfigError(
            f"data.path={cfg.data.path} holds {count} samples, but one step of {world_size} rank(s) at "
            f"run.per_gpu_batch={cfg.run.per_gpu_batch} needs {needed}; use fewer GPUs, a smaller "
            "run.per_gpu_batch or a larger data set"
        )
    try:
        with open(files[0], "rb") as f:
            f.read(16)
    except OSError as error:
        raise ConfigError(
            f"data.path={cfg.data.path}: {files[0]} cannot be read ({error.strerror}); fix the "
            "permissions (the ranks read every file) or pass another data.path"
        ) from None


def _modified_ns(root: str) -> int | None:
    try:
        return os.stat(root).st_mtime_ns
    except OSError:
        return None


@functools.lru_cache(maxsize=256)
def _imagefolder_samples(root: str, needed: int, suffixes: tuple[str, ...], _changed_ns) -> tuple[list[str], int]:
    first, count = [], 0
    try:
        classes = sorted(e.path for e in os.scandir(root) if e.is_dir())
    except OSError:
        return [], 0
    for folder in classes:
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.lower().endswith(suffixes):
                        count += 1
                        if not first:
                            first.append(entry.path)
                        if count >= needed:
                            return first, count
        except OSError as error:
            raise ConfigError(
                f"data.path={root}: the class folder {folder} cannot be read ({error.strerror}); fix its "
                "permissions (the ranks list every folder) or pass another data.path"
            ) from None
    return first, count


@functools.lru_cache(maxsize=256)
def _tfrecord_samples(root: str, needed: int, _changed_ns) -> tuple[list[str], int]:
    from benchmarks.data.tfrecord import check_indexes, find_tfrecords

    pairs, count = find_tfrecords(Path(root)), 0
    check_indexes(root, pairs)
    for _, index in pairs:
        with open(index, "rb") as f:
            count += sum(1 for _ in f)
        if count >= needed:
            break
    return [str(record) for record, _ in pairs], count


def check_hang_timeout_s(hang_timeout_s: float | None) -> None:
    """run.hang_timeout_s is seconds > 0, 0 (no hang watchdog) or null (derived: launchers/lifecycle/watchdog.py)."""
    if hang_timeout_s is not None and (hang_timeout_s < 0 or hang_timeout_s != hang_timeout_s):
        raise ConfigError(
            f"run.hang_timeout_s={hang_timeout_s} is not allowed; pass seconds > 0, 0 (no hang watchdog) or "
            "null (derived from the steps: docs/frameworks.md)"
        )
