"""`ddlbench preflight system=slurm_cpu --nodes 1` on the real local Slurm cluster: outside an allocation it asks
Slurm for the node with srun, one process per node, and writes the node's table to the campaign."""

from __future__ import annotations

import csv
import json
import subprocess

from tests.conftest import run_main


def test_preflight_runs_in_srun_and_keeps_its_table(slurm_up, tmp_path, monkeypatch):
    """A 20 s budget: about 15 s here."""
    monkeypatch.chdir(tmp_path)
    done = run_main(
        "preflight",
        "system=slurm_cpu",
        f"run.root={tmp_path}",
        "run.campaign=screened",
        "--nodes",
        "1",
        "--budget-s",
        "20",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "preflight outside an allocation: srun asks Slurm for 1 node(s) for at most 1 min" in done.stderr
    assert "srun --nodes=1 --ntasks=1 --ntasks-per-node=1 --cpus-per-task=4 --time=1" in done.stderr
    assert "slow nodes: none" in done.stdout
    node = subprocess.run(["sinfo", "-h", "-o", "%N"], capture_output=True, text=True).stdout.split()[0]
    (kept,) = (tmp_path / "screened" / "preflight").glob("*.csv")
    with open(kept) as f:
        (row,) = list(csv.DictReader(f))
    assert (row["node"], row["verdict"]) == (node, "ok") and float(row["gemm_tflops"]) > 0  # Slurm's node name
    document = json.loads(kept.with_suffix(".json").read_text())
    assert document["exclude"] == [] and document["links"] == []
    assert document["nodes"][0]["measured"]["threads"] == 4  # system.cpus_per_rank x ranks_per_node
