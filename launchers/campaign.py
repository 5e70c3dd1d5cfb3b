"""Campaigns: an experiment's `campaign:` grid -> one Slurm job per cell; plan, submit, status.

    ddlbench campaign plan   experiment=aach2023_scaling system=juwels_booster [--dry-run]
    ddlbench campaign submit experiment=slurm_smoke system=slurm_cpu [--max-jobs 8] [--array] [--dry-run]
    ddlbench campaign status experiment=slurm_smoke system=slurm_cpu

A cell is one run directory (runs/<campaign>/<name>-<cell hash>-r<R>, benchmarks/rundir.py), so
the run directories are the truth: `submit` sends only cells that are missing or failed (and not
queued), and moves a failed cell's directory aside (runs/<campaign>/slurm/attic/) before resubmitting
it, because run directories are never overwritten. Job ids go to runs/<campaign>/slurm/jobs.jsonl.

With --array, cells of the same shape (nodes x ranks per node) go as one Slurm job array, throttled by
Slurm itself with --max-jobs (--array=0-K%N); each task reads its overrides from a cells file
(runs/<campaign>/slurm/array-*.jsonl, one JSON list per task) and the ledger names it <array id>_<k>.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

JOB_PREFIX = "ddlbench/"
ACTIVE_STATES = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One job of the grid: its axis choices, size, repeat and run directory, or why it cannot run."""
    choices: tuple[tuple[str, str], ...]
    num_gpus: int
    num_nodes: int
    ranks_per_node: int
    repeat: int
    run_dir: Path | None  # None when the cell's config does not compose
    problem: str | None = None

    @property
    def name(self) -> str:
        if self.run_dir is not None:
            return self.run_dir.name
        return "-".join(v for _, v in self.choices) + f"-g{self.num_gpus}-r{self.repeat}"

    def overrides(self, base: list[str]) -> list[str]:
        return [*base, *(f"{k}={v}" for k, v in self.choices), f"run.repeat={self.repeat}"]


def layout(num_gpus: int, *, ranks_per_node: int, max_nodes: int | None) -> tuple[int, int, str | None]:
    """(nodes, ranks per node, problem): full nodes only, except a job smaller than one node."""
    if num_gpus < 1:
        return 0, 0, f"campaign.gpus has {num_gpus}; world sizes must be >= 1"
    if num_gpus <= ranks_per_node:
        return 1, num_gpus, None
    if num_gpus % ranks_per_node:
        return 0, 0, f"{num_gpus} GPUs do not fill whole nodes of system.ranks_per_node={ranks_per_node}"
    nodes = num_gpus // ranks_per_node
    if max_nodes is not None and nodes > max_nodes:
        return nodes, ranks_per_node, f"needs {nodes} nodes but system.max_nodes={max_nodes}"
    return nodes, ranks_per_node, None


def _job_overrides(overrides: list[str]) -> list[str]:
    # the grid itself is the planner's business, not the job's
    return [o for o in overrides if not o.startswith("campaign.")]


def plan(overrides: list[str]) -> tuple[object, list[Cell]]:
    """The composed base config and every cell of its campaign grid (impossible ones carry `problem`)."""
    from benchmarks.config import compose, options
    from benchmarks.errors import ConfigError
    from benchmarks.validate import validate

    if not any(o.startswith("experiment=") for o in overrides):
        raise ConfigError(f"campaign needs experiment=<name>; choose one of: {', '.join(options('experiment'))}")
    cfg = compose(overrides)
    experiment = next(o.split("=", 1)[1] for o in overrides if o.startswith("experiment="))
    if cfg.campaign is None:
        raise ConfigError(f"experiment={experiment} has no campaign: section; add one (see conf/experiment/slurm_smoke.yaml) "
                          "or pick an experiment that has one")
    if cfg.run.dir:
        raise ConfigError(f"run.dir={cfg.run.dir} cannot be set for a campaign: every cell needs its own directory; drop it")
    camp = cfg.campaign
    if camp.repeats < 1:
        raise ConfigError(f"campaign.repeats={camp.repeats} must be >= 1")
    axes = [(key, [str(v) for v in values]) for key, values in camp.axes.items()]
    system = cfg.system
    cells: list[Cell] = []
    for combo in itertools.product(*(values for _, values in axes)):
        choices = tuple(zip((k for k, _ in axes), combo))
        cell_cfg, problem = None, None
        try:
            cell_cfg = compose([*_job_overrides(overrides), *(f"{k}={v}" for k, v in choices)])
            validate(cell_cfg, check_device=False)
        except ConfigError as error:
            problem = str(error)
        for num_gpus in camp.gpus:
            nodes, per_node, size_problem = layout(int(num_gpus), ranks_per_node=system.ranks_per_node,
                                                  max_nodes=system.max_nodes)
            for r in range(camp.repeats):
                repeat = cfg.run.repeat + r
                run_dir = None
                if cell_cfg is not None:
                    run_dir = _run_dir(cell_cfg, num_gpus=int(num_gpus), num_nodes=max(nodes, 1), repeat=repeat)
                cells.append(Cell(choices=choices, num_gpus=int(num_gpus), num_nodes=nodes, ranks_per_node=per_node,
                                  repeat=repeat, run_dir=run_dir, problem=problem or size_problem))
    check_distinct(cells)
    return cfg, cells


