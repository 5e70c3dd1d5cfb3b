"""Each adapter owns its config (benchmarks/<family>/configs.py): one home per default, closed sets as
Choices, one check(); option YAMLs restate nothing; constructors take the config object; every
implementation has every protocol member."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import yaml

from benchmarks.adapter_config import AdapterConfig, Choice, adapter_config, config_default
from benchmarks.adapters import adapter_class
from benchmarks.frameworks.base import Framework
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.loaders.base import Loader
from benchmarks.loaders.configs import CONFIGS as LOADERS
from tests.conftest import REPO

OPTIONS = [("framework", name) for name in FRAMEWORKS] + [("loader", name) for name in LOADERS]


def _protocol_members(protocol: type) -> set[str]:
    return {name for name in vars(protocol) if not name.startswith("_")} | set(protocol.__annotations__)


@pytest.mark.parametrize(("group", "option"), OPTIONS)
def test_an_option_yaml_restates_nothing(group, option):
    text = yaml.safe_load((REPO / "conf" / group / f"{option}.yaml").read_text())
    assert text == {"defaults": [f"{option}_schema", "_self_"]}, "settings and defaults live in the config class"


@pytest.mark.parametrize(("group", "option"), OPTIONS)
def test_an_option_composes_to_its_config_class(compose, group, option):
    extra = ["data.path=/tmp"] if group == "loader" else []
    config = adapter_config(compose([f"{group}={option}", *extra])[group])
    configs = FRAMEWORKS if group == "framework" else LOADERS
    assert type(config) is configs[option] and config.name == option
    config.check()  # the defaults pass their own rules
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        assert not (isinstance(value, str) and value.startswith("${")), f"{field.name} unresolved"


def test_choices_are_their_names():
    seen = 0
    for cls in (*FRAMEWORKS.values(), *LOADERS.values()):
        for field in dataclasses.fields(cls):
            value = field.default
            if isinstance(value, Choice):
                seen += 1
                assert all(member.name == member.value for member in type(value)), type(value)
    assert seen >= 6  # local_launcher, comm_timer, controller, mixed_precision, reduce_dtype, reader, decoder_device


@pytest.mark.parametrize(("group", "option"), OPTIONS)
def test_the_constructor_takes_the_config_object_only(group, option):
    cls = adapter_class(group, option)
    parameters = list(inspect.signature(cls.__init__).parameters.values())[1:]
    assert [p.name for p in parameters] == ["config"], "no keyword swallows keys the adapter does not own"
    configs = FRAMEWORKS if group == "framework" else LOADERS
    assert config_default(configs[option], "_target_") == f"{cls.__module__}.{cls.__qualname__}"


@pytest.mark.parametrize(("group", "option"), OPTIONS)
def test_every_implementation_has_every_protocol_member(group, option):
    cls = adapter_class(group, option)
    protocol = Framework if group == "framework" else Loader
    instance_state = {"rank", "local_rank", "world_size"}  # set in __init__ (no instance built here)
    missing = sorted(m for m in _protocol_members(protocol) - instance_state if not hasattr(cls, m))
    assert not missing, f"{cls.__name__} lacks {missing}"
    found = cls.installation()  # the doctor's probe never raises
    assert isinstance(found.ok, bool) and found.detail


def test_a_config_built_in_python_takes_strings_for_choices():
    from benchmarks.errors import ConfigError
    from benchmarks.frameworks.configs import DeepSpeedConfig, MixedPrecision

    assert (
        DeepSpeedConfig(mixed_precision="engine", train_micro_batch_size_per_gpu=4).mixed_precision
        is MixedPrecision.engine
    )
    with pytest.raises(ConfigError, match=r"framework.mixed_precision='fp8' is not allowed; choose autocast or engine"):
        DeepSpeedConfig(mixed_precision="fp8", train_micro_batch_size_per_gpu=4)


def test_settings_are_plain_values_for_meta_json(compose):
    import json

    for group, option in OPTIONS:
        extra = ["data.path=/tmp"] if group == "loader" else []
        config: AdapterConfig = adapter_config(compose([f"{group}={option}", *extra])[group])
        json.dumps(config.settings())  # no enum members, nothing json cannot write
        assert "_target_" not in config.settings() and "name" not in config.settings()
