"""`ddlbench preflight`'s arithmetic and record (launchers/lifecycle/preflight/, launchers/lifecycle/preflight/__init__.py): the ring's rounds,
the verdict on nodes and links, the kept files, and the campaign's jobs kept off the slow nodes (sbatch --exclude,
the exact argv). The measurement across hosts: tests/stash/test_preflight_netns.py."""

from __future__ import annotations

import json
import re
import sys

import pytest

from benchmarks.errors import ConfigError
from launchers import campaign, code_origin, submit
from launchers.lifecycle import preflight
from launchers.lifecycle.preflight.probe import below, ring_rounds, verdict
from launchers.slurm import RUN_SCRIPT
from tests.conftest import REPO, run_main

# the submitting checkout's code for the job (launchers/code_origin.py), after sbatch's own exports
CODE = "".join(f",{k}={v}" for k, v in code_origin.launch_environment().items())


@pytest.mark.parametrize("n", range(1, 10))
def test_each_node_meets_two_partners_in_rounds_of_disjoint_pairs(n):
    rounds = ring_rounds(n)
    for pairs in rounds:
        members = [node for pair in pairs for node in pair]
        assert len(members) == len(set(members))  # a node is in one pair of a round at most
    partners = {i: {b if a == i else a for pairs in rounds for a, b in pairs if i in (a, b)} for i in range(n)}
    assert all(len(p) == min(2, n - 1) for p in partners.values()), partners
    assert len(rounds) == {1: 0, 2: 1}.get(n, 2 if n % 2 == 0 else 3)


def test_five_percent_below_is_slow_and_less_is_not():
    assert below(95.0, 100.0) and below(90.0, 100.0)
    assert not below(95.1, 100.0) and not below(100.0, 100.0)


def test_a_node_below_the_median_gemm_rate_is_slow():
    judged = verdict({"a": 10.0, "b": 10.2, "c": 9.6, "d": 7.0}, {})
    assert judged.gemm_median_tflops == pytest.approx(9.8)
    assert judged.slow_gemm == ("d",) and judged.slow_nodes == ("d",)  # c is 2% below: ok
    assert (judged.why("d"), judged.why("a")) == ("slow (GEMM)", "ok")
    assert judged.link_reference_gb_s is None


def test_a_node_slow_with_both_partners_is_named_a_single_slow_link_only_itself():
    fast = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}
    # c's NIC: both of c's links slow, so c is named; the plain median of the links would be 0.6 (half are c's)
    judged = verdict(fast, {("a", "b"): 10.0, ("b", "c"): 6.0, ("c", "d"): 6.1, ("d", "a"): 9.9})
    assert judged.link_reference_gb_s == pytest.approx(9.95)
    assert judged.slow_links == (("b", "c"), ("c", "d")) and judged.slow_network == ("c",)
    assert judged.slow_nodes == ("c",) and judged.why("c") == "slow (every link)"
    # one bad cable between a and b: the link is named, neither node (each has a good link)
    judged = verdict(fast, {("a", "b"): 4.0, ("b", "c"): 10.0, ("c", "d"): 10.0, ("d", "a"): 10.0})
    assert judged.slow_links == (("a", "b"),) and judged.slow_nodes == ()
    # three nodes, one slow: two of the three links are its, and it is still the one named
    judged = verdict({"a": 1.0, "b": 1.0, "c": 0.5}, {("a", "b"): 10.0, ("b", "c"): 5.0, ("c", "a"): 5.0})
    assert judged.slow_nodes == ("c",) and judged.why("c") == "slow (GEMM; every link)"


def test_a_link_to_a_slow_node_says_nothing_of_its_partner():
    # seen in CI: c under a CPU quota slows its links; a-b 6% below by noise; b kept 'ok', only c excluded
    gemm = {"a": 0.0776, "b": 0.0988, "c": 0.0454}
    judged = verdict(gemm, {("a", "b"): 0.515, ("b", "c"): 0.454, ("c", "a"): 0.55})
    assert judged.slow_links == (("a", "b"), ("b", "c"))  # the links are still named
    assert judged.slow_network == () and judged.slow_nodes == ("c",) and judged.why("b") == "ok"
    # four nodes, d slow for its GEMM: b's two other links both slow still name b
    gemm = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 0.5}
    links = {("a", "b"): 6.0, ("b", "c"): 6.0, ("c", "d"): 10.0, ("d", "a"): 10.0, ("a", "c"): 10.0}
    judged = verdict(gemm, links)
    assert judged.slow_network == ("b",) and judged.slow_nodes == ("b", "d")


def test_two_nodes_one_link_is_never_slow():
    judged = verdict({"a": 1.0, "b": 0.8}, {("a", "b"): 1.0})
    assert judged.slow_links == () and judged.slow_network == ()
    assert judged.slow_gemm == ("b",)  # 11% below the median of the two


