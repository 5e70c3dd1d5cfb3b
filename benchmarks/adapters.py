"""The one place that turns config groups into objects (framework, loader, model, task, optimizer)."""

from __future__ import annotations

import dataclasses
import importlib
from typing import Any

import torch
from omegaconf import DictConfig

from benchmarks import distenv, tasks
from benchmarks.adapter_config import adapter_config, config_default
from benchmarks.errors import ConfigError
from benchmarks.frameworks.base import Framework
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.loaders.base import Loader, LoaderContext
from benchmarks.loaders.configs import CONFIGS as LOADERS
from benchmarks.models import build_model
from benchmarks.models.configs import check_library
from benchmarks.schema import AmpDtype
from benchmarks.tasks import Task

AMP_DTYPES = {None: None, AmpDtype.bfloat16: torch.bfloat16, AmpDtype.float16: torch.float16}


def _import_target(group: str, option: str, target: str) -> Any:
    module_name, _, attr = target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ConfigError(f"{group}={option} needs the python module {e.name!r}; see README#install") from None
    return getattr(module, attr)


def adapter_class(group: str, option: str) -> type:
    """The adapter class of an option ('framework', 'horovod'), from its config's `_target_`; its module
    imports torch, its library (horovod, deepspeed, DALI) only when used."""
    configs = {"framework": FRAMEWORKS, "loader": LOADERS}[group]
    if option not in configs:
        raise ConfigError(f"{group}={option} is not an option; choose one of: {', '.join(configs)}")
    return _import_target(group, option, config_default(configs[option], "_target_"))


def _instantiate(group: str, node: DictConfig) -> Any:
    """Call the option's adapter class with its config object (adapters raise ConfigError when their
    library is missing, with the install command)."""
    config = adapter_config(node)
    return _import_target(group, config.name, config._target_)(config)


def build_framework(cfg: DictConfig) -> Framework:
    return _instantiate("framework", cfg.framework)


def build_loader(cfg: DictConfig) -> Loader:
    return _instantiate("loader", cfg.loader)


def build_task(cfg: DictConfig) -> Task:
    """The model family's task (benchmarks/tasks/), after checking the family's own library (transformers
    for model=bert): `ddlbench run` calls it before launch, so that a missing one is a one-line error."""
    check_library(cfg.model.arch)
    return tasks.build_task(adapter_config(cfg.model), label_smoothing=cfg.optim.label_smoothing)


def amp_dtype(cfg: DictConfig) -> torch.dtype | None:
    return AMP_DTYPES[cfg.precision.amp_dtype]


def build_model_and_optimizer(
    cfg: DictConfig, device: torch.device, *, global_batch: int
) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The model on the device and its optimizer (optim.name, at the lr the linear scaling rule gives
    global_batch where optim.scale_lr asks for it: benchmarks/optim.py)."""
    from benchmarks.optim import build_optimizer

    m = cfg.model
    model = build_model(
        arch=m.arch,
        depth=m.depth,
        num_classes=m.num_classes,
        seed=cfg.run.seed,
        width=m.width,
        batch_norm=m.batch_norm,
        residual=m.residual,
        size=m.size,
        image_size=m.image_size,
    ).to(device)
    if cfg.precision.channels_last:
        model = model.to(memory_format=torch.channels_last)
    return model, build_optimizer(model.parameters(), cfg.optim, global_batch=global_batch)


def device_of(cfg: DictConfig, env: distenv.DistEnv) -> torch.device:
    """The rank's device: GPU <local rank> of its node (system.device=cuda), else the CPU."""
    if cfg.system.device == "cuda":
        # one GPU per rank: local rank i drives GPU i of its node
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def build_loaders(
    cfg: DictConfig, option, *, env: distenv.DistEnv, device: torch.device, task, read_from: dict[str, str]
):
    """The training loader and the validation one (None without data.val_path or data.val_split). read_from: the
    node's staged copy of each data folder (data.stage=node_local; {}: the folders themselves)."""
    context = LoaderContext(
        rank=env.rank,
        world_size=env.world_size,
        device=device,
        per_gpu_batch=cfg.run.per_gpu_batch * env.devices_per_rank,
        seed=cfg.run.seed,
        num_classes=cfg.model.num_classes,
        image_size=cfg.model.image_size,
        channels_last=cfg.precision.channels_last,
        data_path=read_from.get(cfg.data.path, cfg.data.path),
        holdout=0.0 if cfg.data.val_path else float(cfg.data.val_split),
        task=task,
    )
    loader = option.build(context)
    if not (cfg.data.val_path or cfg.data.val_split):
        return loader, None
    # the held-out folder, or the held-out part of data.path
    held_out_path = read_from.get(cfg.data.val_path or cfg.data.path, cfg.data.val_path or cfg.data.path)
    held_out = dataclasses.replace(context, data_path=held_out_path, validation=True)
    return loader, option.build(held_out)
