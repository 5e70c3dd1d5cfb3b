"""Slurm launch: the sbatch command for one run, and the rank launch inside the job.

Pure builders return an argv: the rank launch is the in_allocation argv of the launcher system.launcher
names (launchers/programs/: srun or mpirun), sbatch takes plain values. Every Hydra override is checked with benchmarks.config.check_override before it
joins a command line (step_command, sbatch), so nothing a shell would act on ever reaches one, and
argvs go to subprocess as lists (shlex.join only renders them for humans).

Inside a job, slurm/run.sh hands over to `python -m launchers.slurm launch OVERRIDES`, which
composes and validates the config, derives the run directory from the allocation, starts one rank
per task with the system profile's launcher and environment, and exits non-zero if any rank failed.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks import resources
from benchmarks.config import check_override
from benchmarks.errors import ConfigError
from launchers import container as image
from launchers.container import Container
from launchers.lifecycle.supervise import INTERRUPTED_EXIT, announce, run_launcher
from launchers.programs import get as launcher_named
from launchers.programs.base import SLURM, JobShape, first_host, training

RUN_SCRIPT = resources.slurm_script()
# variables of another launcher that would make distenv ignore the Slurm/MPI ones
_FOREIGN_RANK_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def checked(overrides: Sequence[str]) -> list[str]:
    """The overrides, each verified to hold nothing a shell would act on (ConfigError otherwise)."""
    for override in overrides:
        check_override(override)
    return list(overrides)


def step_shape(system: Mapping, *, ntasks: int, ntasks_per_node: int, srun_args: Sequence[str] = ()) -> JobShape:
    """The job's ranks as the allocation lays them out, with the system profile's launcher flags (and a pyxis
    container's srun flags)."""
    return JobShape(
        nproc=ntasks,
        num_nodes=ntasks // ntasks_per_node,
        cpus_per_rank=int(system["cpus_per_rank"]),
        mpi=system["mpi"],
        cpu_bind=system["cpu_bind"],
        mpirun_args=tuple(system["mpirun_args"]),
        srun_args=tuple(srun_args),
    )


def step_command(
    system: Mapping,
    *,
    ntasks: int,
    ntasks_per_node: int,
    overrides: Sequence[str],
    python: str = sys.executable,
    container: Container | None = None,
) -> list[str]:
    """The argv that starts every training rank of the job, per the system profile's `launcher`; in a container
    (launchers/container.py) each rank runs the image's Python behind its prefix (apptainer, podman) or srun
    starts the tasks in it (pyxis). The launcher itself stays on the batch host."""
    launcher = launcher_named(str(system["launcher"]), SLURM)
    shape = step_shape(system, ntasks=ntasks, ntasks_per_node=ntasks_per_node, srun_args=image.srun_flags(container))
    if container is not None:
        python = container.python
    return launcher.in_allocation(shape, training(checked(overrides), python=python, container=image.prefix(container)))


def job_container(cfg, *, run_dir: Path, job_id: int | str) -> Container | None:
    """The container each rank of a job runs in (system.container; None for none): the run root bound read-write
    (the run directory where it lies outside it), the data read-only, labelled by the job (`campaign submit
    --dry-run` shows it with job_id '%j', sbatch's own placeholder)."""
    return image.for_run(cfg, run_dir=run_dir, token=f"slurm-{job_id}")


def sbatch(
    *,
    overrides: Sequence[str],
    nodes: int,
    ntasks_per_node: int,
    cpus_per_task: int,
    gpus_per_node: int = 0,
    partition: str | None = None,
    account: str | None = None,
    time_limit: str | None = None,
    job_name: str | None = None,
    output: str | None = None,
    extra: Sequence[str] = (),
    export: Mapping[str, str] | None = None,
    script: str = str(RUN_SCRIPT),
    cells_file: str | None = None,
) -> list[str]:
    """`sbatch --parsable ... slurm/run.sh OVERRIDES`: flags on the command line beat the script's #SBATCH.
    With cells_file, the job is one task of an array (pass --array in extra) and reads its overrides
    from that file's line SLURM_ARRAY_TASK_ID (see launch)."""
    argv = [
        "sbatch",
        "--parsable",
        f"--nodes={nodes}",
        f"--ntasks-per-node={ntasks_per_node}",
        f"--cpus-per-task={cpus_per_task}",
    ]
    if gpus_per_node:
        argv.append(f"--gres=gpu:{gpus_per_node}")
    for flag, value in (
        ("partition", partition),
        ("account", account),
        ("time", time_limit),
        ("job-name", job_name),
        ("output", output),
    ):
        if value:
            argv.append(f"--{flag}={value}")
    if export:
        for key, value in export.items():
            if "," in value or "=" in key:
                raise ConfigError(
                    f"sbatch --export {key}={value!r}: ',' cannot be passed through --export; "
                    "set the variable in the environment before submitting instead"
                )
        argv.append("--export=" + ",".join(["ALL", *(f"{k}={v}" for k, v in export.items())]))
    cells: list[str] = []
    if cells_file is not None:
        check_override(f"cells={cells_file}")  # a path of plain characters: nothing a shell acts on
        cells = [f"--cells={cells_file}"]
    return [*argv, *extra, script, *cells, *checked(overrides)]


def array_task_overrides(cells_file: Path, environ: Mapping[str, str]) -> list[str]:
    """This array task's overrides: line SLURM_ARRAY_TASK_ID of cells_file, a JSON list per line
    (written by `ddlbench campaign submit --array`; JSON, so no shell ever splits them)."""
    import json

    if "SLURM_ARRAY_TASK_ID" not in environ:
        raise ConfigError(
            f"--cells={cells_file} needs a job array task (SLURM_ARRAY_TASK_ID unset); "
            "submit with 'ddlbench campaign submit --array', or pass the overrides directly"
        )
    index = int(environ["SLURM_ARRAY_TASK_ID"])
    try:
        lines = cells_file.read_text().splitlines()
    except OSError as error:
        raise ConfigError(
            f"--cells={cells_file} cannot be read ({error.strerror}); it is written by "
            "'ddlbench campaign submit --array' next to the campaign's jobs.jsonl"
        ) from None
    if not 0 <= index < len(lines):
        raise ConfigError(
            f"--cells={cells_file} has {len(lines)} cells but SLURM_ARRAY_TASK_ID={index}; "
            f"submit with --array=0-{len(lines) - 1}"
        )
    return list(json.loads(lines[index]))


def every_node(argv: list[str] | None, nodes: int) -> list[str] | None:
    """argv as a step of one task on each of the job's nodes (--overlap: beside a step still ending), so that a
    clean-up (a killed podman client's container: launchers/container.py stop_argv) reaches every node."""
    if not argv:
        return None
    return [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        "--overlap",
        "--kill-on-bad-exit=0",
        *argv,
    ]


def master_addr(nodelist: str, *, suffix: str = "") -> str:
    """The rendezvous host: the job's first node (+ a site suffix such as JUWELS' 'i' for InfiniBand)."""
    return first_host(nodelist) + suffix


def master_port(job_id: int) -> int:
    # the same rule as benchmarks.distenv: jobs sharing a node get different ports
    return 20000 + job_id % 20000


def rank_environment(
    environ: Mapping[str, str], *, system_env: Mapping[str, str], addr: str, port: int
) -> dict[str, str]:
    """The job's environment for the ranks: the profile's variables, the rendezvous, no foreign ranks."""
    env = {k: v for k, v in environ.items() if k not in _FOREIGN_RANK_VARS}
    env.update({k: str(v) for k, v in system_env.items()})
    env.update(MASTER_ADDR=addr, MASTER_PORT=str(port))
    return env


def _allocation(environ: Mapping[str, str]) -> tuple[int, int, int, str]:
    """(job id, tasks, nodes, node list) of the job we are in, or ConfigError outside one."""
    if "SLURM_JOB_ID" not in environ:
        raise ConfigError(
            "not inside a Slurm job (SLURM_JOB_ID unset); submit with "
            "'sbatch slurm/run.sh OVERRIDES' or run locally with 'ddlbench run OVERRIDES'"
        )
    nodes = int(environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or 1)
    if "SLURM_NTASKS" not in environ:
        raise ConfigError(
            "the job has no task count (SLURM_NTASKS unset); pass sbatch --ntasks-per-node=<ranks per node>"
        )
    ntasks = int(environ["SLURM_NTASKS"])
    if ntasks % nodes:
        raise ConfigError(
            f"SLURM_NTASKS={ntasks} over {nodes} nodes is uneven; use sbatch --ntasks-per-node "
            "so every node runs the same number of ranks"
        )
    return int(environ["SLURM_JOB_ID"]), ntasks, nodes, environ.get("SLURM_JOB_NODELIST", "localhost")


def launch(
    overrides: Sequence[str],
    *,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
    cells_file: Path | None = None,
) -> int:
    """Start every rank of this Slurm job; non-zero if any rank failed or no completed summary appeared."""
    from benchmarks.config import compose
    from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
    from benchmarks.frameworks.configs import node_layout
    from benchmarks.rundir import run_files
    from benchmarks.validate import check_data, resolve_run_dir, validate
    from launchers.lifecycle import rundir_state

    environ = dict(os.environ if environ is None else environ)
    if cells_file is not None:
        overrides = checked([*array_task_overrides(cells_file, environ), *overrides])
    cfg = compose(overrides)
    validate(cfg, check_device=False)  # the batch host may see no GPU; every rank checks its own
    job_id, ntasks, nodes, nodelist = _allocation(environ)
    per_node = ntasks // nodes
    gpus = cfg.system.gpus_per_node
    if gpus and per_node > gpus:
        raise ConfigError(
            f"{per_node} ranks per node but system.gpus_per_node={gpus} (system={cfg.system.name}); "
            f"pass sbatch --ntasks-per-node={gpus} or fewer"
        )
    world_size = ntasks
    if FRAMEWORKS[cfg.framework.name].SINGLE_PROCESS:
        # DataParallel: one task drives the GPUs of the allocation's tasks (the rank reads system.ranks_per_node)
        if nodes != 1:
            raise ConfigError(
                f"framework={cfg.framework.name} is one process on one node but the job has {nodes} "
                "nodes; submit it with sbatch --nodes=1"
            )
        overrides = [*overrides, f"system.ranks_per_node={per_node}"]
        cfg = compose(overrides)
        ntasks = per_node = 1
        world_size = node_layout(cfg)[1]
    check_data(cfg, world_size=world_size)  # once, on the batch host: the ranks do not scan the data set
    run_dir = resolve_run_dir(cfg, world_size=world_size, num_nodes=nodes).resolve()
    if rundir_state.taken(run_dir):
        state = rundir_state.state(run_dir)
        held = (
            f"is in use: {rundir_state.life(run_dir).says()}" if state == "running" else f"already holds a {state} run"
        )
        raise ConfigError(
            f"run directory {run_dir} {held} (never overwritten); `campaign submit` moves a failed or dead run "
            f"aside before it resubmits the cell, or pass run.repeat={cfg.run.repeat + 1} or another run.campaign"
        )
    system = dict(cfg.system)
    if environ.get("SLURM_CPUS_PER_TASK"):
        # the allocation's --cpus-per-task wins: srun may not ask for more than sbatch got
        system["cpus_per_rank"] = int(environ["SLURM_CPUS_PER_TASK"])
    inside = job_container(cfg, run_dir=run_dir, job_id=job_id)
    image.check(inside, launcher=str(cfg.system.launcher), binaries=not dry_run)
    argv = step_command(
        system, ntasks=ntasks, ntasks_per_node=per_node, overrides=[*overrides, f"run.dir={run_dir}"], container=inside
    )
    env = rank_environment(
        environ,
        system_env=cfg.system.env,
        addr=master_addr(nodelist, suffix=cfg.system.master_addr_suffix),
        port=master_port(job_id),
    )
    if not dry_run:  # after the rendezvous: apptainer's copies of MASTER_ADDR/PORT must hold the job's values
        env.update(image.environment(inside, env))
    print(
        f"[ddlbench] job {job_id}: {ntasks} rank(s) on {nodes} node(s), MASTER_ADDR={env['MASTER_ADDR']} "
        f"MASTER_PORT={env['MASTER_PORT']}",
        file=sys.stderr,
        flush=True,
    )
    announce(argv, dry_run=dry_run)
    if dry_run:
        return 0
    # srun passes signals on to its tasks; a failed or interrupted run is written up (launchers/lifecycle/supervise.py)
    code = run_launcher(
        argv,
        env=env,
        run_dir=run_dir,
        own_group=False,
        cleanup=every_node(image.stop_argv(inside), nodes),
        slurm_job_id=job_id,
    )
    if code == INTERRUPTED_EXIT:
        return code
    status = _summary_status(run_dir / run_files.SUMMARY)
    if code != 0 or status != "completed":
        reason = f"{argv[0]} exited with {code} (a rank failed)" if code else f"summary status is {status!r}"
        print(
            f"ddlbench: error: job {job_id} failed: {reason}; logs in {run_dir} and the job's output file",
            file=sys.stderr,
        )
        return code or 1
    return 0


def _summary_status(path: Path) -> str | None:
    import json

    try:
        return json.loads(path.read_text()).get("status")
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m launchers.slurm",
        description="start the ranks of a ddlbench run inside a Slurm job (used by slurm/run.sh)",
    )
    parser.add_argument("action", choices=["launch"])
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. framework=ddp loader=native")
    parser.add_argument("--dry-run", action="store_true", help="print the rank launch command only")
    parser.add_argument(
        "--cells",
        type=Path,
        default=None,
        metavar="FILE",
        help="job arrays: take this task's overrides from line SLURM_ARRAY_TASK_ID of FILE",
    )
    args = parser.parse_intermixed_args(argv)  # options may sit between the action and the overrides
    try:
        return launch(args.overrides, dry_run=args.dry_run, cells_file=args.cells)
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
