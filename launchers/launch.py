"""`ddlbench run`'s launch, once the run directory is its own: the ranks' command on this machine
(launchers/local.py) or across system.hosts (launchers/hosts.py), in the run's image where one is asked
(launchers/container.py), shown, then started and supervised (launchers/lifecycle/supervise.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from benchmarks.errors import ConfigError
from launchers import code_origin, programs
from launchers.local import free_port, local_command, ranks_may_fork
from launchers.programs.base import LOCAL


def run_container(cfg, *, run_dir: Path):
    """The container of system.container for this run (launchers/container.py for_run), None for none."""
    from launchers import container

    return container.for_run(cfg, run_dir=run_dir, token=f"{run_dir.name}-{os.getpid()}")


def launch_run(
    cfg,
    *,
    overrides: list[str],
    run_dir: Path,
    repeat: int,
    framework,
    spread,
    nproc: int,
    dry_run: bool,
    quiet: bool = False,
) -> int:
    """`ddlbench run` once the run directory is this process's: the launch command (on this machine, across
    system.hosts, in an image), shown, then started and supervised. Returns the launcher's exit code."""
    from launchers import container as image
    from launchers import hosts as several
    from launchers.lifecycle.forked_rank import import_what_ranks_import_late
    from launchers.lifecycle.supervise import INTERRUPTED_EXIT, announce, run_launcher
    from launchers.node_python import node_python

    num_nodes = len(spread.hosts) if spread else 1
    taken_repeat = [] if repeat == int(cfg.run.repeat) else [f"run.repeat={repeat}"]  # a live run held the asked one
    overrides = [*overrides, *taken_repeat, f"run.dir={run_dir.resolve()}"]
    inside = run_container(cfg, run_dir=run_dir.resolve())  # None: the ranks run on the host's own Python
    if inside is not None and inside.runtime == "pyxis":
        raise ConfigError(
            "system.container.runtime=pyxis runs through srun inside a Slurm job, not `ddlbench run`; submit with "
            "`ddlbench campaign submit`, or run here with system.container.runtime=podman or apptainer"
        )
    image.check(inside, launcher=str(cfg.framework.local_launcher))
    # a container's ranks are its launcher's children inside the image: never forks of this process
    fork_ranks, hostfile = spread is None and inside is None and ranks_may_fork(cfg), None
    wrap, cleanup = image.prefix(inside), image.stop_argv(inside)
    if spread:
        python = inside.python if inside else node_python(cfg.system)
        several.check(spread, run_dir=run_dir, python=python if inside is None else None)
        across = several.plan(
            spread,
            launcher=str(cfg.framework.local_launcher),
            ranks_per_node=nproc,
            master_port=free_port(),
            overrides=overrides,
            run_dir=run_dir.resolve(),
            env={**cfg.system.env, **code_origin.launch_environment(), **image.environment(inside)},
            python=python,
            container=wrap,
            cleanup=cleanup,
        )
        argv, shown, hostfile = across.argv, across.shown, across.hostfile
    else:
        argv = local_command(
            launcher=cfg.framework.local_launcher,
            nproc=nproc,
            master_port=free_port(),
            overrides=overrides,
            fork_ranks=fork_ranks,
            **({"python": inside.python, "container": wrap} if inside else {}),
        )
        shown = None
    env = {**os.environ, **{k: str(v) for k, v in cfg.system.env.items()}}
    env.update(code_origin.launch_environment(env))  # the ranks import this checkout's code, not the cwd's
    if not dry_run:
        env.update(image.environment(inside))  # what rank 0 records of the image (meta.json `container`)
    if not quiet:
        if shown is None:
            announce(argv, dry_run=dry_run)
        for host, line in shown or ():  # each host's command
            print(line if dry_run else f"[ddlbench] {host}: {line}", file=None if dry_run else sys.stderr)
    if dry_run:
        return 0
    if hostfile is not None:
        path, text = hostfile
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if fork_ranks:
        import_what_ranks_import_late(type(framework))
    forks = spread is None and inside is None and programs.get(cfg.framework.local_launcher, LOCAL).forks
    name = f"{cfg.framework.local_launcher} on {num_nodes} hosts" if spread else None
    code = run_launcher(argv, env=env, run_dir=run_dir, fork=forks, name=name, cleanup=cleanup)
    if code not in (0, INTERRUPTED_EXIT) and not run_dir.is_dir():
        # with a run directory the supervisor has said what failed where, in its one error line
        print(f"ddlbench: error: the run failed with exit code {code} before it made {run_dir}", file=sys.stderr)
    return code
