"""The one place that turns config groups into objects (framework, loader, model, task, optimizer)."""

from __future__ import annotations

import importlib
from typing import Any

import torch
from omegaconf import DictConfig

from benchmarks import tasks
from benchmarks.adapter_config import adapter_config, config_default
from benchmarks.errors import ConfigError
from benchmarks.frameworks.base import Framework
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.loaders.base import Loader
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
