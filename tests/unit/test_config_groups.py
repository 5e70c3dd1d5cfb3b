"""The config groups as a user chooses them (benchmarks/config_groups.py): the ConfigStore's `<option>_schema`
entries never appear as options (`python -m benchmarks --help`, `ddlbench run --help`, completion) and never run
(issue 64: `framework=ddp_schema` ran as a cell of its own)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks.config import compose
from benchmarks.config_groups import group_options
from benchmarks.errors import ConfigError


def test_the_groups_hold_the_yaml_options_and_no_schema_entry():
    groups = group_options()
    assert groups["framework"] == ["ddp", "deepspeed", "dp", "fsdp", "horovod"]
    assert "synthetic" in groups["loader"] and "experiment/aach2023_loader" in groups
    assert not any(name.endswith("_schema") for names in groups.values() for name in names)


def test_composing_a_schema_entry_fails_in_one_line_naming_the_options():
    with pytest.raises(
        ConfigError, match=r"^framework=ddp_schema is the typed schema .* choose one of: ddp, deepspeed"
    ):
        compose(["framework=ddp_schema"])
    with pytest.raises(ConfigError, match="model=model_schema"):
        compose(["model=model_schema"])


def test_ddlbench_run_help_lists_every_group_and_its_options(capsys):
    from ddlbench.cli import main

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "framework: ddp, deepspeed, dp, fsdp, horovod" in out and "precision: amp_bf16, amp_fp16, fp32" in out
    assert "_schema" not in out


def test_the_ranks_program_help_and_run_refuse_schema_entries():
    """`python -m benchmarks --help` lists no schema entry; `framework=ddp_schema` stops before Hydra composes it."""
    shown = subprocess.run([sys.executable, "-m", "benchmarks", "--help"], capture_output=True, text=True, timeout=120)
    assert "framework: ddp, deepspeed, dp, fsdp, horovod" in shown.stdout and "_schema" not in shown.stdout
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks", "framework=ddp_schema"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2 and run.stderr.strip().startswith("ddlbench: error: framework=ddp_schema is the typed")
