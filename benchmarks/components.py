"""The one place that turns config groups into objects (framework, loader, model, optimizer)."""
from __future__ import annotations

import importlib
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from benchmarks.errors import ConfigError
from benchmarks.frameworks.base import Framework
from benchmarks.loaders.base import Loader
from benchmarks.models import build_model

AMP_DTYPES = {None: None, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _instantiate(group: str, node: DictConfig) -> Any:
    """Import `_target_` and call it with the option's knobs (adapters raise ConfigError when their
    library is missing, with the install command)."""
    knobs = OmegaConf.to_container(node, resolve=True)
    assert isinstance(knobs, dict)
    target = knobs.pop("_target_")
    module_name, _, attr = target.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        raise ConfigError(f"{group}={node.name} needs the python module {e.name!r}; see README#install") from None
    return getattr(module, attr)(**knobs)


def build_framework(cfg: DictConfig) -> Framework:
    return _instantiate("framework", cfg.framework)


def build_loader(cfg: DictConfig) -> Loader:
    return _instantiate("loader", cfg.loader)


def amp_dtype(cfg: DictConfig) -> torch.dtype | None:
    return AMP_DTYPES[cfg.precision.amp_dtype]


def build_model_and_optimizer(cfg: DictConfig, device: torch.device) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = build_model(
        arch=cfg.model.arch, depth=cfg.model.depth, num_classes=cfg.model.num_classes, seed=cfg.run.seed
    ).to(device)
    if cfg.precision.channels_last:
        model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=cfg.optim.lr, momentum=cfg.optim.momentum, weight_decay=cfg.optim.weight_decay
    )
    return model, optimizer
