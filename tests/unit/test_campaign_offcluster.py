"""Campaigns off the cluster and the site's demands: plan, status and submit --dry-run without Slurm
installed, identical reasons grouped, node- and GPU-hour totals, --max-jobs as one limit for all arrays,
a required account, a prelude and exclusive nodes."""

from __future__ import annotations

import re

import pytest

from benchmarks.errors import ConfigError
from ddlbench.campaign import hours
from ddlbench.cli import main
from launchers import submit
from launchers.campaign import plan
from launchers.submit import array_throttles

JUWELS = ["experiment=aach2023_scaling", "system=juwels_booster"]


@pytest.fixture
def imagenet(monkeypatch, tmp_path):
    """Both of aach2023_scaling's data sets (the native loader's JPEGs, DALI's TFRecord): this empty folder."""
    monkeypatch.setenv("DDLBENCH_IMAGENET", str(tmp_path))
    monkeypatch.setenv("DDLBENCH_IMAGENET_TFRECORD", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def data_sets(folder, *, samples: int) -> dict[str, str]:
    """aach2023_scaling's two data sets, `samples` images each (JPEGs; the same as TFRecord shards): its
    DDLBENCH_IMAGENET* variables."""
    from benchmarks.data.synth import synth_imagefolder
    from benchmarks.data.tfrecord import synth_tfrecords

    size = dict(num_classes=1, images_per_class=samples, width=8, height=8, quality=50, seed=0, progress=False)
    synth_imagefolder(folder / "jpegs", **size)
    synth_tfrecords(folder / "tfrecord", **size, num_shards=1)
    return {"DDLBENCH_IMAGENET": str(folder / "jpegs"), "DDLBENCH_IMAGENET_TFRECORD": str(folder / "tfrecord")}


def test_plan_status_and_a_dry_run_work_without_slurm(no_slurm, imagenet, capsys):
    """Without Slurm, all three answer from the run directories and the data set; the data sets here are
    empty, so every cell is impossible in each (issue 49: plan listed 486 planned where submit refused them)."""
    assert main(["campaign", "plan", *JUWELS]) == 0
    out = capsys.readouterr().out
    assert "486 cells: 486 impossible; at most 0.0 node-hours, 0.0 GPU-hours for 0 job(s)" in out
    assert main(["campaign", "status", *JUWELS]) == 0
    captured = capsys.readouterr()
    assert "486 cells: 486 impossible" in captured.out and "Slurm is not installed here" in captured.err
    # each reason on one line with the number of cells it stops
    assert main(["campaign", "submit", *JUWELS, "system.account=p", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "every one of the 486 cells" in err and "[ddlbench] 243 cell(s) impossible: data.path=" in err, err


def test_plan_and_a_dry_run_submit_find_the_same_cells_impossible(cli, no_slurm, imagenet):
    """Issue 49: `plan` checks what `submit` checks (launchers/campaign.py plan, one function): 8 images feed
    one step of 4 and 8 ranks at batch 1, not of 16 or 32, in both commands, cell for cell and reason for reason."""
    env = data_sets(imagenet, samples=8)
    grid = [*JUWELS, "campaign.gpus=[4,8,16,32]", "campaign.axes.framework=[ddp]", "run.per_gpu_batch=1"]
    plan = cli("campaign", "plan", *grid, "--dry-run", env=env)
    submit_ = cli("campaign", "submit", *grid, "system.account=p", "--dry-run", env=env)
    assert plan.returncode == 0 and submit_.returncode == 0, (plan.stderr, submit_.stderr)

    def impossible(stderr: str) -> list[str]:
        return sorted(line for line in stderr.splitlines() if " impossible: " in line)

    def jobs(stdout: str) -> list[str]:  # each sbatch line's job name: the cell
        return sorted(re.findall(r"--job-name=(\S+)", stdout))

    assert impossible(plan.stderr) == impossible(submit_.stderr)
    assert len(impossible(plan.stderr)) == 4  # 2 loaders x 2 sizes
    assert "holds 8 samples, but one step of 16 rank(s)" in plan.stderr
    assert jobs(plan.stdout) == jobs(submit_.stdout) and len(jobs(plan.stdout)) == 2 * 3 * 2 * 3
    table = cli("campaign", "plan", *grid, env=env)
    assert "72 cells: 36 impossible, 36 planned" in table.stdout, table.stdout[-500:]
    assert "would submit 36, 0 already queued, 0 completed, 36 impossible" in submit_.stdout


def test_the_readmes_plan_plans_without_the_data_sets(cli, monkeypatch):
    """README's command, no DDLBENCH_IMAGENET*: every cell is a row saying which variable to export (issue
    36: it was refused, exit 2)."""
    monkeypatch.delenv("DDLBENCH_IMAGENET", raising=False)
    monkeypatch.delenv("DDLBENCH_IMAGENET_TFRECORD", raising=False)
    done = cli("campaign", "plan", *JUWELS, "campaign.gpus=[4,8]")
    assert done.returncode == 0, done.stderr
    assert "108 cells: 108 impossible" in done.stdout
    for loader, variable in (("dali", "DDLBENCH_IMAGENET_TFRECORD"), ("native", "DDLBENCH_IMAGENET")):
        reason = (
            f"loader={loader} reads data but data.path is not set: it reads ${variable}, which is unset; "
            f"export {variable}=<folder> or pass data.path=<folder>"
        )
        assert done.stdout.count(reason) == 1, done.stdout


def test_a_dry_run_submit_says_why_each_impossible_cell_is(cli, no_slurm, imagenet):
    """6 JPEGs feed one step of 4 ranks at batch 1, not of 8; DALI has no TFRecord there: the sbatch line of
    the one possible cell, and a count per reason (issue 36: 'would submit 0 ... impossible', no reason)."""
    from benchmarks.data.synth import synth_imagefolder

    synth_imagefolder(
        imagenet / "jpegs", num_classes=1, images_per_class=6, width=16, height=16, quality=90, seed=0, progress=False
    )
    grid = ["campaign.gpus=[4,8]", "campaign.axes.framework=[ddp]"]  # x 2 loaders x 3 depths x 3 repeats
    done = cli(
        "campaign", "submit", *JUWELS, *grid, "run.per_gpu_batch=1", "system.account=p", "--dry-run",
        env={"DDLBENCH_IMAGENET": str(imagenet / "jpegs"), "DDLBENCH_IMAGENET_TFRECORD": str(imagenet / "none")},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("sbatch ") == 9  # native on 4 GPUs
    lines = [line for line in done.stderr.splitlines() if " impossible: " in line]
    assert len(lines) == 2 and lines[0].startswith("[ddlbench] 18 cell(s) impossible: data.path="), lines
    assert "holds 6 samples, but one step of 8 rank(s)" in lines[1] and lines[1].startswith("[ddlbench] 9 cell(s)")
    assert "would submit 9, 0 already queued, 0 completed, 27 impossible" in done.stdout


def test_a_real_submit_without_sbatch_is_one_line(no_slurm, imagenet, capsys):
    from benchmarks.data.synth import synth_imagefolder

    data = imagenet / "data"
    synth_imagefolder(data, num_classes=1, images_per_class=4, width=16, height=16, quality=90, seed=0, progress=False)
    grid = ["experiment=slurm_smoke", "system=slurm_cpu"]
    assert main(["campaign", "submit", *grid]) == 2
    assert "sbatch not found: this machine is not a Slurm submit host" in capsys.readouterr().err
    assert main(["campaign", "submit", *grid, "--dry-run"]) == 0
    assert capsys.readouterr().out.count("sbatch ") == 2


def test_a_slurm_that_does_not_answer_leaves_status_and_dry_runs_to_the_run_directories(imagenet, monkeypatch, capsys):
    """squeue installed but the controller down: status and a dry run say so in one line and go on; a real
    submit is refused (it could queue a cell that is queued already)."""
    from launchers import scheduler

    def down(_prefix):
        raise ConfigError("squeue failed (connect failure); is Slurm up?")

    from benchmarks.data.synth import synth_imagefolder

    monkeypatch.setattr(scheduler, "available", lambda: True)
    monkeypatch.setattr(scheduler, "active_jobs", down)
    synth_imagefolder(
        imagenet / "d", num_classes=1, images_per_class=256, width=8, height=8, quality=50, seed=0, progress=False
    )
    grid = [*JUWELS, f"data.path={imagenet / 'd'}", "campaign.gpus=[4]", "campaign.repeats=1", "system.account=p"]
    assert main(["campaign", "status", *grid]) == 0
    captured = capsys.readouterr()
    assert "the states below come from the run directories only" in captured.err and "missing" in captured.out
    assert main(["campaign", "submit", *grid, "--dry-run"]) == 0
    assert "the states below come from the run directories only" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="is Slurm up"):
        submit.cell_states(*plan(grid))


def test_identical_reasons_are_one_line_with_a_count(imagenet, monkeypatch, capsys):
    for variable, folder in data_sets(imagenet, samples=8).items():  # a step of 8 ranks at batch 1
        monkeypatch.setenv(variable, folder)
    assert main(["campaign", "plan", *JUWELS, "system.max_nodes=2", "run.per_gpu_batch=1"]) == 0
    out = capsys.readouterr().out
    reason = "needs 4 nodes but system.max_nodes=2"
    assert out.count(reason) == 1 and "... 51 more" in out, out[-3000:]  # 54 cells need 4 nodes (16 GPUs)
    assert out.strip().endswith("GPU-hours for 108 job(s) at system.time_limit=00:30:00 each")


def test_time_limits_in_hours():
    limits = ("30", "00:30:00", "90:00", "1-12", "1-00:30", "2-01:00:00")
    assert [hours(t) for t in limits] == [0.5, 0.5, 1.5, 36, 24.5, 49]


def test_max_jobs_is_one_limit_for_all_arrays():
    assert array_throttles([10] * 9, 20) == [3, 3, 2, 2, 2, 2, 2, 2, 2] and sum(array_throttles([10] * 9, 20)) == 20
    assert array_throttles([1, 10], 20) == [1, 10]  # never more than an array's tasks
    assert array_throttles([1, 30], 20) == [1, 19]  # the small array's unused share goes to the big one
    assert array_throttles([5, 5, 5], 2) == [1, 1, 0]  # the third array waits for a later submit
    assert array_throttles([4, 4], None) == [None, None]


def test_a_site_that_bills_projects_prelude_and_exclusive_nodes(no_slurm, imagenet, capsys):
    from benchmarks.data.synth import synth_imagefolder

    synth_imagefolder(
        imagenet / "d", num_classes=1, images_per_class=256, width=8, height=8, quality=50, seed=0, progress=False
    )
    grid = [*JUWELS, f"data.path={imagenet / 'd'}", "campaign.gpus=[4]", "campaign.repeats=1"]
    assert main(["campaign", "submit", *grid, "--dry-run"]) == 2
    assert (
        "system=juwels_booster bills every job to a project: pass system.account=<project>" in capsys.readouterr().err
    )
    assert main(["campaign", "submit", *grid, "system.account=proj42", "--dry-run"]) == 0
    captured = capsys.readouterr()
    line = captured.out.splitlines()[0]
    assert "--account=proj42" in line and "--exclusive" in line and "DDLBENCH_PRELUDE=" in line, line
    assert "module load Stages/2025" in captured.err
