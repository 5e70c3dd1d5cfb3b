"""Cross-field checks on a composed config: ConfigError before any process group exists."""
from __future__ import annotations

import os

from omegaconf import DictConfig

from benchmarks.adapter_config import adapter_config
from benchmarks.errors import ConfigError


def validate(cfg: DictConfig, *, check_device: bool = True) -> None:
    """Raise ConfigError (one line: key, value, fix) for a config that cannot run."""
    run = cfg.run
    for key, minimum in (("per_gpu_batch", 1), ("steps", 1), ("warmup_steps", 0), ("repeat", 0), ("log_every", 0),
                         ("trace_steps", 0)):
        if run[key] < minimum:
            raise ConfigError(f"run.{key}={run[key]} must be >= {minimum}")
    if run.epochs is not None and run.epochs < 1:
        raise ConfigError(f"run.epochs={run.epochs} must be >= 1 (or null to run run.steps steps)")
    if cfg.system.ranks_per_node < 1:
        raise ConfigError(f"system.ranks_per_node={cfg.system.ranks_per_node} must be >= 1")
    if cfg.system.device not in ("cpu", "cuda"):
        raise ConfigError(f"system.device={cfg.system.device!r} is not allowed; choose cpu or cuda")
    for key in ("campaign",):
        value = str(run[key])
        if not value or "/" in value or value.startswith(".") or not value.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ConfigError(f"run.{key}={value!r} must be letters, digits, '-', '_' or '.'; e.g. run.{key}=scaling_2026")
    # each adapter option's own rules (its closed sets are checked by Hydra when the config is composed)
    for group in ("framework", "loader", "model"):
        adapter_config(cfg[group]).check()
    for key, allowed in (("cache", ("warm", "cold")), ("cache_evict", ("auto", "drop_caches", "fadvise"))):
        if cfg.data[key] not in allowed:
            raise ConfigError(f"data.{key}={cfg.data[key]!r} is not allowed; choose {' or '.join(allowed)}")
    if cfg.loader.needs_data:
        path = cfg.data.path
        if path is None:
            raise ConfigError(
                f"loader={cfg.loader.name} reads data but data.path is not set; "
                "make a dataset with 'ddlbench data synth --out data/synth' and pass data.path=data/synth"
            )
        if not os.path.isdir(path):
            raise ConfigError(f"data.path={path!r} is not a directory; check the path or run 'ddlbench data synth --out {path}'")
    if check_device and cfg.system.device == "cuda":
        import torch

        available = torch.cuda.device_count()
        if available == 0:
            raise ConfigError(f"system={cfg.system.name} wants CUDA GPUs but this machine has none; use system=local_cpu")
        if cfg.system.ranks_per_node > available:
            raise ConfigError(
                f"system.ranks_per_node={cfg.system.ranks_per_node} but this node has {available} GPU(s); "
                f"use system.ranks_per_node={available} or fewer"
            )


def warnings(cfg: DictConfig) -> list[str]:
    """One-line warnings about a config that runs but measures less than it seems to: a loader given
    far fewer CPU workers than the rank has CPUs (benchmarks/loaders/configs.py: one rule for every loader)."""
    from benchmarks.loaders.configs import loader_cpus

    out = []
    workers = adapter_config(cfg.loader).cpu_workers()
    fair = loader_cpus(cfg.system.cpus_per_rank)
    if workers is not None and workers[1] < fair / 2:
        key, value = workers
        out.append(f"{key}={value} gives loader={cfg.loader.name} {value} of the rank's {cfg.system.cpus_per_rank} CPUs "
                   f"(system.cpus_per_rank): its figures are a handicapped loader's, not a fair comparison; leave "
                   f"the default ({fair}: the rank's CPUs less one) or pass {key}={fair}")
    return out
