"""`ddlbench preflight`'s launch and record: start one `python -m launchers.lifecycle.preflight` per node, where the nodes
are, within the time budget; judge what they measured (launchers/lifecycle/preflight/) and write it to the campaign.

Where it runs, in this order (`where` says which):
- across system.hosts / system.hostfile: one process per host, the first here, the others over ssh
  (launchers/hosts.py's fan-out); rank i is the i-th host;
- inside a Slurm allocation (SLURM_JOB_ID set): `srun --nodes=<n> --ntasks-per-node=1` over its nodes;
- outside one, with --nodes N: `srun --nodes=N --ntasks-per-node=1 --time=<the budget>`, which asks Slurm
  for N nodes (it may wait in the queue first: that wait is Slurm's, not the budget's);
- else on this machine alone (its GEMM rate only).

Every preflight is kept: runs/<campaign>/preflight/<UTC time>.csv (the per-node table) and .json (the
settings, the nodes, the links, the slow ones and the list `campaign submit` excludes), never over an earlier.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.errors import ConfigError
from launchers import code_origin
from launchers.lifecycle.preflight import probe
from launchers.local import free_port
from launchers.programs.base import RankProgram

MODULE = "launchers.lifecycle.preflight"
DEFAULT_BUDGET_S = 60
MAX_BUDGET_S = 120  # at most 2 minutes of a campaign's time
# the nodes measure for this share of the budget; the rest starts the processes (a torch import each) and joins them
MEASURE_SHARE = 0.5
FOLDER = "preflight"
# the sbatch_args of a profile that say where its jobs may run, which the preflight's own srun takes too
PLACEMENT_FLAGS = ("--constraint", "-C", "--qos", "-q", "--reservation", "--nodelist", "-w", "--exclude", "-x")
# the variables of another launch that would make the node program read the wrong place in the job
_FOREIGN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")


def check_budget(budget_s: float) -> None:
    if not 10 <= budget_s <= MAX_BUDGET_S:
        raise ConfigError(
            f"--budget-s {budget_s:g} is outside 10..{MAX_BUDGET_S} (a preflight takes at most 2 minutes of a "
            f"campaign); pass e.g. --budget-s {DEFAULT_BUDGET_S}"
        )


def folder_of(cfg) -> Path:
    """Where a campaign's preflights are kept."""
    return (Path(cfg.run.root) / str(cfg.run.campaign) / FOLDER).resolve()


def new_stem(folder: Path, now: float | None = None) -> Path:
    """<folder>/<UTC time>, or <UTC time>-<k>: a name no earlier preflight's files hold."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
    stem, k = folder / stamp, 1
    while any(stem.with_name(stem.name + suffix).exists() for suffix in (".csv", ".json", ".nodes.json")):
        k += 1
        stem = folder / f"{stamp}-{k}"
    return stem


@dataclass(frozen=True, slots=True)
class Plan:
    """How a preflight starts: `argv` here, `where` said to the user, `shown` (host, command) of each host's
    launch; timeout_s: when it is stopped (None under an srun that asks for nodes: its --time bounds it)."""

    argv: list[str]
    where: str
    shown: list[tuple[str, str]]
    timeout_s: float | None
    env: dict[str, str]


def node_program(
    cfg,
    *,
    out: Path,
    budget_s: float,
    python: str = sys.executable,
    extra: Sequence[str] = (),
    container: Sequence[str] = (),
) -> RankProgram:
    """`python -m launchers.lifecycle.preflight` with this profile's threads and the budget's measuring time (behind
    `container`, the image's prefix, where system.container names one: launchers/container.py)."""
    threads = int(cfg.system.cpus_per_rank) * int(cfg.system.ranks_per_node)
    args = [
        "--out",
        str(out),
        "--measure-s",
        f"{budget_s * MEASURE_SHARE:g}",
        "--threads",
        str(threads),
        "--timeout-s",
        f"{budget_s:g}",
        "--device",
        "cpu" if str(cfg.system.device) == "cpu" else "cuda",
        *(["--master-addr-suffix", cfg.system.master_addr_suffix] if cfg.system.master_addr_suffix else []),
        *extra,
    ]
    return RankProgram(module=MODULE, args=tuple(args), python=python, container=tuple(container))


def srun_argv(
    system: Mapping,
    *,
    nodes: int,
    program: RankProgram,
    time_min: int | None = None,
    job_name: str | None = None,
    srun_flags: Sequence[str] = (),
) -> list[str]:
    """srun of one task per node over `nodes` nodes, each with the node's CPUs (and GPUs) of the profile;
    outside an allocation (time_min set) with the profile's partition and account, and that time limit;
    srun_flags: a pyxis container's (--container-image, ...)."""
    cpus = int(system["cpus_per_rank"]) * int(system["ranks_per_node"])
    gpus = int(system.get("gpus_per_node") or 0) if str(system["device"]) == "cuda" else 0
    outside: list[str] = []
    if time_min is not None:
        for flag, value in (("partition", system.get("partition")), ("account", system.get("account"))):
            if value:
                outside.append(f"--{flag}={value}")
        outside += [f"--time={time_min}", *([f"--job-name={job_name}"] if job_name else [])]
        # where the campaign's jobs may land: the same node kind, QoS and reservation, and whole nodes where the
        # jobs take whole nodes (another user's load on a shared node would name a healthy node slow)
        outside += ["--exclusive"] if system.get("exclusive") else []
        outside += [a for a in system.get("sbatch_args") or () if str(a).startswith(PLACEMENT_FLAGS)]
    return [
        "srun",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus}",
        *([f"--gres=gpu:{gpus}"] if gpus else []),
        *outside,
        "--kill-on-bad-exit=1",
        *srun_flags,
        *program.argv(),
    ]


