"""Stash stall analysis: plan and run the paired runs (the Stash study; docs/architecture.md "Definitions");
the study's own keys are launchers/stash_config.py, the commands ddlbench/stash.py.

    ddlbench stash plan   model=resnet model.depth=50 system=h200 stash.gpus=2 [stash.nodes=2 ...]
    ddlbench stash run    model=simple_cnn data.path=data/synth stash.gpus=2 [--slurm] [--dry-run]
    ddlbench stash report model=simple_cnn stash.gpus=2          (analysis/stash.py)
    ddlbench stash netns-clean                                   (namespaces a killed session left)

Every run of a study has the per-GPU batch (run.per_gpu_batch) and the per-GPU samples (run.steps x
batch; run.epochs is refused) of the N-GPU run:

  role    loader      GPUs  nodes  pairs into
  gpu1    synthetic   1     1      baseline of the interconnect stall (stash.gpus=1: of the cpu stall)
  node    synthetic   N     1      interconnect = node - gpu1; baseline of network and cpu
  nodes   synthetic   N     k      network = nodes - node          (k > 1: stash.nodes)
  warm    real        N     1      cpu  = warm - node              (data.cache=warm)
  cold    real        N     1      disk = cold - warm              (data.cache=cold)

`stash.*` keys are read by launchers/stash_config.py, not by Hydra: an optional section of the run config cannot be set from
the command line without an experiment file, and a mandatory one would land in every run's
config.yaml. They are typed and checked like Hydra keys (a typo names the key).

A Stash experiment (conf/experiment/stash2021_depth.yaml) carries its study in `experiment.stash`: the
stash.* values (the command line's win) and a `sweep`, one entry per paired study (its name -> its Hydra
overrides, e.g. resnet50_nobn: [model=resnet, model.depth=50, model.batch_norm=false]). Every entry's
pairs are planned into the one campaign, one entry after the other; stash.only=a,b keeps some entries.
"""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

from benchmarks.errors import ConfigError
from launchers import programs
from launchers.lifecycle.supervise import INTERRUPTED_EXIT, announce, run_launcher
from launchers.programs.base import LOCAL
from launchers.stash_config import StashConfig, campaign_name, check_overrides, experiment_study, parse_stash

ROLES = ("gpu1", "node", "nodes", "warm", "cold")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedRun:
    """One run of the study: its role, its cell, its folder and its full Hydra overrides."""

    role: str
    model: str  # the run's model name (benchmarks.rundir.model_name): a sweep's entries differ by it
    loader: str
    cache: str
    world_size: int
    num_nodes: int
    ranks_per_node: int
    per_gpu_batch: int
    per_gpu_samples: int
    repeat: int
    run_dir: Path
    overrides: tuple[str, ...]  # the run's full Hydra overrides, run.dir included

    @property
    def global_batch(self) -> int:
        return self.per_gpu_batch * self.world_size


def plan(overrides: list[str]) -> tuple[StashConfig, object, list[PlannedRun]]:
    """(stash config, composed base config, the paired runs of every sweep entry), every run's config validated."""
    from benchmarks.config import compose
    from benchmarks.data.coldcache import check

    base = [o for o in overrides if not o.startswith("stash.")]
    check_overrides(base)
    parse_stash(overrides, check=False)  # a misspelt stash key fails before anything is composed
    cfg = compose(base)
    stash, sweep = experiment_study(cfg, overrides)
    check(cfg.data.cache, cfg.data.cache_evict)
    campaign = campaign_name(cfg)
    root = (Path(cfg.run.root) / campaign).resolve()
    runs: list[PlannedRun] = []
    for _, point in sweep:
        runs += _plan_point(stash, [*base, *point], campaign=campaign, root=root, repeat0=int(cfg.run.repeat))
    seen: dict[Path, PlannedRun] = {}
    for run in runs:
        other = seen.setdefault(run.run_dir, run)
        if other is not run:
            raise ConfigError(
                f"two sweep entries plan one run ({run.run_dir.name}, {run.role}): an entry repeats another or "
                "sets a key that is no run setting; drop the duplicate from experiment.stash.sweep"
            )
    return stash, cfg, runs