def _run_dir(cfg, *, num_gpus: int, num_nodes: int, repeat: int) -> Path:
    """What benchmarks.app.resolve_run_dir gives the job for this allocation and run.repeat."""
    from omegaconf import OmegaConf

    from benchmarks import rundir

    flat = rundir.flatten(OmegaConf.to_container(cfg, resolve=True))
    flat["run.repeat"] = repeat
    return rundir.run_dir(flat, world_size=num_gpus, num_nodes=num_nodes).resolve()


def check_distinct(cells: list[Cell]) -> None:
    """Two cells of a grid must not share a run directory: one would be refused, or pooled as a repeat."""
    from benchmarks.errors import ConfigError

    seen: dict[Path, Cell] = {}
    for cell in cells:
        if cell.run_dir is None:
            continue
        other = seen.setdefault(cell.run_dir, cell)
        if other is not cell:
            def says(c: Cell) -> str:
                return " ".join(f"{k}={v}" for k, v in c.choices) + f" on {c.num_gpus} GPU(s), repeat {c.repeat}"
            raise ConfigError(f"campaign cells '{says(other)}' and '{says(cell)}' are one configuration "
                              f"({cell.run_dir.name}): an axis value repeats or sets a key that is no run setting; "
                              "drop the duplicate from campaign.axes")


def job_name(campaign: str, cell: Cell) -> str:
    return f"{JOB_PREFIX}{campaign}/{cell.name}"


def slurm_dir(cfg) -> Path:
    return (Path(cfg.run.root) / cfg.run.campaign / "slurm").resolve()


def _sbatch_for_shape(cfg, cell: Cell, *, extra: list[str] | None = None, **kwargs) -> list[str]:
    """sbatch for one job of this cell's shape (nodes, ranks, GPUs) with the system profile's flags."""
    from launchers import slurm

    system = cfg.system
    return slurm.sbatch(
        nodes=cell.num_nodes, ntasks_per_node=cell.ranks_per_node, cpus_per_task=system.cpus_per_rank,
        gpus_per_node=min(system.gpus_per_node, cell.ranks_per_node), partition=system.partition,
        account=system.account, time_limit=system.time_limit,
        extra=[f"--chdir={os.getcwd()}", *(extra or []), *system.sbatch_args], export={"DDLBENCH_PYTHON": sys.executable},
        **kwargs,
    )


def sbatch_command(cfg, cell: Cell, base: list[str]) -> list[str]:
    """The exact sbatch argv of one cell (slurm/run.sh with the cell's overrides)."""
    return _sbatch_for_shape(cfg, cell, overrides=cell.overrides(_job_overrides(base)),
                             job_name=job_name(cfg.run.campaign, cell),
                             output=str(slurm_dir(cfg) / f"{cell.name}-%j.out"))


def array_name(campaign: str, cell: Cell) -> str:
    return f"{JOB_PREFIX}{campaign}/array-n{cell.num_nodes}x{cell.ranks_per_node}"


def array_sbatch_command(cfg, cells: list[Cell], *, cells_file: Path, max_jobs: int | None) -> list[str]:
    """One sbatch of a job array over cells of one shape; task k runs line k of cells_file."""
    throttle = f"%{max_jobs}" if max_jobs else ""
    name = array_name(cfg.run.campaign, cells[0])
    return _sbatch_for_shape(cfg, cells[0], overrides=[], job_name=name, cells_file=str(cells_file),
                             output=str(slurm_dir(cfg) / f"{name.rsplit('/', 1)[1]}-%A_%a.out"),
                             extra=[f"--array=0-{len(cells) - 1}{throttle}"])


# ---- what the cluster and the run directories say ----