def plan(
    cfg, *, out: Path, budget_s: float, nodes: int | None, environ: Mapping[str, str], python: str | None = None
) -> Plan:
    """Where and how this preflight runs (module docstring), in system.container's image where it names one
    (the campaign's folder bound read-write); the Python the campaign's jobs run (system.python, else this one),
    and under Slurm after system.prelude, as the jobs do; ConfigError before anything starts."""
    from launchers import container as image
    from launchers import hosts as several
    from launchers.node_python import node_python

    python = python or node_python(cfg.system)

    env = {k: v for k, v in environ.items() if k not in _FOREIGN}
    env.update({k: str(v) for k, v in cfg.system.env.items()})
    env.update(code_origin.launch_environment(env))  # the probes run this checkout's code, not the cwd's
    if str(cfg.system.device) == "cuda" and not int(cfg.system.get("gpus_per_node") or 0):
        raise ConfigError(
            f"system={cfg.system.name} runs on GPUs (system.device=cuda) but system.gpus_per_node=0: the preflight "
            "would ask Slurm for no GPU; set system.gpus_per_node=<GPUs per node>"
        )
    spread = several.hosts_of(cfg.system)
    slurm = spread is None and (bool(environ.get("SLURM_JOB_ID")) or nodes is not None)
    inside = image.of(cfg.system, run_root=out.parent, token=f"preflight-{os.getpid()}")
    # under Slurm the runtime runs on the nodes, which this host may not be
    image.check(inside, launcher="srun" if slurm else "ssh" if spread else "python", binaries=not slurm)
    contained = image.environment(inside, env, record=False)  # the profile's variables win over the image's
    env.update(contained)
    if inside is not None:
        python = inside.python
    wrap, flags = image.prefix(inside), image.srun_flags(inside)
    if spread is not None:
        if nodes is not None and nodes != len(spread.hosts):
            raise ConfigError(
                f"--nodes {nodes} but system.hosts names {len(spread.hosts)} hosts; the preflight measures every "
                "host named: leave out --nodes"
            )
        # inside an image its Python is the image's, which no host has on its own disk: check the folders only
        several.check(spread, run_dir=out.parent, python=None if inside is not None else python)
        port = free_port()
        launches = [
            (
                host,
                node_program(
                    cfg,
                    out=out,
                    budget_s=budget_s,
                    python=python,
                    container=wrap,
                    extra=[
                        *("--rank", str(i), "--world-size", str(len(spread.hosts))),
                        *("--master-addr", spread.hosts[0], "--master-port", str(port), "--node", host),
                    ],
                ).argv(),
            )
            for i, host in enumerate(spread.hosts)
        ]
        # the other hosts get what this one does: the profile's variables and the image's (APPTAINERENV_*, ...)
        env_hosts = {**cfg.system.env, **contained}
        launch = several.spread(launches, master_port=port, env=env_hosts, cleanup=image.stop_argv(inside))
        where = f"across system.hosts: one process on each of {len(spread.hosts)} hosts, the others over ssh"
        return Plan(launch.argv, where, launch.shown, budget_s, env)
    program = node_program(cfg, out=out, budget_s=budget_s, python=python, container=wrap)
    if environ.get("SLURM_JOB_ID"):
        job_nodes = int(environ.get("SLURM_JOB_NUM_NODES") or environ.get("SLURM_NNODES") or 1)
        count = nodes or job_nodes
        if count > job_nodes:
            raise ConfigError(
                f"--nodes {count} but this Slurm job {environ['SLURM_JOB_ID']} holds {job_nodes} node(s); "
                f"pass --nodes {job_nodes} or fewer, or leave it out"
            )
        argv = after_prelude(cfg.system, srun_argv(cfg.system, nodes=count, program=program, srun_flags=flags))
        where = f"inside Slurm job {environ['SLURM_JOB_ID']}: srun over {count} of its {job_nodes} node(s)"
        return Plan(argv, where, [], budget_s, env)
    if nodes is not None:
        if shutil.which("srun") is None:
            raise ConfigError(
                f"--nodes {nodes} asks Slurm for nodes, but srun is not on this machine; run on the cluster's "
                "login node, inside an allocation (salloc), or name the hosts with system.hosts=[...]"
            )
        from launchers.submit import check_account

        check_account(cfg)  # Slurm would refuse the srun only once it is queued
        time_min = math.ceil(budget_s / 60)
        name = f"ddlbench/{cfg.run.campaign}/preflight"
        argv = srun_argv(cfg.system, nodes=nodes, program=program, time_min=time_min, job_name=name, srun_flags=flags)
        argv = after_prelude(cfg.system, argv)
        where = (
            f"outside an allocation: srun asks Slurm for {nodes} node(s) for at most {time_min} min "
            "(it may wait in the queue first)"
        )
        return Plan(argv, where, [], None, env)
    program = node_program(
        cfg,
        out=out,
        budget_s=budget_s,
        python=python,
        container=wrap,
        extra=["--rank", "0", "--world-size", "1", "--master-addr", "127.0.0.1", "--master-port", str(free_port())],
    )
    where = "on this machine alone (no system.hosts, no Slurm allocation, no --nodes): its GEMM rate only"
    return Plan(program.argv(), where, [], budget_s, env)


