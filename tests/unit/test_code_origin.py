"""Which code the ranks run (launchers/code_origin.py) and what each rank records of it (benchmarks/runlog.py)."""

from __future__ import annotations

from benchmarks import runlog
from launchers import code_origin


def _checkout(folder):
    (folder / "benchmarks").mkdir(parents=True)
    (folder / "pyproject.toml").write_text("")
    return folder


def test_the_ranks_get_the_launching_checkout_first_and_no_working_directory(tmp_path):
    here = _checkout(tmp_path / "first")
    env = code_origin.launch_environment({"PYTHONPATH": "/x"}, project=here)
    assert env == {"PYTHONPATH": f"{here}:/x", "PYTHONSAFEPATH": "1"}
    assert code_origin.launch_environment({}, project=tmp_path / "site-packages") == {}  # an installed package


def test_a_working_directory_in_another_checkout_is_named(tmp_path):
    first, second = _checkout(tmp_path / "first"), _checkout(tmp_path / "second")
    (second / "sub").mkdir()
    assert code_origin.foreign_checkout(second / "sub", project=first) == second
    assert code_origin.foreign_checkout(first, project=first) is None
    assert code_origin.foreign_checkout(tmp_path, project=first) is None  # in no checkout


def test_a_rank_records_its_package_folder_sha_and_dirty_state():
    code = runlog.code_provenance()
    assert code["package"] == str(code_origin.PROJECT)
    assert set(code) == {"package", "git_sha", "git_dirty"}
    other = {**code, "package": "/elsewhere"}
    assert runlog.code_fingerprint(code) != runlog.code_fingerprint(other)
    assert runlog.code_fingerprint(code) == runlog.code_fingerprint(dict(code))


def test_the_doctor_says_which_code_runs_and_warns_from_another_checkout(tmp_path):
    """issue 64: a venv's editable install of one checkout, run from a second, ran the first's code unannounced."""
    first, second = _checkout(tmp_path / "first"), _checkout(tmp_path / "second")
    assert not code_origin.code_check(first, project=first).warn
    check = code_origin.code_check(second, project=first)
    assert check.warn and f"not the checkout {second} this is run from" in check.detail
    assert f"PYTHONPATH={second}" in check.fix
    on_path = code_origin.code_check(first, project=first, on_path=second)
    assert on_path.warn and f"the ddlbench on PATH runs {second}" in on_path.detail


def test_doctor_of_an_experiment_checks_every_loader_framework_and_launcher_of_its_axes(monkeypatch):
    """`doctor experiment=...` used to check the experiment's defaults (loader=synthetic) only; now each axis value's
    loader, framework and local launcher, and the jobs' launcher where its cells go to Slurm."""
    from benchmarks.config import compose
    from launchers.campaign import axis_configs
    from launchers.lifecycle.doctor import needed_by

    overrides = ["experiment=aach2023_scaling_cpu"]
    needed = set().union(*(needed_by(c, in_jobs=True) for c in axis_configs(overrides)))
    assert {"loader=dali", "loader=native", "framework=ddp", "framework=horovod", "framework=deepspeed"} <= needed
    assert {"launcher=horovodrun", "launcher=srun"} <= needed and "loader=synthetic" not in needed
    assert "launcher=srun" not in needed_by(compose(overrides))
