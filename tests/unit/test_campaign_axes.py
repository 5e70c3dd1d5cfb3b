"""A campaign's axes from the command line (issue 49 item 8): campaign.axes.KEY=[a,b] for any key, dotted or
not, and campaign.axes='{KEY: [a, b]}', on experiments with axes, without the axis, or without a campaign:
section; a form that cannot work is one line showing the ones that do."""

from __future__ import annotations

import pytest

from benchmarks.errors import ConfigError
from launchers.campaign import AXES_FORMS, plan

SMOKE = ["experiment=slurm_smoke", "system=slurm_cpu"]  # axes framework: [ddp], loader: [synthetic]; gpus [1, 2]


def choices(cells) -> set[tuple]:
    return {(c.choices, c.num_gpus) for c in cells}


def test_a_dotted_key_is_one_axis():
    """Was: 'campaign.axes.optim is not a config key; did you mean campaign.axes.optim.schedule.name?'"""
    cfg, cells = plan([*SMOKE, "campaign.axes.optim.schedule.name=[step,cosine]"])
    assert list(cfg.campaign.axes) == ["framework", "loader", "optim.schedule.name"]
    assert len(cells) == 2 * 2 and len({c.run_dir for c in cells}) == 4  # schedules x gpus, each its own cell
    assert {c.overrides([])[2] for c in cells} == {"optim.schedule.name=step", "optim.schedule.name=cosine"}


def test_the_whole_dict_form_plans_what_the_dotted_one_does():
    dotted = plan([*SMOKE, "campaign.axes.optim.schedule.name=[step,cosine]", "campaign.axes.model.depth=[18]"])[1]
    whole = plan([*SMOKE, "campaign.axes={optim.schedule.name: [step, cosine], model.depth: [18]}"])[1]
    assert choices(dotted) == choices(whole) and [c.run_dir for c in dotted] == [c.run_dir for c in whole]


def test_an_axis_replaces_the_experiments_values_and_a_new_one_adds_to_them():
    cfg, cells = plan([*SMOKE, "campaign.axes.loader=[synthetic,native]", "campaign.gpus=[1]"])
    assert dict(cfg.campaign.axes) == {"framework": ["ddp"], "loader": ["synthetic", "native"]}
    assert len(cells) == 2
    # a config group with its package, which Hydra could not read as a key: aach2023's loader axis
    _, cells = plan(
        ["experiment=aach2023_scaling", "system=juwels_booster", "campaign.gpus=[4]", "campaign.repeats=1",
         "campaign.axes.experiment/aach2023_loader@_global_=[native]"]
    )  # fmt: skip
    assert len(cells) == 3 * 3 and all("-native-" in c.name for c in cells)  # frameworks x depths


def test_an_axis_on_an_experiment_without_a_campaign_section():
    """Was: 'cannot compose the config ...: Unexpected type: None'. Its world sizes come with it."""
    cfg, cells = plan(["experiment=smoke", "campaign.gpus=[1,2]", "campaign.axes.loader=[synthetic,native]"])
    assert dict(cfg.campaign.axes) == {"loader": ["synthetic", "native"]} and cfg.campaign.repeats == 1
    assert len(cells) == 4
    with pytest.raises(ConfigError, match=r"^experiment=smoke has no campaign: section; pass its world sizes") as e:
        plan(["experiment=smoke", "campaign.axes.loader=[synthetic,native]"])
    assert "campaign.gpus=[1,2] campaign.axes.loader=[synthetic,native]" in str(e.value)


def test_an_axis_without_the_key_values_or_list_says_what_works(cli):
    for override, says in (
        ("campaign.axes=[step,cosine]", "campaign.axes is a dict of axes"),
        ("campaign.axes.loader=[]", "gives campaign.axes.loader no value"),
        ("campaign.axes.=[ddp]", "names no config key"),
        ("campaign.axes.loader=[{a: 1}]", "an axis value is one setting, not a dict"),
        ("campaign.axes.loader=[synthetic", "cannot be read"),
    ):
        done = cli("campaign", "plan", *SMOKE, override)
        assert done.returncode == 2 and done.stdout == "", (override, done.stdout)
        (line,) = done.stderr.splitlines()
        assert line.startswith("ddlbench: error: ") and says in line and line.endswith(AXES_FORMS), line
    done = cli("campaign", "plan", *SMOKE, "campaign.axis.loader=[native]")
    assert done.returncode == 2 and "campaign.axis.loader is not a campaign key" in done.stderr
    done = cli("campaign", "plan", *SMOKE, "campaign.gpus=four")
    assert (
        done.stderr == "ddlbench: error: campaign.gpus=four must be a list of world sizes, e.g. campaign.gpus=[1,2,4]\n"
    )


def test_a_single_value_is_an_axis_of_one_and_a_comma_list_its_values():
    cfg, cells = plan([*SMOKE, "campaign.axes.model.depth=18", "campaign.axes.framework=ddp,deepspeed"])
    assert dict(cfg.campaign.axes) == {"framework": ["ddp", "deepspeed"], "loader": ["synthetic"], "model.depth": [18]}
    assert len(cells) == 2 * 2 and not [c.problem for c in cells if c.problem]