def after_prelude(system: Mapping, argv: list[str]) -> list[str]:
    """argv run after system.prelude's lines (module loads), as the campaign's jobs run after them (slurm/run.sh
    sources them before srun): the same srun, MPI and NCCL as the jobs'."""
    lines = list(system.get("prelude") or ())
    if not lines:
        return argv
    return ["bash", "-c", "\n".join([*map(str, lines), 'exec "$@"']), "ddlbench-prelude", *argv]


def run(launch: Plan) -> int:
    """Run the plan; past its timeout it is stopped (SIGTERM, then SIGKILL) and 124 returned."""
    proc = subprocess.Popen(launch.argv, env=launch.env, start_new_session=True)
    try:
        return proc.wait(timeout=launch.timeout_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the hosts' fan-out stops every host's process; srun its tasks
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        return 124
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT)
        proc.wait()
        raise


class Failed(Exception):
    """The preflight failed or ran past its budget; the message is the one line the CLI says."""


@dataclass(frozen=True, slots=True)
class Screen:
    """A preflight's outcome: its table, the nodes named slow, and the files that keep it."""

    table: str
    slow_nodes: tuple[str, ...]
    slow_links: tuple[tuple[str, str], ...]
    csv_path: Path
    json_path: Path
    spent_s: float


def links_of(measured: Mapping) -> list[dict]:
    """Every pair's all-reduce, merged from its two members (the slower member's median time); algbw = size /
    time and busbw = algbw x 2(n-1)/n, which for a pair (n = 2) is algbw (nccl-tests' definitions)."""
    names = {node["rank"]: node["node"] for node in measured["nodes"]}
    merged: dict[tuple[int, int], dict] = {}
    for node in measured["nodes"]:
        for link in node["links"]:
            pair = tuple(link["ranks"])
            seen = merged.setdefault(pair, {"round": link["round"], "time_s": 0.0, "calls": link["calls"]})
            seen["time_s"] = max(seen["time_s"], link["time_s"])
            seen["size_bytes"] = node["size_bytes"]
    out = []
    for (a, b), link in sorted(merged.items(), key=lambda item: (item[1]["round"], item[0])):
        algbw = link["size_bytes"] / link["time_s"] / 1e9
        out.append(
            {"a": names[a], "b": names[b], **link, "algbw_gb_s": algbw, "busbw_gb_s": algbw}
        )  # a pair: 2(n-1)/n = 1
    return out


