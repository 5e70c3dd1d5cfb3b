"""Hardware mistakes (issue 49 item 6): a system key the profile's device does not use is refused before
launch, in one line; more ranks on a host than it has CPUs is a warning at launch, recorded in meta.json
(launchers/lifecycle/rank.py) and read into the runs table's `oversubscribed` column (analysis/load)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from analysis.load import load_campaign
from benchmarks.errors import ConfigError
from benchmarks.schema import SystemConfig
from benchmarks.validate import host_cpus, oversubscription, validate, warnings

CPU_PROFILES = ("local_cpu", "slurm_cpu")  # conf/system/*.yaml with device: cpu


def test_gpus_per_node_on_a_cpu_profile_is_one_line_before_launch(cli):
    """Was: exit 0, the key ignored, yet the run a cell of its own."""
    done = cli("run", "--dry-run", "system.gpus_per_node=3")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        "ddlbench: error: system.gpus_per_node=3 but system=local_cpu computes on system.device=cpu, which uses "
        "no gpus_per_node (only system.device=cuda does); drop it (system.gpus_per_node=0) or pick a system "
        "profile with system.device=cuda\n"
    )


@pytest.mark.parametrize("profile", CPU_PROFILES)
def test_every_key_of_another_device_is_refused_on_a_cpu_profile(compose, profile):
    """Derived from schema.SystemConfig: every field whose `devices` leaves out cpu, at a value off its default."""
    keys = [f for f in dataclasses.fields(SystemConfig) if f.metadata.get("devices")]
    assert [f.name for f in keys] == ["gpus_per_node"]
    validate(compose([f"system={profile}"]), check_device=False)  # the profile as shipped runs
    for key in keys:
        with pytest.raises(ConfigError, match=rf"^system.{key.name}=3 but system={profile} computes on "):
            validate(compose([f"system={profile}", f"system.{key.name}=3"]), check_device=False)


def test_a_gpu_profile_keeps_its_gpus_per_node(compose):
    validate(compose(["system=juwels_booster", "system.gpus_per_node=4"]), check_device=False)


def test_more_ranks_than_cpus_is_a_warning(compose, monkeypatch):
    monkeypatch.setenv("SLURM_CPUS_ON_NODE", "2")  # this host's CPUs for the job, as in a Slurm allocation
    assert host_cpus() == 2
    (warning,) = [w for w in warnings(compose(["system.ranks_per_node=3"])) if "CPU(s)" in w]
    assert warning.startswith("system.ranks_per_node=3 starts 3 ranks on this host's 2 CPU(s): ranks share cores")
    assert warning.endswith("use system.ranks_per_node=2 or fewer")
    assert not [w for w in warnings(compose(["system.ranks_per_node=2"])) if "CPU(s)" in w]
    assert oversubscription(ranks=3, cores=2) == {"oversubscribed": True, "host_ranks": 3, "host_cores": 2}
    assert oversubscription(ranks=3, cores=None)["oversubscribed"] is False  # unknown: no claim


def test_the_warning_at_launch(cli):
    done = cli("run", "--dry-run", "system.ranks_per_node=3", "model=simple_cnn", env={"SLURM_CPUS_ON_NODE": "2"})
    assert done.returncode == 0, done.stderr
    assert "[ddlbench] warning: system.ranks_per_node=3 starts 3 ranks on this host's 2 CPU(s)" in done.stderr


@pytest.mark.filterwarnings("ignore::analysis.load.LogWarning")
def test_the_runs_table_reads_the_flag(tmp_path: Path):
    from tests.analysis.test_load_memory import write_run

    runs = {
        "ddp": {"oversubscribed": True, "host_ranks": 3, "host_cores": 2},
        "horovod": {"oversubscribed": False, "host_ranks": 1, "host_cores": 16},
        "deepspeed": {},  # a run from before meta.json said: unknown
        "fsdp": {"oversubscribed": "yes"},  # not a flag: listed, ignored
    }
    for framework, meta in runs.items():
        write_run(tmp_path, framework=framework, world=1, processes=1, peaks=[None], meta_edits=meta)
    campaign = load_campaign(tmp_path)
    table = campaign.runs.set_index("framework")
    assert str(table["oversubscribed"].dtype) == "boolean"
    assert table["oversubscribed"].isna().to_dict() == {"ddp": False, "horovod": False, "deepspeed": True, "fsdp": True}
    assert (table.loc["ddp", "oversubscribed"], table.loc["horovod", "oversubscribed"]) == (True, False)
    assert (table.loc["ddp", "meta.host_ranks"], table.loc["ddp", "meta.host_cores"]) == (3, 2)
    assert campaign.problems["problem"].str.contains("oversubscribed 'yes' is not true or false").any()
