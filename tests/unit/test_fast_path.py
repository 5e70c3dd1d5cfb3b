"""The fast path's settings (conf/experiment/fast_path.yaml, docs/mfu.md): the preset composes what it says, its
keys' refusals are one line, the fused optimizer is built, and a run at the keys' defaults keeps its cell (runs
made before the keys existed). Its speed is measured on the GPU machine (docs/results), never here."""

from __future__ import annotations

import pytest
import torch

from benchmarks.errors import ConfigError
from benchmarks.models.configs import CompileMode
from benchmarks.optim import build_optimizer
from benchmarks.rundir import cell_identity
from benchmarks.validate import validate


def test_the_preset_is_bf16_channels_last_compiled_with_cuda_graphs_and_fused(compose):
    cfg = compose(["experiment=fast_path", "system=h200", "model=resnet", "model.depth=50"])
    validate(cfg, check_device=False)
    assert (cfg.precision.amp_dtype, cfg.precision.channels_last) == ("bfloat16", True)
    assert cfg.model.compile and cfg.model.compile_mode == CompileMode.reduce_overhead
    assert cfg.model.compile_mode.torch_mode == "reduce-overhead"
    assert cfg.optim.fused is True


@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_fused_builds_torchs_fused_kernel(compose, name):
    cfg = compose([f"optim.name={name}", "optim.fused=true"])
    optimizer = build_optimizer([torch.nn.Parameter(torch.ones(3))], cfg.optim, global_batch=32)
    assert optimizer.defaults["fused"] is True
    plain = build_optimizer([torch.nn.Parameter(torch.ones(3))], compose([f"optim.name={name}"]).optim, global_batch=32)
    assert not plain.defaults["fused"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["optim.name=lars", "optim.fused=true"],
            "optim.fused=true has no kernel for optim.name=lars; drop optim.fused, or choose sgd or adamw",
        ),
        (
            ["model.compile_mode=reduce_overhead"],
            "model.compile_mode=reduce_overhead needs model.compile=true (torch.compile's mode); add it, or drop "
            "model.compile_mode",
        ),
    ],
)
def test_refusals_are_one_line(compose, overrides, message):
    with pytest.raises(ConfigError) as error:
        validate(compose(overrides), check_device=False)
    assert str(error.value) == message


def test_the_keys_at_their_defaults_keep_the_cell(compose):
    from omegaconf import OmegaConf

    def key(overrides):
        return cell_identity.identity(
            OmegaConf.to_container(compose(overrides), resolve=True), world_size=1, num_nodes=1
        )

    plain = key([])
    assert "model.compile_mode" not in plain and "optim.fused" not in plain
    assert key(["optim.fused=true"]) != plain


def test_a_compiled_models_flops_are_counted(compose):
    """The meta device counts the model as built: torch.compile's settings are no builder's arguments."""
    from omegaconf import OmegaConf

    from benchmarks.flops import model_flops_per_sample
    from benchmarks.models.configs import ModelConfig
    from benchmarks.tasks import build_task

    cfg = compose(["experiment=fast_path", "model=simple_cnn", "model.num_classes=10"])
    model = OmegaConf.to_container(cfg.model, resolve=True)
    counted = model_flops_per_sample(model, build_task(OmegaConf.to_object(cfg.model)))
    assert counted.flops and counted.flops > 0 and isinstance(OmegaConf.to_object(cfg.model), ModelConfig)
