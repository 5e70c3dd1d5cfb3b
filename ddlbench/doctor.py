"""`ddlbench doctor`: what this machine can run, and how to fix what it cannot (the checks: launchers/lifecycle/doctor.py)."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path


def cmd_doctor(args: argparse.Namespace) -> int:
    """Every check, or with overrides only what that run needs; exit 1 when something is missing."""
    from launchers import code_origin
    from launchers.lifecycle.doctor import for_gpus, format_checks, gpu_check, needed_by, run_checks

    if args.overrides:
        from benchmarks.config import compose

        cfg = compose(args.overrides)
        needed = needed_by(cfg)
        if any(o.startswith("experiment=") for o in args.overrides) and cfg.get("campaign") is not None:
            from launchers import scheduler
            from launchers.campaign import axis_configs

            # every loader, framework and launcher the experiment's cells run; jobs start through system.launcher
            in_jobs = bool(cfg.system.get("partition") or cfg.system.get("account_required")) or scheduler.available()
            needed = set().union(*(needed_by(c, in_jobs=in_jobs) for c in axis_configs(args.overrides)))
        checks = run_checks(needed)
        if cfg.system.device == "cuda":
            checks = [*map(for_gpus, checks), gpu_check(cfg), _cuda_driver(cfg, args.overrides)]
        checks += _node_python(cfg) + _container(cfg) + _whole_nodes(cfg)
    else:
        checks = run_checks()
    checks.insert(0, code_origin.code_check(Path.cwd(), on_path=code_origin.path_ddlbench()))
    print(format_checks(checks))
    missing = [c.name for c in checks if not c.ok]
    if missing:  # a script (or CI) can tell a machine that lacks parts
        print(f"ddlbench: {len(missing)} missing: {', '.join(missing)}; the fix is on each line", file=sys.stderr)
    return 1 if missing else 0


def _cuda_driver(cfg, overrides: list[str]):
    """Whether the installed torch's CUDA runs on this node's driver (on a login node without one: how to ask a
    compute node)."""
    import torch

    from launchers.lifecycle.doctor import cuda_fit, driver_of_this_host
    from launchers.node_python import node_python

    doctor = shlex.join([node_python(cfg.system), "-m", "ddlbench", "doctor", *overrides])
    system = cfg.system
    account = system.get("account") or ("<project>" if system.get("account_required") else None)
    srun = ["srun", "-N1", *([f"-p {system.partition}"] if system.get("partition") else [])]
    srun += [f"--account={account}"] if account else []
    gpus = int(system.get("gpus_per_node") or 0)
    if len(srun) > 2:  # a GPU the step asked for: sites that hide the GPUs a step did not ask for (JUWELS) show none
        srun += [*([f"--gres=gpu:{gpus}"] if gpus else []), "--time=5"]
    where = f"{' '.join(srun)} {doctor}" if len(srun) > 2 else doctor
    return cuda_fit(torch.__version__, torch.version.cuda, driver_of_this_host(), where=where)


def _node_python(cfg) -> list:
    """The Python the jobs run on the nodes, with a warning where they may not see it (launchers/node_python.py):
    for system.hosts, and for Slurm (a profile with a partition or an account, or a submit host whose controller
    answers); nothing for a run on this machine alone, or where every node of the partition is this host."""
    from launchers import scheduler
    from launchers.lifecycle.doctor import Check
    from launchers.node_python import filesystem_of, node_python, only_this_host, python_warning

    system = cfg.system
    if system.get("hosts"):
        nodes = [str(h) for h in system.hosts]
    elif system.get("partition") or system.get("account_required"):
        # a profile for a Slurm cluster: the jobs run on the partition's nodes (unknown off the cluster)
        nodes = scheduler.partition_nodes(system.get("partition")) if scheduler.available() else None
    elif scheduler.available():
        # a local profile on a Slurm submit host: only a controller that answers says the jobs go elsewhere
        nodes = scheduler.partition_nodes(None)
        if nodes is None:
            return []
    else:
        return []
    if only_this_host(nodes):
        return []
    python = node_python(system)
    warning = python_warning(system, nodes=nodes)
    fstype, mount_point = filesystem_of(python)
    return [Check("python on the nodes", True, warning or f"{python} ({fstype} at {mount_point})", warn=bool(warning))]


def _whole_nodes(cfg) -> list:
    """A WARN line where a Slurm profile does not ask for whole nodes (launchers/submit.py shared_nodes_warning)."""
    from launchers.lifecycle.doctor import Check
    from launchers.submit import shared_nodes_warning

    warning = shared_nodes_warning(cfg.system)
    return [Check("whole nodes", True, warning, warn=True)] if warning else []


def _container(cfg) -> list:
    """The image the ranks run in (system.container): its runtime here, the image and its digest; nothing
    without one. A runtime not installed here is a warning on a Slurm profile (the nodes have it, the login
    node may not), missing elsewhere."""
    from benchmarks.errors import ConfigError
    from launchers import container as images
    from launchers.lifecycle.doctor import Check

    try:
        found = images.of(cfg.system, run_root=cfg.run.root)
        if found is None:
            return []
        images.check(found, launcher=str(cfg.system.launcher))
    except ConfigError as error:
        remote = bool(cfg.system.get("partition") or cfg.system.get("account_required"))
        return [Check("container", remote, str(error), "" if remote else "see docs/containers.md", warn=remote)]
    record = images.provenance(found)
    digest = record.get("digest") or "no digest (the image is not on this host)"
    run = {"pyxis": ["srun", f"--container-image={found.image}"], "podman": ["podman", "run", "--rm", found.image]}
    command = [*run.get(found.runtime, [found.runtime, "exec", found.image]), found.python, "-m", "ddlbench", "doctor"]
    said = f"{record['runtime_version'] or found.runtime}: {found.image} ({digest})"
    # the lines above are this host's software; the ranks run the image's
    said += f"; the ranks run the image's torch and libraries: check them with {shlex.join(command)} <overrides>"
    return [Check("container", True, said)]


def add_parser(sub) -> None:
    """Register `ddlbench doctor`."""
    p = sub.add_parser(
        "doctor",
        help="what this machine can run, and how to fix what it cannot",
        epilog="example:\n  ddlbench doctor framework=horovod loader=dali   # exit 1 if that run lacks a part",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("overrides", nargs="*", help="the run's overrides: check only what it needs (default: everything)")
    p.set_defaults(func=cmd_doctor)
