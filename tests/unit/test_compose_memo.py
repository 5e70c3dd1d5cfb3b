"""benchmarks/config.py composes the option choices once (memoised) and applies the value overrides to a copy
with Hydra's own code: the result is Hydra's composition of the whole override list, key for key, flag for
flag, and a bad value is refused with the same words."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from benchmarks import config
from benchmarks.errors import ConfigError

CASES = [
    [],
    ["run.steps=3"],
    ["framework=deepspeed", "framework.zero_stage=2", "framework.overlap_comm=true"],
    ["model=resnet", "model.depth=50", "run.per_gpu_batch=64", "precision=amp_bf16", "system=h200"],
    ["run.per_gpu_batch=64", "model=resnet", "model.depth=101"],  # values before the choices they set
    ["loader=dali", "data.path=/tmp/some where", "loader.hw_decoder_load=0.5"],
    ["+system.env.NCCL_MAX_CTAS=8", "framework=horovod", "framework.fusion_threshold_mb=32"],
    ["experiment=aach2023_scaling", "campaign.gpus=[4,8]", "run.epochs=2"],
    ["experiment=composable_2023_cpu", "framework=fsdp", "framework.shard_unit=blocks"],
    # a nested group with its package, as the campaign planner spells a study's axes
    ["experiment=composable_2023", "experiment/composable_mode@_global_=fsdp", "precision=amp_bf16", "run.steps=7"],
]


def plain(overrides: list[str]):
    """Hydra's composition of the whole list, no memo."""
    config.schema.register()
    return config._hydra_compose(list(overrides))


@pytest.mark.parametrize("overrides", CASES, ids=lambda o: " ".join(o) or "defaults")
def test_the_memo_gives_hydras_composition(overrides):
    ours, hydras = config.compose(overrides), plain(overrides)
    assert OmegaConf.to_container(ours, resolve=False) == OmegaConf.to_container(hydras, resolve=False)
    assert OmegaConf.to_yaml(ours, resolve=True) == OmegaConf.to_yaml(hydras, resolve=True)
    assert OmegaConf.is_struct(ours) == OmegaConf.is_struct(hydras)
    again = config.compose(overrides)  # from the memo: a copy, never the memo's own object
    again.run.steps = 12345
    assert config.compose(overrides).run.steps != 12345


@pytest.mark.parametrize(
    "overrides",
    [
        ["run.stepz=3"],
        ["model=resnet", "model.depht=50"],
        ["run.steps=many"],
        ["framework=ddp", "framework.comm_timer=sometimes"],
        ["framework=mxnet", "run.steps=3"],
    ],
    ids=lambda o: " ".join(o),
)
def test_a_bad_override_is_refused_in_hydras_words(overrides):
    with pytest.raises(Exception) as hydras:
        plain(overrides)
    with pytest.raises(ConfigError) as ours:
        config.compose(overrides)
    assert str(ours.value) == config._explain(hydras.value, overrides), (str(ours.value), str(hydras.value))


def test_a_sweep_in_a_run_is_refused_as_hydra_refuses_it():
    with pytest.raises(ConfigError, match="run.steps"):
        config.compose(["run.steps=3,4"])
