"""Every option of every group composes; the config reads as the design says."""

import pytest

from benchmarks.config import GROUPS, options


@pytest.mark.parametrize("group", [g for g in GROUPS if g != "experiment"])
def test_every_option_composes(compose, group):
    for option in options(group):
        cfg = compose([f"{group}={option}"])
        assert cfg[group] is not None
        if group in ("framework", "loader", "precision", "system"):
            assert cfg[group].name == option


def test_every_experiment_composes(compose):
    for option in options("experiment"):
        compose([f"experiment={option}"])


def test_natural_overrides(compose):
    cfg = compose(["framework=ddp", "loader=native", "model=resnet", "model.depth=50"])
    assert (cfg.framework.name, cfg.loader.name, cfg.model.arch, cfg.model.depth) == ("ddp", "native", "resnet", 50)
    assert cfg.framework._target_ == "benchmarks.frameworks.ddp.DDP"


def test_defaults_are_the_cpu_smoke_path(compose):
    cfg = compose([])
    assert cfg.system.device == "cpu" and cfg.loader.name == "synthetic" and cfg.framework.name == "ddp"


def test_precision_maps_to_amp_and_memory_format(compose):
    cfg = compose(["precision=amp_bf16"])
    assert cfg.precision.amp_dtype == "bfloat16" and cfg.precision.channels_last
