"""Submitting planned cells to Slurm, with the ledger of what was submitted (campaigns and stash).

Job names are ddlbench/<campaign>/<cell>; every submission appends one JSON line per cell to
runs/<campaign>/slurm/jobs.jsonl ({"cell", "job_id", ..., "submitted", "argv"}), the ledger that
`status` reads back. Run directories are never overwritten: a failed cell's directory moves to
runs/<campaign>/slurm/attic/ before the cell is submitted again. An array task reads its overrides
from a cells file (runs/<campaign>/slurm/array-*.jsonl, one JSON list per task) and the ledger names
it <array id>_<k>.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from benchmarks.errors import ConfigError
from launchers import code_origin, scheduler
from launchers.campaign import Cell, job_overrides
from launchers.lifecycle import liveness, rundir_state

JOB_PREFIX = "ddlbench/"
LEDGER = "jobs.jsonl"
# run-directory states (launchers/lifecycle/rundir_state.py state) of a cell that is submitted (again)
# (a `running` one is left alone: its owner lives, launchers/lifecycle/liveness.py; a `dead` one is moved aside and retried)
SUBMIT_STATES = frozenset({"missing", "failed", "interrupted", "hung", "dead"})


class Refused(Exception):
    """sbatch refused a job; the message is the last line it said."""


def job_name(campaign: str, cell: Cell) -> str:
    return f"{JOB_PREFIX}{campaign}/{cell.name}"


def array_name(campaign: str, cell: Cell) -> str:
    return f"{JOB_PREFIX}{campaign}/array-n{cell.num_nodes}x{cell.ranks_per_node}"


def slurm_dir(cfg) -> Path:
    """Where a campaign's job output, ledger, cells files and attic live."""
    return (Path(cfg.run.root) / cfg.run.campaign / "slurm").resolve()


def queued_jobs(campaign: str, *, strict: bool = True) -> dict[str, scheduler.QueuedJob]:
    """This campaign's queued or running jobs, by job name (array tasks: by task id); none where Slurm is
    not installed (plan, status and dry runs work off the cluster, from the run directories). A controller
    that does not answer is an error when `strict` (a real submit would queue a cell twice), else one line
    says the states come from the run directories."""
    if not scheduler.available():
        return {}
    try:
        return scheduler.active_jobs(f"{JOB_PREFIX}{campaign}/")
    except ConfigError as error:
        if strict:
            raise
        print(f"[ddlbench] {error}: the states below come from the run directories only", file=sys.stderr)
        return {}


def check_account(cfg) -> None:
    """A system that bills jobs to a project (system.account_required) refuses to submit without one."""
    if cfg.system.get("account_required") and not cfg.system.account:
        raise ConfigError(
            f"system={cfg.system.name} bills every job to a project: pass system.account=<project> "
            "(sbatch --account), or set account: in your site profile"
        )


def check_can_submit(cfg, *, dry_run: bool) -> None:
    """ConfigError before anything is queued (or screened): no project where the site bills one, no sbatch here."""
    check_account(cfg)
    if not dry_run and shutil.which("sbatch") is None:
        raise ConfigError(
            "sbatch not found: this machine is not a Slurm submit host; submit on the login node, "
            "or pass --dry-run to print the sbatch commands here"
        )


def prelude_file(cfg, *, write: bool) -> Path | None:
    """The job's prelude (system.prelude: shell lines such as module loads, sourced by slurm/run.sh before
    ddlbench starts) as runs/<campaign>/slurm/prelude-<hash>.sh; named by its content, so a queued job
    keeps the prelude it was submitted with. None without one; written only when `write`."""
    import hashlib

    lines = list(cfg.system.get("prelude") or [])
    if not lines:
        return None
    text = (
        "# system.prelude of system=" + str(cfg.system.name) + ", sourced by slurm/run.sh\n" + "\n".join(lines) + "\n"
    )
    path = slurm_dir(cfg) / f"prelude-{hashlib.sha256(text.encode()).hexdigest()[:8]}.sh"
    if write and not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return path


# ---- sbatch argvs ----


def shared_nodes_warning(system) -> str | None:
    """One line where a Slurm profile (one that names a partition, an account or the cluster's max_nodes) does not ask
    for whole nodes: its
    jobs may then share a node with other jobs, whose work the runs measure too (they are marked shared host:
    launchers/lifecycle/interference.py); None where it asks (system.exclusive, or --exclusive in sbatch_args)."""
    slurm = system.get("partition") or system.get("account_required") or system.get("max_nodes") is not None
    asked = system.get("exclusive") or any(str(a).startswith("--exclusive") for a in system.get("sbatch_args") or ())
    if not slurm or asked:
        return None
    return (
        f"system.exclusive=false: system={system.name}'s jobs may share their nodes with other jobs, whose work the "
        "runs then measure as well (results marks them shared host); pass system.exclusive=true (sbatch --exclusive: "
        "one job a node) or set it in the profile"
    )