def _measured(rates: dict[str, float], time_s: dict[tuple[int, int], float]) -> dict:
    """What rank 0 writes: every node's figures, its links with their ranks."""
    nodes = []
    for rank, (name, rate) in enumerate(rates.items()):
        links = [
            {"round": k, "ranks": list(pair), "time_s": t, "calls": 5}
            for k, (pair, t) in enumerate(time_s.items())
            if rank in pair
        ]
        nodes.append(
            {"node": name, "rank": rank, "gemm_tflops": [rate], "links": links, "size_bytes": 10**9, "measure_s": 9.0}
        )
    return {"world_size": len(rates), "nodes": nodes}


def test_the_record_is_kept_beside_earlier_ones_never_over_them(tmp_path):
    measured = _measured({"n1": 1.0, "n2": 1.0, "n3": 0.5}, {(0, 1): 1.0, (1, 2): 2.0, (2, 0): 2.0})
    first = preflight.new_stem(tmp_path, now=0)
    screen = preflight.record(measured, stem=first, settings={"budget_s": 60}, spent_s=12.0)
    assert screen.slow_nodes == ("n3",) and screen.slow_links == (("n2", "n3"), ("n3", "n1"))
    again = preflight.new_stem(tmp_path, now=0)  # the same second: another name
    assert (first.name, again.name) == ("19700101T000000Z", "19700101T000000Z-2")
    document = json.loads(screen.json_path.read_text())
    assert document["exclude"] == ["n3"] and document["budget_s"] == 60 and document["spent_s"] == 12.0
    assert [(link["a"], link["b"], link["busbw_gb_s"], link["slow"]) for link in document["links"]] == [
        ("n1", "n2", 1.0, False),
        ("n2", "n3", 0.5, True),
        ("n3", "n1", 0.5, True),
    ]
    assert screen.csv_path.read_text().splitlines()[0] == "node,gemm_tflops,vs_median_pct,links,verdict"
    with pytest.raises(FileExistsError):
        preflight.record(measured, stem=first, settings={}, spent_s=1.0)


def test_the_budget_is_two_minutes_at_most():
    with pytest.raises(ConfigError, match=r"--budget-s 300 is outside 10\.\.120"):
        preflight.check_budget(300)


def _smoke(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = ["experiment=slurm_smoke", "system=slurm_cpu", f"run.root={tmp_path / 'runs'}"]
    cfg, cells = campaign.plan(base)
    return base, cfg, cells


def test_the_slow_nodes_go_to_sbatch_exclude(tmp_path, monkeypatch):
    base, cfg, cells = _smoke(tmp_path, monkeypatch)
    cell = cells[0]
    logs = tmp_path / "runs" / "slurm_smoke" / "slurm"
    assert submit.sbatch_command(cfg, cell, base, exclude=["n3", "n7"]) == [
        "sbatch",
        "--parsable",
        "--nodes=1",
        f"--ntasks-per-node={cell.ranks_per_node}",
        "--cpus-per-task=1",
        "--time=00:10:00",
        f"--job-name=ddlbench/slurm_smoke/{cell.name}",
        f"--output={logs}/{cell.name}-%j.out",
        f"--export=ALL,DDLBENCH_PYTHON={sys.executable}{CODE}",
        f"--chdir={tmp_path}",
        "--exclude=n3,n7",
        str(RUN_SCRIPT),
        *cell.overrides(campaign.job_overrides(base)),
    ]
    array = submit.array_sbatch_command(cfg, cells, cells_file=tmp_path / "cells.jsonl", max_jobs=None, exclude=["n3"])
    assert "--exclude=n3" in array and array.index("--exclude=n3") == array.index(f"--chdir={tmp_path}") + 1
    assert not any(a.startswith("--exclude") for a in submit.sbatch_command(cfg, cell, base))


def test_a_dry_run_takes_the_newest_preflight_and_shows_the_exclude(tmp_path, monkeypatch, no_slurm):
    base, cfg, _ = _smoke(tmp_path, monkeypatch)
    folder = preflight.folder_of(cfg)
    folder.mkdir(parents=True)
    measured = _measured({"n1": 1.0, "n2": 1.0, "n3": 0.5}, {(0, 1): 1.0, (1, 2): 2.0, (2, 0): 2.0})
    preflight.record(
        measured, stem=folder / "20261205T000000Z", settings={"when_utc": "2026-12-05T00:00:00Z"}, spent_s=1
    )
    done = run_main("campaign", "submit", *base, "--preflight", "--dry-run")
    assert done.returncode == 0, done.stderr
    sbatch = [line for line in done.stdout.splitlines() if line.startswith("sbatch ")]
    assert sbatch and all(re.search(r" --exclude=n3 ", line) for line in sbatch), done.stdout
    assert "newest preflight" in done.stderr and "names slow: n3" in done.stderr
    kept = run_main("campaign", "submit", *base, "--preflight", "--keep-slow", "--dry-run")
    assert kept.returncode == 0 and "--exclude" not in kept.stdout and "--keep-slow: n3" in kept.stderr


def test_srun_asks_for_the_nodes_and_runs_the_node_program_in_the_profiles_image(tmp_path, monkeypatch):
    from benchmarks.config import compose

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preflight.shutil, "which", lambda name: f"/usr/bin/{name}")
    sif = tmp_path / "ddlbench.sif"
    sif.touch()
    cfg = compose(
        [
            "system=slurm_cpu",
            f"run.root={tmp_path / 'runs'}",
            "run.campaign=c",
            "system.container.runtime=apptainer",
            f"system.container.image={sif}",
        ]
    )
    out = preflight.folder_of(cfg) / "20261205T000000Z.nodes.json"
    plan = preflight.plan(cfg, out=out, budget_s=90, nodes=3, environ={"MASTER_ADDR": "stale", "PATH": "/bin"})
    assert plan.argv == [
        "srun",
        "--nodes=3",
        "--ntasks=3",
        "--ntasks-per-node=1",
        "--cpus-per-task=4",  # slurm_cpu: 4 ranks per node x 1 CPU each, one GEMM thread each
        "--time=2",
        "--job-name=ddlbench/c/preflight",
        "--kill-on-bad-exit=1",
        "apptainer",
        "exec",
        "--bind",
        f"{REPO}:{REPO}:ro",  # the project, the working folder (read-only) and the campaign's preflight/ (read-write)
        "--bind",
        f"{tmp_path}:{tmp_path}:ro",
        "--bind",
        f"{preflight.folder_of(cfg)}:{preflight.folder_of(cfg)}",
        str(sif),
        "python3",
        "-m",
        "launchers.lifecycle.preflight",
        *("--out", str(out), "--measure-s", "45", "--threads", "4", "--timeout-s", "90", "--device", "cpu"),
    ]
    assert plan.timeout_s is None and "MASTER_ADDR" not in plan.env  # Slurm bounds it; the task finds rank 0


