"""benchmarks/rundir/: a run key holds every setting, so runs that differ in any of them are two cells."""

from __future__ import annotations

import os
import re
import time

import pytest
from omegaconf import OmegaConf

from benchmarks.errors import ConfigError
from benchmarks.rundir import cell_identity, run_files, summary_schema
from launchers.lifecycle import liveness, rundir_state

NAME = re.compile(r"(?P<readable>.+)-(?P<hash>[0-9a-f]{8})-r(?P<repeat>\d+)")


def _dir(compose, overrides: list[str], *, world_size: int = 2, num_nodes: int = 1):
    return cell_identity.run_dir(
        OmegaConf.to_container(compose(overrides), resolve=True), world_size=world_size, num_nodes=num_nodes
    )


@pytest.mark.parametrize(
    "a, b",
    [
        (["framework=deepspeed", "framework.zero_stage=1"], ["framework=deepspeed", "framework.zero_stage=2"]),
        (["precision=amp_bf16"], ["precision=fp32"]),
        (["system=local_cpu"], ["system=h200"]),
        (["run.campaign=a"], ["run.campaign=b"]),
        (["data.path=/d1"], ["data.path=/d2"]),
        (["loader=native", "loader.num_workers=2"], ["loader=native", "loader.num_workers=8"]),
    ],
)
def test_any_setting_makes_another_cell(compose, a, b):
    dir_a, dir_b = _dir(compose, a), _dir(compose, b)
    assert dir_a != dir_b
    assert NAME.fullmatch(dir_a.name)["hash"] != NAME.fullmatch(dir_b.name)["hash"]


def test_repeats_share_the_cell_and_not_the_directory(compose):
    first, second = (
        _dir(compose, ["run.repeat=0"]),
        _dir(compose, ["run.repeat=1", "run.root=elsewhere", "run.log_every=0"]),
    )
    assert NAME.fullmatch(first.name)["hash"] == NAME.fullmatch(second.name)["hash"]
    assert first.name.endswith("-r0") and second.name.endswith("-r1")


def test_the_name_is_readable_and_the_size_is_part_of_the_key(compose):
    one, two = _dir(compose, ["model=simple_cnn"], world_size=1), _dir(compose, ["model=simple_cnn"], world_size=2)
    assert re.fullmatch(r"ddp-synthetic-simple_cnn-fp32-g1-n1-b32-[0-9a-f]{8}-r0", one.name)
    assert NAME.fullmatch(one.name)["hash"] != NAME.fullmatch(two.name)["hash"]
    # the local layout (ranks per node) is not a setting of its own: world size and nodes are
    assert _dir(compose, ["system.ranks_per_node=1"]) == _dir(compose, ["system.ranks_per_node=2"])


def test_key_is_stable_across_yaml_number_spellings():
    assert cell_identity.key_hash({"a": 2, "b": [1, 2.0]}) == cell_identity.key_hash({"b": [1.0, 2], "a": 2.0})
    assert cell_identity.key_hash({"a": 2}) != cell_identity.key_hash({"a": 2.5})


