"""data.stage=node_local in a real Slurm job (the local cluster): the node's copy is made, read and removed."""

from __future__ import annotations

import json

import yaml

from benchmarks.data.synth import synth_imagefolder
from launchers.lifecycle import staging
from tests.conftest import find_run
from tests.slurm.cluster import sbatch, wait_for


def _listing(root):
    return sorted((p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*"))


def test_a_staged_run_reads_the_nodes_copy(slurm_up, tmp_path):
    data, scratch = tmp_path / "data", tmp_path / "scratch"
    synth_imagefolder(data, num_classes=2, images_per_class=16, width=32, height=32, quality=90, seed=0, progress=False)
    before = _listing(data)
    job = sbatch(
        "system=slurm_cpu",
        "framework=ddp",
        "loader=native",
        "model=simple_cnn",
        "model.num_classes=auto",
        "model.image_size=32",
        "run.per_gpu_batch=4",
        "run.warmup_steps=1",
        "run.steps=2",
        "run.log_every=0",
        f"data.path={data}",
        "data.stage=node_local",
        f"system.local_scratch={scratch}",
        f"run.root={tmp_path}/runs",
        "run.campaign=t",
        cwd=tmp_path,
    )
    info = wait_for(job)
    log = (tmp_path / f"slurm-{job}.out").read_text()
    assert info["JobState"] == "COMPLETED", log
    run_dir = find_run(tmp_path / "runs" / "t", "ddp-native-simple_cnn-g2-n1-b4-r0")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed", summary
    assert summary["staging_s"] > 0 and summary["staging_bytes"] == sum(p.stat().st_size for p in data.rglob("*.jpg"))
    assert summary["staging_s"] <= summary["startup_s"] and len(summary["staging_s_by_node"]) == 1
    staged = json.loads((run_dir / "meta.json").read_text())["staging"]
    run_name = staging.run_name(run_dir, environ={"SLURM_JOB_ID": str(job)})
    # the loaders were handed the node's copy: <scratch>/ddlbench-<job>-<run>/data
    assert staged["paths"] == {str(data): f"{scratch}/ddlbench-{run_name}/data"}, staged
    assert yaml.safe_load((run_dir / "config.yaml").read_text())["data"]["path"] == str(data)  # as asked
    assert f"data staged to {scratch}/ddlbench-{run_name}" in log
    assert _listing(data) == before  # the original is untouched
    assert list(scratch.iterdir()) == []  # and the copy is gone at the run's end
    events = [json.loads(line.split(" ", 1)[1])["key"] for line in (run_dir / "mllog.txt").read_text().splitlines()]
    assert events.index("init_start") < events.index("staging_start") < events.index("staging_stop")
    assert events.index("staging_stop") < events.index("run_start")