def _plan_point(stash: StashConfig, base: list[str], *, campaign: str, root: Path, repeat0: int) -> list[PlannedRun]:
    """The paired runs of one study: one model, batch and steps, every role."""
    from omegaconf import OmegaConf

    from benchmarks.config import compose
    from benchmarks.rundir import cell_identity
    from benchmarks.validate import validate

    # each role's own keys are plain values: compose() composes each loader's choice once and applies them to
    # a copy, as Hydra does (stash2021_depth's 19 models: 19 compositions per loader, not 76)
    synthetic = compose([*base, "loader=synthetic"])
    if synthetic.run.epochs is not None:
        raise ConfigError(
            f"run.epochs={synthetic.run.epochs}: stash pairs runs by measured steps (same per-GPU samples); "
            "drop run.epochs and set run.steps"
        )
    n, k = stash.gpus, stash.nodes
    real = [] if stash.loader == "none" else [("warm", stash.loader, "warm"), ("cold", stash.loader, "cold")]
    # one GPU: no interconnect pair, the 1-GPU synthetic run is the cpu stall's baseline
    roles = [
        ("gpu1", "synthetic", "warm"),
        *([("node", "synthetic", "warm")] if n > 1 else []),
        *([("nodes", "synthetic", "warm")] if k > 1 else []),
        *real,
    ]
    samples_per_epoch = int(synthetic.loader.samples_per_epoch)
    runs: list[PlannedRun] = []
    for role, loader, cache in roles:
        world = 1 if role == "gpu1" else n
        nodes = k if role == "nodes" else 1
        per_node = world // nodes
        values = [
            f"system.ranks_per_node={per_node}",
            f"data.cache={cache}",
            f"run.campaign={campaign}",
            f"run.stash_role={role}",  # marks the run as the study's: the report pairs only these
        ]
        if loader == "synthetic" and role == "gpu1":
            # the same virtual epoch per GPU as the N-GPU run, so epoch boundaries fall on the same steps
            values.append(f"loader.samples_per_epoch={max(1, samples_per_epoch // n)}")
        extra = [f"loader={loader}", *values]
        run_cfg = compose([*base, *extra])
        validate(run_cfg, check_device=False)
        if loader != "synthetic" and not run_cfg.data.path:
            raise ConfigError(
                f"stash.loader={loader} reads data.path, which is unset; pass data.path=<ImageFolder> "
                "(ddlbench data synth --out DIR makes one) or stash.loader=none"
            )
        for r in range(stash.repeats):
            repeat = repeat0 + r
            name = cell_identity.dir_name(
                OmegaConf.to_container(run_cfg, resolve=True), world_size=world, num_nodes=nodes, repeat=repeat
            )
            # warm and cold runs share a cell name; the cold one lives in its own folder (load.py reads any depth)
            run_dir = (root / "cold-cache" / name) if cache == "cold" else (root / name)
            runs.append(
                PlannedRun(
                    role=role,
                    model=cell_identity.model_name_of(run_cfg.model),
                    loader=loader,
                    cache=cache,
                    world_size=world,
                    num_nodes=nodes,
                    ranks_per_node=per_node,
                    per_gpu_batch=int(run_cfg.run.per_gpu_batch),
                    per_gpu_samples=int(run_cfg.run.steps) * int(run_cfg.run.per_gpu_batch),
                    repeat=repeat,
                    run_dir=run_dir,
                    overrides=(*base, *extra, f"run.repeat={repeat}", f"run.dir={run_dir}"),
                )
            )
    return runs


def run_state(run: PlannedRun) -> str:
    from launchers.lifecycle import rundir_state

    return rundir_state.state(run.run_dir)