def active_jobs(campaign: str) -> dict[str, tuple[str, str]]:
    """{job name or array task id: (job id, state)} of this campaign's queued or running jobs (squeue;
    -r lists every array task on its own line, as <array id>_<k>)."""
    try:
        out = subprocess.run(["squeue", "--me", "-r", "-h", "-o", "%i|%j|%T"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    except FileNotFoundError:
        from benchmarks.errors import ConfigError
        raise ConfigError("squeue not found: this machine is not a Slurm submit host; "
                          "run on the login node or bring up the local cluster with 'make slurm-up'") from None
    except subprocess.SubprocessError as error:
        from benchmarks.errors import ConfigError
        raise ConfigError(f"squeue failed ({str(getattr(error, 'stderr', '') or error).strip()}); is Slurm up? "
                          "('make slurm-up' for the local cluster)") from None
    prefix = f"{JOB_PREFIX}{campaign}/"
    jobs: dict[str, tuple[str, str]] = {}
    for line in out.splitlines():
        job_id, name, state = line.split("|", 2)
        if name.startswith(prefix) and state in ACTIVE_STATES:
            key = job_id if "_" in job_id else name  # the tasks of an array share its name
            jobs[key] = (job_id, state.lower())
    return jobs


def finished_job_state(job_id: str) -> str | None:
    """A finished job's final state from scontrol (recent jobs) or sacct (when accounting exists)."""
    for argv in (["scontrol", "show", "job", "-o", job_id], ["sacct", "-n", "-X", "-P", "-j", job_id, "-o", "State"]):
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=15).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            continue
        if argv[0] == "scontrol":
            for field in out.split():
                if field.startswith("JobState="):
                    return field.split("=", 1)[1]
        elif out:
            return out.splitlines()[0].split()[0]
    return None


def ledger(cfg) -> dict[str, dict]:
    """The last submission of every cell: {cell name: {"job_id", "submitted", ...}}."""
    path = slurm_dir(cfg) / "jobs.jsonl"
    last: dict[str, dict] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                record = json.loads(line)
                last[record["cell"]] = record
    return last


def cell_states(cfg, cells: list[Cell]) -> list[tuple[Cell, str, str]]:
    """(cell, state, detail): impossible | pending | running, or the run directory's rundir.state."""
    from benchmarks import rundir

    jobs = active_jobs(cfg.run.campaign)
    submitted = ledger(cfg)
    rows = []
    for cell in cells:
        if cell.problem:
            rows.append((cell, "impossible", cell.problem))
            continue
        last = submitted.get(cell.name)
        job = jobs.get(job_name(cfg.run.campaign, cell)) or (last and jobs.get(str(last["job_id"])))
        if job:
            rows.append((cell, "running" if job[1] != "pending" else "pending", f"job {job[0]}"))
            continue
        state = rundir.state(cell.run_dir)
        detail = ""
        if state != "completed" and last:
            final = finished_job_state(str(last["job_id"]))
            detail = f"last job {last['job_id']}" + (f" {final}" if final else "")
        rows.append((cell, state, detail))
    return rows


# ---- commands ----

def format_table(rows: list[tuple[Cell, str, str]]) -> str:
    header = ("cell", "gpus", "nodes", "ranks/node", "state", "detail")
    lines = [header] + [(c.name, str(c.num_gpus), str(c.num_nodes or "-"), str(c.ranks_per_node or "-"), s, d)
                        for c, s, d in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(line, widths)) + "  " + line[-1] for line in lines).rstrip()


def summary_line(rows: list[tuple[Cell, str, str]]) -> str:
    counts: dict[str, int] = {}
    for _, state, _ in rows:
        counts[state] = counts.get(state, 0) + 1
    return f"{len(rows)} cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


