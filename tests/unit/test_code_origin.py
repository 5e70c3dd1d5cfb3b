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