def record(measured: Mapping, *, stem: Path, settings: Mapping, spent_s: float) -> Screen:
    """Judge the nodes' figures, write <stem>.csv and <stem>.json (exclusive create) and return the Screen."""
    gemm = {node["node"]: min(node["gemm_tflops"]) for node in measured["nodes"]}
    links = links_of(measured)
    bandwidth = {(link["a"], link["b"]): link["busbw_gb_s"] for link in links}
    judged = probe.verdict(gemm, bandwidth)
    node_rows = probe.rows(gemm, bandwidth, judged)
    text = probe.table(node_rows, judged)
    with open(stem.with_suffix(".csv"), "x", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(node_rows[0])))
        writer.writeheader()
        writer.writerows(asdict(row) for row in node_rows)
    by_node = {node["node"]: node for node in measured["nodes"]}
    document = {
        **settings,
        "spent_s": spent_s,
        "measured_s": max(node["measure_s"] for node in measured["nodes"]),
        "slow_fraction": probe.SLOW_FRACTION,
        "gemm_median_tflops": judged.gemm_median_tflops,
        "link_reference_gb_s": judged.link_reference_gb_s,
        "nodes": [{**asdict(row), "measured": by_node[row.node]} for row in node_rows],
        "links": [{**link, "slow": (link["a"], link["b"]) in judged.slow_links} for link in links],
        "slow_nodes": list(judged.slow_nodes),
        "slow_links": [list(pair) for pair in judged.slow_links],
        "exclude": list(judged.slow_nodes),  # what `campaign submit` passes to sbatch --exclude, unless --keep-slow
    }
    with open(stem.with_suffix(".json"), "x") as f:
        json.dump(document, f, indent=1)
    return Screen(
        text, judged.slow_nodes, judged.slow_links, stem.with_suffix(".csv"), stem.with_suffix(".json"), spent_s
    )


def screen(
    cfg,
    *,
    budget_s: float,
    nodes: int | None = None,
    environ: Mapping[str, str] | None = None,
    python: str | None = None,
    dry_run: bool = False,
) -> Screen | None:
    """Run a preflight and record it; None for a dry run (which prints each launch). Failed where it failed or
    ran past the budget."""
    check_budget(budget_s)
    folder = folder_of(cfg)
    stem = new_stem(folder)
    measured_path = stem.with_name(stem.name + ".nodes.json")
    launch = plan(
        cfg,
        out=measured_path,
        budget_s=budget_s,
        nodes=nodes,
        environ=os.environ if environ is None else environ,
        python=python,
    )
    print(f"[ddlbench] preflight {launch.where}", file=sys.stderr, flush=True)
    for host, line in launch.shown or [("", shlex.join(launch.argv))]:
        print(
            line if dry_run else f"[ddlbench] {host + ': ' if host else ''}{line}",
            file=sys.stdout if dry_run else sys.stderr,
            flush=True,
        )
    if dry_run:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    code = run(launch)
    spent_s = time.monotonic() - started
    if code == 124:
        raise Failed(
            f"preflight did not finish within --budget-s {budget_s:g} (stopped after {spent_s:.0f} s); a node that "
            "never joined is the first suspect: see the output above"
        )
    if code != 0 or not measured_path.exists():
        raise Failed(f"preflight failed (exit code {code}) after {spent_s:.0f} s; see the output above")
    measured = json.loads(measured_path.read_text())
    settings = {
        "when_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "campaign": str(cfg.run.campaign),
        "system": str(cfg.system.name),
        "where": launch.where,
        "budget_s": budget_s,
        "measure_s": budget_s * MEASURE_SHARE,
        "argv": launch.argv,
    }
    return record(measured, stem=stem, settings=settings, spent_s=spent_s)


def newest(cfg) -> tuple[Path, dict] | None:
    """The campaign's newest preflight (its .json and what it holds), or None."""
    found = sorted(folder_of(cfg).glob("*Z*.json"), key=lambda p: p.stat().st_mtime)
    found = [p for p in found if not p.name.endswith(".nodes.json")]
    if not found:
        return None
    return found[-1], json.loads(found[-1].read_text())


MIN_NODES = 3  # a median over fewer nodes tells little


def campaign_nodes(cfg, cells, *, environ: Mapping[str, str] | None = None) -> int | None:
    """How many nodes `campaign submit --preflight` screens: the campaign's largest job's, at least MIN_NODES,
    at most system.max_nodes; None where the nodes are given (system.hosts, or the allocation it runs in)."""
    environ = os.environ if environ is None else environ
    if cfg.system.get("hosts") or cfg.system.get("hostfile") or environ.get("SLURM_JOB_ID"):
        return None
    largest = max((c.num_nodes for c in cells if not c.problem and c.num_nodes), default=1)
    wanted = max(MIN_NODES, largest)
    return min(wanted, int(cfg.system.max_nodes)) if cfg.system.max_nodes else wanted