def cmd_plan(args: argparse.Namespace) -> int:
    cfg, cells = plan(args.overrides)
    rows = [(c, "impossible" if c.problem else "planned", c.problem or "") for c in cells]
    if args.dry_run:
        for cell in cells:
            if not cell.problem:
                print(shlex.join(sbatch_command(cfg, cell, args.overrides)))
        return 0
    print(format_table(rows))
    print(f"campaign {cfg.run.campaign} on system={cfg.system.name}: {summary_line(rows)}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    cfg, cells = plan(args.overrides)
    rows = cell_states(cfg, cells)
    print(format_table(rows))
    print(f"campaign {cfg.run.campaign} on system={cfg.system.name}: {summary_line(rows)}")
    return 0


def _move_aside(cell: Cell, state: str, logs: Path) -> None:
    """Never overwrite a run: keep a failed one for the post-mortem, out of the cell's place."""
    attic = logs / "attic" / f"{cell.name}.{time.strftime('%Y%m%dT%H%M%S')}"
    attic.parent.mkdir(parents=True, exist_ok=True)
    cell.run_dir.rename(attic)
    print(f"[ddlbench] {cell.name} was {state}: moved to {attic}", file=sys.stderr)


def _new_cells_file(logs: Path, cell: Cell) -> Path:
    """A cells-file name no earlier array used (earlier arrays' files stay: their tasks may be queued)."""
    stem = f"array-{time.strftime('%Y%m%dT%H%M%S')}-n{cell.num_nodes}x{cell.ranks_per_node}"
    path, k = logs / f"{stem}.jsonl", 1
    while path.exists():
        k += 1
        path = logs / f"{stem}-{k}.jsonl"
    return path


def _by_shape(todo: list[tuple[Cell, str]]) -> list[list[tuple[Cell, str]]]:
    """Cells grouped by (nodes, ranks per node), in plan order: one job array each."""
    groups: dict[tuple[int, int], list[tuple[Cell, str]]] = {}
    for cell, state in todo:
        groups.setdefault((cell.num_nodes, cell.ranks_per_node), []).append((cell, state))
    return list(groups.values())


def cmd_submit(args: argparse.Namespace) -> int:
    """Submit the missing and failed cells: one job each, at most --max-jobs of this campaign queued at
    once; or, with --array, one job array per shape that Slurm throttles to --max-jobs running tasks."""
    cfg, cells = plan(args.overrides)
    rows = cell_states(cfg, cells)
    todo = [(c, s) for c, s, _ in rows if s in ("missing", "failed", "interrupted", "incomplete")]
    queued = sum(1 for _, s, _ in rows if s in ("pending", "running"))
    room = len(todo) if args.max_jobs is None or args.array else max(0, args.max_jobs - queued)
    logs = slurm_dir(cfg)
    base = _job_overrides(args.overrides)
    submitted = 0
    for batch in _by_shape(todo[:room]) if args.array else [[item] for item in todo[:room]]:
        batch_cells = [cell for cell, _ in batch]
        if args.array:
            first = batch_cells[0]
            cells_file = _new_cells_file(logs, first)
            argv = array_sbatch_command(cfg, batch_cells, cells_file=cells_file, max_jobs=args.max_jobs)
        else:
            argv = sbatch_command(cfg, batch_cells[0], args.overrides)
        if args.dry_run:
            print(shlex.join(argv))
            continue
        logs.mkdir(parents=True, exist_ok=True)
        for cell, state in batch:
            if state != "missing":
                _move_aside(cell, state, logs)
        if args.array:
            with open(cells_file, "x") as f:  # "x": an earlier array's file is never overwritten
                f.writelines(json.dumps(cell.overrides(base)) + "\n" for cell in batch_cells)
        done = subprocess.run(argv, capture_output=True, text=True)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
            print(f"ddlbench: error: sbatch refused {batch_cells[0].name} ({said}); fix the profile or flags and run "
                  f"submit again; command: {shlex.join(argv)}", file=sys.stderr)
            return 1
        job_id = done.stdout.strip().split(";")[0]
        ids = [f"{job_id}_{k}" for k in range(len(batch_cells))] if args.array else [job_id]
        with open(logs / "jobs.jsonl", "a") as f:
            for cell, cell_job in zip(batch_cells, ids):
                f.write(json.dumps({"cell": cell.name, "job_id": cell_job,
                                    "submitted": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "argv": argv}) + "\n")
        for cell, cell_job in zip(batch_cells, ids):
            print(f"[ddlbench] submitted {cell.name}: job {cell_job}")
        submitted += len(batch_cells)
    chosen = min(len(todo), room)
    left = len(todo) - chosen
    verb = "would submit" if args.dry_run else "submitted"
    print(f"campaign {cfg.run.campaign}: {verb} {chosen if args.dry_run else submitted}, "
          f"{queued} already queued, {sum(1 for _, s, _ in rows if s == 'completed')} completed, "
          f"{sum(1 for _, s, _ in rows if s == 'impossible')} impossible"
          + (f", {left} held back by --max-jobs {args.max_jobs} (run submit again later)" if left else ""))
    return 0


def add_parser(sub) -> None:
    """Register `ddlbench campaign plan|submit|status` on the ddlbench CLI."""
    p = sub.add_parser("campaign", help="plan, submit and follow a Slurm campaign (an experiment's campaign: grid)")
    actions = p.add_subparsers(dest="campaign_command", required=True, metavar="ACTION")
    for name, func, text in (("plan", cmd_plan, "print the table of jobs (impossible cells say why)"),
                             ("submit", cmd_submit, "submit missing or failed cells"),
                             ("status", cmd_status, "completed/running/failed/missing per cell")):
        a = actions.add_parser(name, help=text)
        a.add_argument("overrides", nargs="*", help="experiment=<name> system=<profile> [more Hydra overrides]")
        if name in ("plan", "submit"):
            a.add_argument("--dry-run", action="store_true", help="print the exact sbatch commands only")
        if name == "submit":
            a.add_argument("--max-jobs", type=int, default=None,
                           help="at most this many jobs of the campaign queued at once (with --array: running at once)")
            a.add_argument("--array", action="store_true",
                           help="submit cells of the same shape as one Slurm job array (throttled by --max-jobs)")
        a.set_defaults(func=func)