def format_plan(stash: StashConfig, cfg, runs: list[PlannedRun], *, states: bool = True) -> str:
    from benchmarks.rundir.cell_identity import model_name_of

    header = (
        "role",
        "model",
        "loader",
        "cache",
        "gpus",
        "nodes",
        "ranks/node",
        "batch/gpu",
        "samples/gpu",
        "global batch",
        "repeat",
        "state",
        "run dir",
    )
    rows = [header] + [
        (
            r.role,
            r.model,
            r.loader,
            r.cache,
            str(r.world_size),
            str(r.num_nodes),
            str(r.ranks_per_node),
            str(r.per_gpu_batch),
            str(r.per_gpu_samples),
            str(r.global_batch),
            str(r.repeat),
            run_state(r) if states else "-",
            str(r.run_dir),
        )
        for r in runs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    table = "\n".join("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows)
    net = (
        ""
        if stash.nodes == 1
        else f"; network run: {stash.nodes} nodes "
        + ("through Slurm" if stash.launcher == "slurm" else f"emulated ({_link(stash).describe()})")
    )
    models = list(dict.fromkeys(r.model for r in runs)) or [model_name_of(cfg.model)]
    named = ", ".join(models) if len(models) == 1 else f"{len(models)} models ({', '.join(models)})"
    return (
        f"{table}\nstash study {campaign_name(cfg)}: {named}, "
        f"{cfg.framework.name}, {cfg.precision.name}, system={cfg.system.name}, {len(runs)} runs{net}"
    )


def cold_cache_note(cfg, runs: list[PlannedRun]) -> str | None:
    """A warning when one cold run reads more samples than data.path holds: its later steps re-read warm pages."""
    cold = [r for r in runs if r.cache == "cold"]
    if not cold or not cfg.data.path or not Path(cfg.data.path).is_dir():
        return None
    run = cold[0]
    needed = run.world_size * run.per_gpu_batch * (int(cfg.run.warmup_steps) + int(cfg.run.steps))
    found = 0
    for path in Path(cfg.data.path).rglob("*"):  # stop counting once there are enough
        found += path.is_file()
        if found > needed:
            return None
    return (
        f"note: a cold run reads {needed} samples but {cfg.data.path} holds {found} files: later steps re-read "
        "cached pages, so the disk stall is understated; use a larger dataset or fewer run.steps"
    )


def _link(stash: StashConfig):
    from launchers.netns import Link

    return Link(rate_mbit=stash.net_bandwidth_mbit or None, delay_ms=stash.net_latency_ms or None)


def local_argv(cfg, run: PlannedRun, *, master_port: int) -> list[str]:
    """The launch argv of a one-node run (the framework's local launcher, as `ddlbench run`)."""
    from launchers.local import local_command, ranks_may_fork

    return local_command(
        launcher=cfg.framework.local_launcher,
        nproc=run.world_size,
        master_port=master_port,
        overrides=list(run.overrides),
        fork_ranks=ranks_may_fork(cfg),
    )


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_local(stash: StashConfig, cfg, runs: list[PlannedRun], *, dry_run: bool = False) -> int:
    """Run every planned run that has no completed directory yet, one after the other."""
    from benchmarks.adapters import adapter_class
    from launchers import netns
    from launchers.lifecycle.forked_rank import import_what_ranks_import_late
    from launchers.local import ranks_may_fork

    env = {**os.environ, **{k: str(v) for k, v in cfg.system.env.items()}}
    failed = 0
    warmed = False
    for run in runs:
        state = run_state(run)
        if state == "completed":
            print(f"[ddlbench] stash {run.role} r{run.repeat}: completed, skipped ({run.run_dir})", file=sys.stderr)
            continue
        if state != "missing":
            raise ConfigError(
                f"{run.run_dir} holds a {state} run (never overwritten); move it away or pass "
                f"run.repeat={run.repeat + 100} for a fresh set"
            )
        if run.role == "warm" and not warmed and not dry_run:
            # the warm side means the dataset in DRAM, not whatever the page cache happens to hold
            from benchmarks.data.coldcache import warm

            done = warm(Path(cfg.data.path))
            print(
                f"[ddlbench] stash: read {done['num_files']} files ({done['bytes_read'] / 1e6:.1f} MB) of "
                f"{cfg.data.path} into the page cache; resident now {(done['resident_after_bytes'] or 0) / 1e6:.1f} MB",
                file=sys.stderr,
                flush=True,
            )
            warmed = True
        if run.role == "nodes":
            print(
                f"[ddlbench] stash nodes r{run.repeat}: {run.world_size} ranks in {run.num_nodes} emulated nodes "
                f"({_link(stash).describe()})",
                file=sys.stderr,
                flush=True,
            )
            if dry_run:
                topo = netns.Topology(tag="<tag>", num_nodes=run.num_nodes, link=_link(stash))
                for r in range(run.world_size):
                    print(
                        shlex.join(
                            netns.rank_command(topo, rank=r, ranks_per_node=run.ranks_per_node, overrides=run.overrides)
                        )
                    )
                continue
            with netns.Emulation(num_nodes=run.num_nodes, link=_link(stash)) as topo:
                code = netns.run_ranks(
                    topo,
                    world_size=run.world_size,
                    ranks_per_node=run.ranks_per_node,
                    overrides=run.overrides,
                    master_port=_free_port(),
                    env=env,
                )
        else:
            argv = local_argv(cfg, run, master_port=_free_port())
            announce(argv, dry_run=dry_run, label=f"stash {run.role} r{run.repeat}: ")
            if dry_run:
                continue
            # Ctrl-C, a killed rank 0, a launcher started as a fork: launchers/lifecycle/supervise.py
            fork = programs.get(cfg.framework.local_launcher, LOCAL).forks
            if ranks_may_fork(cfg):  # they fork from here (local_argv): import once what each would
                import_what_ranks_import_late(adapter_class("framework", cfg.framework.name))
            code = run_launcher(argv, env=env, run_dir=run.run_dir, fork=fork)
            if code == INTERRUPTED_EXIT:
                return code  # the rest of the plan does not start
        if code:
            failed += 1
            print(f"ddlbench: error: stash {run.role} run failed (exit {code}); logs in {run.run_dir}", file=sys.stderr)
    return 1 if failed else 0


def run_slurm(stash: StashConfig, cfg, runs: list[PlannedRun], *, dry_run: bool = False) -> int:
    """One sbatch per missing run through the campaign's submission (launchers/submit.py: slurm/run.sh, the
    system profile's flags, the ledger runs/<campaign>/slurm/jobs.jsonl); job names
    ddlbench/<campaign>/<cell>[-cold]."""
    from omegaconf import OmegaConf

    from launchers import submit
    from launchers.campaign import Cell

    cfg = OmegaConf.merge(cfg, {"run": {"campaign": campaign_name(cfg)}})
    queued = {} if dry_run else submit.queued_jobs(cfg.run.campaign)
    for run in runs:
        cell = Cell(
            choices=(),
            num_gpus=run.world_size,
            num_nodes=run.num_nodes,
            ranks_per_node=run.ranks_per_node,
            repeat=run.repeat,
            run_dir=run.run_dir,
        )
        name = submit.job_name(cfg.run.campaign, cell) + ("-cold" if run.cache == "cold" else "")
        if run_state(run) == "completed" or name in queued:
            continue
        base = [o for o in run.overrides if not o.startswith("run.repeat=")]  # Cell.overrides adds it back
        argv = submit.sbatch_command(cfg, cell, base, name=name)
        if dry_run:
            print(shlex.join(argv))
            continue
        try:
            (job_id,) = submit.submit(argv, logs=submit.slurm_dir(cfg), cells=[name], fields={"role": run.role})
        except submit.Refused as said:
            print(
                f"ddlbench: error: sbatch refused stash {run.role} ({said}); command: {shlex.join(argv)}",
                file=sys.stderr,
            )
            return 1
        print(f"[ddlbench] submitted stash {run.role} r{run.repeat}: job {job_id}")
    return 0