def test_scaling_groups_leave_out_the_size():
    settings = {"framework": {"name": "ddp"}, "run": {"per_gpu_batch": 32, "repeat": 0}}
    weak = {cell_identity.group_hash(settings, world_size=w) for w in (1, 2, 4)}
    assert len(weak) == 1
    strong = [
        cell_identity.group_hash({"run": {"per_gpu_batch": 256 // w}}, world_size=w, mode="strong") for w in (1, 2, 4)
    ]
    assert len(set(strong)) == 1  # the global batch is held


def test_throughput_counts_measured_steps_only():
    """Per measured step the slowest rank; warm-up and profiled steps do not count."""
    logs = {
        0: [
            {"step": 0, "samples": 4, "warmup": True, "step_s": 9.0},
            {"step": 1, "samples": 4, "warmup": False, "profiled": True, "step_s": 5.0},
            {"step": 2, "samples": 4, "warmup": False, "profiled": False, "step_s": 0.5},
            {"step": 3, "samples": 4, "warmup": False, "step_s": 0.4},
        ],
        1: [
            {"step": 0, "samples": 4, "warmup": True, "step_s": 9.0},
            {"step": 1, "samples": 4, "warmup": False, "profiled": True, "step_s": 5.0},
            {"step": 2, "samples": 4, "warmup": False, "profiled": False, "step_s": 0.3},
            {"step": 3, "samples": 4, "warmup": False, "step_s": 0.6},
        ],
    }
    out = summary_schema.throughput(logs)
    assert (out["measured_steps"], out["measured_samples"]) == (2, 16)
    assert out["time_s"] == pytest.approx(1.1)
    assert out["throughput_img_s"] == pytest.approx(16 / 1.1) and out["per_gpu_img_s"] == pytest.approx(8 / 1.1)


def test_state_of_a_run_directory(tmp_path):
    assert rundir_state.state(tmp_path / "nothing") == "missing"
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.jsonl").write_text("{}\n")
    assert rundir_state.state(run) == "running"  # no summary, no owner record, written just now
    old_s = time.time() - 2 * liveness.DEAD_AFTER_S
    os.utime(run / "rank0.jsonl", (old_s, old_s))
    assert rundir_state.state(run) == "dead"  # nothing written for longer than the limit
    for summary, state in (
        (summary_schema.failed_summary(RuntimeError("x")), "failed"),
        (summary_schema.interrupted_summary("Ctrl-C"), "interrupted"),
    ):
        run_files.write_json_atomic(run / run_files.SUMMARY, summary)
        assert rundir_state.state(run) == state
    (run / run_files.SUMMARY).write_text("{not json")
    assert rundir_state.state(run) == "failed"


def test_campaign_plan_refuses_two_cells_with_one_identity():
    from launchers.campaign import plan

    _, cells = plan(["experiment=slurm_smoke", "system=slurm_cpu"])
    assert len({c.run_dir for c in cells}) == len(cells)
    with pytest.raises(
        ConfigError,
        match=r"campaign cells 'framework=ddp loader=synthetic on 1 GPU\(s\), repeat 0' "
        r"and 'framework=ddp loader=synthetic on 1 GPU\(s\), repeat 0' are one "
        r"configuration",
    ):
        plan(["experiment=slurm_smoke", "system=slurm_cpu", "campaign.axes.framework=[ddp,ddp]"])


def test_campaign_cells_differing_in_one_setting_plan_distinct_directories():
    from launchers.campaign import plan

    _, cells = plan(
        ["experiment=slurm_smoke", "system=slurm_cpu", "campaign.axes.framework=[ddp,deepspeed]", "campaign.repeats=2"]
    )
    assert len(cells) == 2 * 2 * 2  # framework x gpus [1, 2] x repeats
    assert len({c.run_dir for c in cells}) == len(cells)
    hashes = {NAME.fullmatch(c.run_dir.name)["hash"] for c in cells}
    assert len(hashes) == 4  # repeats share their cell's hash


def test_every_field_a_summary_writes_is_in_the_one_schema_the_loader_checks():
    """summary.json has one schema (summary_schema.SUMMARY_FIELDS): every field the three summaries write is in it
    (analysis/load checks each against its kind), and every kind is one the loader knows."""
    from analysis.load.values import KINDS

    names = {"framework": "ddp", "loader": "synthetic", "model": "resnet50", "precision": "fp32"}
    names |= {"per_gpu_batch": 4, "campaign": "c", "sample_unit": "images"}
    measured = {"measured_steps": 2, "measured_samples": 16, "time_s": 1.0}
    measured |= {"throughput_img_s": 16.0, "per_gpu_img_s": 8.0}
    target = dict.fromkeys(summary_schema.TARGET_FIELDS)
    completed = summary_schema.completed_summary(
        key={"world_size": 2, "num_nodes": 1},
        measured=measured,
        wall_s=1.0,
        last_loss=0.5,
        warmup_steps=1,
        repeat=0,
        names=names,
        runtime_s=2.0,
        memory=summary_schema.memory_summary([None, None]),
        target=target,
    )
    written = (
        set(completed) | set(summary_schema.failed_summary("boom")) | set(summary_schema.interrupted_summary("SIGINT"))
    )
    assert written - {"schema_version", "cell_hash"} <= set(summary_schema.SUMMARY_FIELDS)
    assert set(summary_schema.SUMMARY_FIELDS.values()) <= set(KINDS)


def test_a_setting_added_later_at_its_default_value_keeps_the_cell(compose):
    """run.stop_on_nan came after runs were recorded without it: at false (runs as before) it is no setting of the
    run key, so old and new runs of one configuration are one cell; true is a cell of its own (a sync a step)."""
    plain = cell_identity.flatten(OmegaConf.to_container(compose([]), resolve=True))
    before = {k: v for k, v in plain.items() if k != "run.stop_on_nan"}  # a config.yaml written before the key
    assert plain["run.stop_on_nan"] is False
    assert cell_identity.cell_hash(before, world_size=2, num_nodes=1) == cell_identity.cell_hash(
        plain, world_size=2, num_nodes=1
    )
    stopping = {**plain, "run.stop_on_nan": True}
    assert cell_identity.cell_hash(stopping, world_size=2, num_nodes=1) != cell_identity.cell_hash(
        plain, world_size=2, num_nodes=1
    )
    assert cell_identity.is_added_setting_default(
        "run.stop_on_nan", False
    ) and not cell_identity.is_added_setting_default("run.stop_on_nan", 0)
