"""framework.shard_unit (FSDP2): which modules get a fully_shard group of their own, on the real models;
fully_shard wants inner groups before the ones that hold them, and the model last."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from benchmarks.frameworks.configs import ShardUnit
from benchmarks.frameworks.fsdp import repeated_blocks, shard_groups
from benchmarks.models import build_model


def names(model: torch.nn.Module, groups: list[torch.nn.Module]) -> list[str]:
    by_id = {id(m): name for name, m in model.named_modules()}
    return [by_id[id(g)] for g in groups]


def test_blocks_are_resnets_residual_blocks_inner_first_and_the_root_last():
    model = build_model(arch="resnet", depth=18, num_classes=10, seed=0)
    groups = names(model, shard_groups(model, ShardUnit.blocks))
    assert groups == [f"layer{n}.{k}" for n in (4, 3, 2, 1) for k in (1, 0)] + [""]
    assert names(model, shard_groups(model, ShardUnit.children)) == [
        "conv1",
        "bn1",
        *[f"layer{n}" for n in range(1, 5)],
        "fc",
        "",
    ]
    assert shard_groups(model, ShardUnit.root) == [model]


def test_a_stack_of_mixed_classes_has_no_blocks_and_vggs_layers_are_blocks():
    # MobileNetV2's features mix Conv2dNormActivation and InvertedResidual: no repeated stack, the root alone
    mobilenet = build_model(arch="mobilenet_v2", depth=None, num_classes=10, seed=0)
    assert repeated_blocks(mobilenet) == []
    # VGG-11's features hold 8 convolutions (ReLU and pooling have no parameters), its classifier 3 linears
    vgg = build_model(arch="vgg", depth=11, num_classes=10, seed=0)
    kinds = [type(m).__name__ for m in repeated_blocks(vgg)]
    assert kinds.count("Conv2d") == 8 and kinds.count("Linear") == 3 and len(kinds) == 11


@pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed: run 'make nlp'"
)
@pytest.mark.parametrize(("size", "num_layers"), [("tiny", 2), ("base", 12)])
def test_blocks_are_berts_encoder_layers(size, num_layers):
    from benchmarks.models.bert import build

    model = build(size)
    groups = names(model, shard_groups(model, ShardUnit.blocks))
    assert groups == [f"bert.encoder.layer.{k}" for k in reversed(range(num_layers))] + [""]
