"""`ddlbench commbench`: the command (its options, the output file, the hosts); starting the ranks is
launchers/commbench.py, their work benchmarks/commbench/."""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.commbench import add_sweep_arguments, parse_ops
from benchmarks.errors import ConfigError
from launchers import code_origin, local, programs
from launchers.commbench import DEFAULT_HOSTS_PORT, check_backends, commbench_command, hosts_commands, launcher_for
from launchers.lifecycle.supervise import announce


def default_out(nproc: int, backends: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return (
        Path("runs")
        / "commbench"
        / f"commbench-{backends.replace(',', '+')}-g{nproc}-{socket.gethostname()}-{stamp}.json"
    )


def _hosts(args: argparse.Namespace) -> tuple[list[str], int | None, str | None]:
    """(hosts, slots from the hostfile, the hostfile) from --hosts or --hostfile; ([], None, None) for one machine."""
    if args.hosts and args.hostfile:
        raise ConfigError("--hosts and --hostfile both name the hosts; pass one of them")
    if args.hostfile:
        path = Path(args.hostfile)
        try:
            text = path.read_text()
        except OSError as error:
            raise ConfigError(f"--hostfile {path}: {error.strerror or error}; pass a readable hostfile") from None
        hosts, slots = local.parse_hostfile(text, source=f"--hostfile {path}")
        return hosts, slots, str(path.resolve())
    if args.hosts:
        return [h.strip() for h in args.hosts.split(",") if h.strip()], None, None
    return [], None, None


def cmd_commbench(args: argparse.Namespace) -> int:
    if args.nproc < 1:
        raise ConfigError(f"--nproc {args.nproc} must be >= 1; e.g. --nproc 2 (one rank per GPU)")
    if args.max_bytes is not None and args.max_bytes < args.min_bytes:
        raise ConfigError(f"--max-bytes {args.max_bytes} is below --min-bytes {args.min_bytes}; raise --max-bytes")
    backends = [b.strip() for b in args.backends.split(",")]
    launcher = launcher_for(backends)
    parse_ops(args.ops)
    check_backends(backends, device=args.device)
    hosts, slots, hostfile = _hosts(args)
    nproc = slots or args.nproc
    out = Path(args.out) if args.out else default_out(nproc * max(1, len(hosts)), args.backends)
    if out.exists():
        raise ConfigError(f"--out {out} exists (never overwritten); pass another --out")
    rank_args = [
        "--out",
        str(out.resolve()),
        "--backends",
        args.backends,
        "--ops",
        args.ops,
        "--placement",
        args.placement,
        "--min-bytes",
        str(args.min_bytes),
        "--warmup",
        str(args.warmup),
        "--iters",
        str(args.iters),
        "--device",
        args.device,
    ]
    if args.max_bytes is not None:
        rank_args += ["--max-bytes", str(args.max_bytes)]
    if args.no_check:
        rank_args.append("--no-check")
    if args.no_gpu_tests:
        rank_args.append("--no-gpu-tests")
    write_hostfile = None
    if hosts:
        port = args.master_port or DEFAULT_HOSTS_PORT
        if hostfile is None and programs.LAUNCHERS[launcher].reads_hostfile:  # written beside the results
            write_hostfile = out.with_suffix(".hostfile").resolve()
            hostfile = str(write_hostfile)
        launches = hosts_commands(
            launcher=launcher,
            hosts=hosts,
            nproc_per_host=nproc,
            master_port=port,
            rank_args=rank_args,
            hostfile=hostfile,
        )
        node_rank = 0
        if programs.LAUNCHERS[launcher].runs_on_every_host:
            if args.node_rank is None:
                raise ConfigError(
                    f"{launcher} runs on every host: pass --node-rank 0..{len(hosts) - 1} (this host's "
                    "place in the hosts) and otherwise the same command on each host"
                )
            node_rank = local.hosts_shape(
                hosts=hosts, ranks_per_node=nproc, master_port=port, node_rank=args.node_rank
            ).node_rank
        argv = launches[node_rank][1]
    else:
        if args.master_port:
            port = args.master_port
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        argv = commbench_command(launcher=launcher, nproc=nproc, master_port=port, rank_args=rank_args)
    announce(argv, dry_run=args.dry_run)
    if args.dry_run:
        return 0
    out.parent.mkdir(parents=True, exist_ok=True)
    if write_hostfile is not None:
        write_hostfile.write_text(local.hostfile_text(hosts, slots=nproc))
    # the ranks run this checkout's code, not the working directory's (launchers/code_origin.py)
    code = subprocess.run(argv, env={**os.environ, **code_origin.launch_environment()}).returncode
    if code != 0:
        print(f"ddlbench: error: commbench failed with exit code {code}", file=sys.stderr)
    return code


def add_parser(sub) -> None:
    p = sub.add_parser(
        "commbench",
        help="collective suite (nccl-tests' busbw and table, checked), GPU P2P matrix, concurrent H2D bandwidth (JSON)",
    )
    p.add_argument("--nproc", type=int, default=2, help="ranks per host (one per GPU on GPU machines)")
    add_sweep_arguments(p)
    p.add_argument("--hosts", default=None, help="comma list of hosts (no Slurm); the first holds the rendezvous")
    p.add_argument("--hostfile", default=None, help="hosts as lines '<host> slots=<ranks per host>' (no Slurm)")
    p.add_argument("--node-rank", type=int, default=None, help="this host's place in --hosts (torchrun, deepspeed)")
    p.add_argument(
        "--master-port",
        type=int,
        default=None,
        help=f"rendezvous port (default: a free one; {DEFAULT_HOSTS_PORT} across hosts)",
    )
    p.add_argument(
        "--out", default=None, help="JSON file (default runs/commbench/commbench-<backends>-g<N>-<host>-<time>.json)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the launch command only")
    p.set_defaults(func=cmd_commbench)