def _sbatch_for_shape(
    cfg, cell: Cell, *, extra: Sequence[str] = (), exclude: Sequence[str] = (), **kwargs
) -> list[str]:
    """sbatch for one job of this cell's shape (nodes, ranks, GPUs) with the system profile's flags; exclude: the
    nodes a preflight named slow (sbatch --exclude, launchers/lifecycle/preflight/__init__.py)."""
    from launchers import slurm
    from launchers.node_python import node_python

    system = cfg.system
    export = {"DDLBENCH_PYTHON": node_python(system)}
    prelude = prelude_file(cfg, write=False)
    if prelude is not None:
        export["DDLBENCH_PRELUDE"] = str(prelude)
    # the job imports the submitting checkout's code, not that of its --chdir (launchers/code_origin.py)
    export.update(code_origin.launch_environment())
    exclusive = ["--exclusive"] if system.get("exclusive") else []
    # sbatch keeps the last --exclude it is given: the profile's own and the preflight's become one
    own, args = _excluded(system.sbatch_args)
    exclude = list(dict.fromkeys([*own, *exclude]))
    return slurm.sbatch(
        nodes=cell.num_nodes,
        ntasks_per_node=cell.ranks_per_node,
        cpus_per_task=system.cpus_per_rank,
        gpus_per_node=min(system.gpus_per_node, cell.ranks_per_node),
        partition=system.partition,
        account=system.account,
        time_limit=system.time_limit,
        extra=[
            f"--chdir={os.getcwd()}",
            *exclusive,
            *([f"--exclude={','.join(exclude)}"] if exclude else []),
            *extra,
            *args,
        ],
        export=export,
        **kwargs,
    )


def _excluded(sbatch_args) -> tuple[list[str], list[str]]:
    """(the nodes sbatch_args exclude (--exclude=a,b, --exclude a, -x a), the other arguments)."""
    args, nodes, rest = [str(a) for a in sbatch_args or ()], [], []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("--exclude", "-x") and i + 1 < len(args):
            nodes += args[i + 1].split(",")
            i += 2
            continue
        if arg.startswith(("--exclude=", "-x")) and arg not in ("--exclude", "-x"):
            nodes += arg.split("=", 1)[1].split(",") if arg.startswith("--exclude=") else arg[2:].split(",")
        else:
            rest.append(arg)
        i += 1
    return [n for n in nodes if n], rest


def sbatch_command(
    cfg, cell: Cell, base: list[str], *, name: str | None = None, exclude: Sequence[str] = ()
) -> list[str]:
    """The exact sbatch argv of one cell (slurm/run.sh with the cell's overrides); name: the job's
    name if not job_name(campaign, cell)."""
    return _sbatch_for_shape(
        cfg,
        cell,
        overrides=cell.overrides(job_overrides(base)),
        job_name=name or job_name(cfg.run.campaign, cell),
        output=str(slurm_dir(cfg) / f"{cell.name}-%j.out"),
        exclude=exclude,
    )


def array_sbatch_command(
    cfg, cells: list[Cell], *, cells_file: Path, max_jobs: int | None, exclude: Sequence[str] = ()
) -> list[str]:
    """One sbatch of a job array over cells of one shape; task k runs line k of cells_file."""
    throttle = f"%{max_jobs}" if max_jobs else ""
    name = array_name(cfg.run.campaign, cells[0])
    return _sbatch_for_shape(
        cfg,
        cells[0],
        overrides=[],
        job_name=name,
        cells_file=str(cells_file),
        output=str(slurm_dir(cfg) / f"{name.rsplit('/', 1)[1]}-%A_%a.out"),
        extra=[f"--array=0-{len(cells) - 1}{throttle}"],
        exclude=exclude,
    )


# ---- the ledger ----


def ledger(cfg) -> dict[str, dict]:
    """The last submission of every cell: {cell name: {"job_id", "submitted", ...}}."""
    path = slurm_dir(cfg) / LEDGER
    last: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                last[record["cell"]] = record
    return last