def test_the_profiles_own_exclude_and_the_preflights_become_one(tmp_path, monkeypatch):
    """sbatch keeps only the last --exclude: a profile's `--exclude=n1` and `-x n2` and the preflight's slow n3 make one."""
    base, cfg, cells = _smoke(tmp_path, monkeypatch)
    cfg.system.sbatch_args = ["--exclude=n1", "--qos=big", "-x", "n2"]
    argv = submit.sbatch_command(cfg, cells[0], base, exclude=["n3", "n1"])
    assert [a for a in argv if a.startswith(("--exclude", "-x"))] == ["--exclude=n1,n2,n3"]
    assert "--qos=big" in argv


def test_srun_of_a_centre_profile_runs_the_jobs_python_after_their_prelude_where_they_may_land(tmp_path, monkeypatch):
    from benchmarks.config import compose

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(preflight.shutil, "which", lambda name: f"/usr/bin/{name}")
    cfg = compose(
        [
            "system=juwels_booster",
            "system.account=proj",
            "system.python=/p/venv/bin/python",
            f"run.root={tmp_path / 'runs'}",
        ]
    )
    cfg.system.sbatch_args = ["--qos=big", "--mail-type=END"]  # (an override takes no '=' in a value)
    plan = preflight.plan(cfg, out=tmp_path / "x.nodes.json", budget_s=60, nodes=2, environ={"PATH": "/bin"})
    prelude = ["bash", "-c", 'module load Stages/2025 GCC OpenMPI NCCL\nexec "$@"', "ddlbench-prelude"]
    assert plan.argv[:5] == [*prelude, "srun"]
    assert "--exclusive" in plan.argv and "--qos=big" in plan.argv and "--mail-type=END" not in plan.argv
    assert "/p/venv/bin/python" in plan.argv  # the jobs' Python, not this one
    cfg.system.account = None
    with pytest.raises(ConfigError, match="system.account=<project>"):
        preflight.plan(cfg, out=tmp_path / "x.nodes.json", budget_s=60, nodes=2, environ={"PATH": "/bin"})


def test_every_host_of_an_apptainer_preflight_gets_the_profiles_variables_over_the_images(tmp_path, monkeypatch):
    from benchmarks.config import compose
    from launchers import hosts

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(hosts, "check", lambda *a, **k: None)  # no ssh here
    monkeypatch.setattr(preflight.shutil, "which", lambda name: f"/usr/bin/{name}")
    sif = tmp_path / "ddlbench.sif"
    sif.touch()
    cfg = compose(
        [
            "system=local_cpu",
            "system.hosts=[h1,h2]",
            "+system.env.NCCL_IB_TIMEOUT=22",
            f"run.root={tmp_path / 'runs'}",
            "system.container.runtime=apptainer",
            f"system.container.image={sif}",
        ]
    )
    plan = preflight.plan(cfg, out=tmp_path / "x.nodes.json", budget_s=60, nodes=None, environ={"PATH": "/bin"})
    (remote,) = [line for host, line in plan.shown if host == "h2"]
    assert "APPTAINERENV_NCCL_IB_TIMEOUT=22" in remote and "NCCL_IB_TIMEOUT=22" in remote
