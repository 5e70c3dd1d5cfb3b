"""data.stage=node_local across two network-namespace "hosts" (launchers/netns.py, `ddlbench run system.hosts`):
each host has its own scratch folder (the namespaces share this machine's disk, so the folder names the node by
torchrun's GROUP_RANK, expanded on the node: a profile's `local_scratch: <dir>/node$GROUP_RANK`), both copy, and the summary has both nodes' seconds."""

from __future__ import annotations

import json
import os
import sys

from benchmarks.data.synth import synth_imagefolder
from launchers import netns
from tests.conftest import REPO
from tests.stash.test_run_hosts_netns import _finish, _hosts, _ssh_stand_in


def test_both_hosts_stage_and_the_summary_shows_both(netns_hosts, rank_processes, tmp_path):
    import subprocess

    data, scratch, run_dir = tmp_path / "data", tmp_path / "scratch", tmp_path / "run"
    synth_imagefolder(data, num_classes=2, images_per_class=8, width=32, height=32, quality=90, seed=0, progress=False)
    overrides = [
        "system=netns_cpu",
        "framework=ddp",
        "model=simple_cnn",
        "model.num_classes=auto",
        "model.image_size=32",
        "loader=native",
        "run.per_gpu_batch=4",
        "run.warmup_steps=1",
        "run.steps=2",
        "run.log_every=0",
        "system.ranks_per_node=1",
        f"+system.env.GLOO_SOCKET_IFNAME={netns.IFNAME}",
        f"data.path={data}",
        "data.stage=node_local",
        f"run.dir={run_dir}",
    ]
    # a profile of the user's own (DDLBENCH_CONFIG): a variable in a value is a profile's, not an override's
    (tmp_path / "conf" / "system").mkdir(parents=True)
    (tmp_path / "conf" / "system" / "netns_cpu.yaml").write_text(
        "defaults: [system_schema, _self_]\nname: netns_cpu\nenv: {OMP_NUM_THREADS: '1'}\n"
        f"local_scratch: {scratch}/node$GROUP_RANK\n"
    )
    with netns.Emulation(num_nodes=2, link=netns.Link()) as topo:
        _ssh_stand_in(tmp_path, topo)
        env = {
            **{k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")},
            "PATH": f"{tmp_path}:{os.environ['PATH']}",
            "PYTHONPATH": str(REPO),
            "DDLBENCH_CONFIG": str(tmp_path / "conf"),
        }
        argv = netns.exec_in(topo.node(0), sys.executable, "-m", "ddlbench", "run", _hosts(topo), *overrides)
        proc = subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
        )
        code, out = _finish(proc)
    assert code == 0, out[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["status"], summary["num_nodes"]) == ("completed", 2), summary
    assert len(summary["staging_s_by_node"]) == 2 and all(s > 0 for s in summary["staging_s_by_node"]), summary
    assert summary["staging_s"] == max(summary["staging_s_by_node"])
    records = [json.loads((run_dir / f"staging_rank{n}.json").read_text()) for n in (0, 1)]  # one rank per host
    name = records[0]["root"].rsplit("/", 1)[1]
    assert name.startswith("ddlbench-run-") and [r["root"] for r in records] == [
        f"{scratch}/node{n}/{name}" for n in (0, 1)
    ], records
    assert sorted(p.name for p in scratch.iterdir()) == ["node0", "node1"]
    assert [list((scratch / f"node{n}").iterdir()) for n in (0, 1)] == [[], []]  # both copies removed at the end