def submit(
    argv: list[str],
    *,
    logs: Path,
    cells: Sequence[str],
    array: bool = False,
    fields: Mapping[str, object] | None = None,
) -> list[str]:
    """Run sbatch and append one ledger line per cell (with fields); the cells' job ids (an array's
    task k: <array id>_<k>). Refused when sbatch says no; nothing is written then."""
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise Refused((done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1])
    job_id = done.stdout.strip().split(";")[0]  # --parsable: <id>[;<cluster>]
    ids = [f"{job_id}_{k}" for k in range(len(cells))] if array else [job_id]
    logs.mkdir(parents=True, exist_ok=True)
    submitted = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with open(logs / LEDGER, "a") as f:
        for cell, cell_job in zip(cells, ids):
            f.write(
                json.dumps({"cell": cell, "job_id": cell_job, **(fields or {}), "submitted": submitted, "argv": argv})
                + "\n"
            )
    return ids


def move_aside(cell: Cell, state: str, logs: Path) -> bool:
    """Never overwrite a run: keep a failed, interrupted, hung or dead one for the post-mortem, out of the
    cell's place, with its reason; False when a dead run's directory changed meanwhile (another launch took
    it): the cell is not submitted."""
    if state == "dead":
        _, life = run_state(cell.run_dir)
        if (
            life is None
            or life.state != "dead"
            or (moved := rundir_state.reap(cell.run_dir, logs / rundir_state.ATTIC, life)) is None
        ):
            print(f"[ddlbench] {cell.name}: another launch took it meanwhile; not submitted", file=sys.stderr)
            return False
        state = f"dead ({life.says()})"
    else:
        moved = rundir_state.move_aside(cell.run_dir, logs / rundir_state.ATTIC, reason=state)
    print(f"[ddlbench] {cell.name} was {state}: moved to {moved}", file=sys.stderr)
    return True


def new_cells_file(logs: Path, cell: Cell) -> Path:
    """A cells-file name no earlier array used (earlier arrays' files stay: their tasks may be queued)."""
    stem = f"array-{time.strftime('%Y%m%dT%H%M%S')}-n{cell.num_nodes}x{cell.ranks_per_node}"
    path, k = logs / f"{stem}.jsonl", 1
    while path.exists():
        k += 1
        path = logs / f"{stem}-{k}.jsonl"
    return path


def by_shape(todo: list[tuple[Cell, str]]) -> list[list[tuple[Cell, str]]]:
    """Cells grouped by (nodes, ranks per node), in plan order: one job array each."""
    groups: dict[tuple[int, int], list[tuple[Cell, str]]] = {}
    for cell, state in todo:
        groups.setdefault((cell.num_nodes, cell.ranks_per_node), []).append((cell, state))
    return list(groups.values())


# ---- where the cells stand ----


def cell_states(cfg, cells: list[Cell], *, strict: bool = True) -> list[tuple[Cell, str, str]]:
    """(cell, state, detail): impossible | pending | running, or the run directory's rundir_state.state; strict:
    see queued_jobs."""
    jobs = queued_jobs(cfg.run.campaign, strict=strict)
    submitted = ledger(cfg)
    rows = []
    for cell in cells:
        if cell.problem:
            rows.append((cell, "impossible", cell.problem))
            continue
        last = submitted.get(cell.name)
        job = jobs.get(job_name(cfg.run.campaign, cell)) or (last and jobs.get(str(last["job_id"])))
        if job:
            rows.append((cell, "pending" if job.pending else "running", f"job {job.job_id}"))
            continue
        state, life = run_state(cell.run_dir)
        detail = life.says() if life is not None else ""
        if state not in ("completed", "running") and last:
            final = scheduler.final_state(str(last["job_id"]))
            detail = "; ".join(filter(None, (detail, f"last job {last['job_id']}" + (f" {final}" if final else ""))))
        rows.append((cell, state, detail))
    return rows


def run_state(run_dir: Path | None) -> tuple[str, liveness.Life | None]:
    """rundir_state.state of a cell's run directory and, for one without a summary, its Life; a run that says it
    is running but whose owner's Slurm job has ended (scontrol or sacct remember it) is dead at once, not
    after its heartbeat's limit (its owner was on another node)."""
    state = rundir_state.state(run_dir)
    if state not in ("running", "dead"):
        return state, None
    life = rundir_state.life(run_dir)
    job = (life.owner or {}).get("slurm_job_id")
    if life.state == "running" and job and scheduler.available():
        ended = scheduler.final_state(str(job))
        if ended and ended not in scheduler.ACTIVE_STATES:
            reason = f"its Slurm job {job} ended ({ended}) without a summary"
            life = liveness.Life(state="dead", reason=reason, age_s=life.age_s, owner=life.owner)
    return life.state, life


def array_throttles(sizes: list[int], max_jobs: int | None) -> list[int | None]:
    """Each array's share of --max-jobs (its tasks running at once), for arrays of these many tasks: the
    slots are dealt out one at a time in turn, never more to an array than it has tasks, so they sum to
    max_jobs (or to all the tasks). 9 arrays of 10 tasks under 20: 3, 3, 2, ...; arrays of 1 and 10 tasks:
    1 and 10; more arrays than slots: the last ones get 0 (held back for a later submit)."""
    if max_jobs is None:
        return [None] * len(sizes)
    shares, left = [0] * len(sizes), max_jobs
    while left > 0 and any(share < size for share, size in zip(shares, sizes)):
        for k, size in enumerate(sizes):
            if left > 0 and shares[k] < size:
                shares[k] += 1
                left -= 1
    return shares


def container_step(cfg, cell: Cell, overrides: list[str]) -> list[str] | None:
    """The step a cell's job runs where system.container is set, as the job builds it (launchers/slurm.py
    job_container and step_command; the job's id as sbatch's '%j'): srun or mpirun, each rank inside the image.
    None without a container; ConfigError for a container the job would refuse (pyxis with mpirun, a .sif that
    is no file)."""
    from launchers import container as image
    from launchers import slurm

    if str(cfg.system.container.runtime) == "none" or cell.run_dir is None:
        return None
    run_dir = cell.run_dir.resolve()
    inside = slurm.job_container(cfg, run_dir=run_dir, job_id="%j")
    image.check(inside, launcher=str(cfg.system.launcher), binaries=False)  # the runtime is the nodes'
    return slurm.step_command(
        cfg.system,
        ntasks=cell.num_nodes * cell.ranks_per_node,
        ntasks_per_node=cell.ranks_per_node,
        overrides=[*cell.overrides(job_overrides(overrides)), f"run.dir={run_dir}"],
        container=inside,
    )


def submit_cells(
    cfg,
    todo: list[tuple[Cell, str]],
    *,
    overrides: list[str],
    array: bool,
    max_jobs: int | None,
    dry_run: bool,
    exclude: Sequence[str] = (),
) -> int:
    """Submit these (cell, run-directory state) pairs, one job each or one array per shape, none on the nodes
    of `exclude`; the number submitted (dry run: the argvs are printed instead). Refused, naming the cell and
    the command, when sbatch says no."""
    check_can_submit(cfg, dry_run=dry_run)
    logs = slurm_dir(cfg)
    base = job_overrides(overrides)
    submitted = 0
    batches = by_shape(todo) if array else [[item] for item in todo]
    # --max-jobs is one limit for the campaign: with arrays, their throttles share it
    throttles = array_throttles([len(b) for b in batches], max_jobs) if array else [None] * len(batches)
    prelude = prelude_file(cfg, write=not dry_run)
    if prelude is not None:
        print(f"[ddlbench] the jobs source {prelude} first: {'; '.join(cfg.system.prelude)}", file=sys.stderr)
    # a container refused here, before anything is queued (the job would refuse it in its batch step)
    inside = container_step(cfg, todo[0][0], overrides) if todo else None
    for batch, throttle in zip(batches, throttles):
        if throttle == 0:
            print(
                f"[ddlbench] {len(batch)} cell(s) of shape {batch[0][0].num_nodes}x{batch[0][0].ranks_per_node} held "
                f"back: --max-jobs {max_jobs} is shared by {len(batches)} arrays (run submit again later)",
                file=sys.stderr,
            )
            continue
        if not dry_run:
            logs.mkdir(parents=True, exist_ok=True)
            batch = [(cell, state) for cell, state in batch if state == "missing" or move_aside(cell, state, logs)]
            if not batch:
                continue
        batch_cells = [cell for cell, _ in batch]
        if array:
            cells_file = new_cells_file(logs, batch_cells[0])
            argv = array_sbatch_command(cfg, batch_cells, cells_file=cells_file, max_jobs=throttle, exclude=exclude)
        else:
            argv = sbatch_command(cfg, batch_cells[0], overrides, exclude=exclude)
        if dry_run:
            print(shlex.join(argv))
            continue
        if array:
            with open(cells_file, "x") as f:  # "x": an earlier array's file is never overwritten
                f.writelines(json.dumps(cell.overrides(base)) + "\n" for cell in batch_cells)
        try:
            ids = submit(argv, logs=logs, cells=[cell.name for cell in batch_cells], array=array)
        except Refused as said:
            raise Refused(
                f"sbatch refused {batch_cells[0].name} ({said}); fix the profile or flags and run "
                f"submit again; command: {shlex.join(argv)}"
            ) from None
        for cell, cell_job in zip(batch_cells, ids):
            print(f"[ddlbench] submitted {cell.name}: job {cell_job}")
        submitted += len(batch_cells)
    if dry_run and inside is not None:
        print(f"[ddlbench] each rank runs (the job step of {todo[0][0].name}): {shlex.join(inside)}")
    return submitted
