"""`ddlbench commbench`, the command side: start N local ranks of `python -m benchmarks.commbench`
through the same registered builders as `ddlbench run` (launchers/local.py); the ranks do the work
(benchmarks/commbench/)."""
from __future__ import annotations

import argparse
import os
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks.adapter_config import config_default
from benchmarks.commbench import BACKENDS, framework_of
from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
from benchmarks.frameworks.configs import LocalLauncher, Rendezvous
from launchers import local
from launchers.registry import RankProgram

MODULE = "benchmarks.commbench"


def _launcher_of(backend: str) -> str:
    """torch-rendezvous backends share one torchrun launch (one torch.distributed group); a framework that
    joins its ranks itself (Rendezvous.own: Horovod) is started by its own default local launcher."""
    config = FRAMEWORKS[framework_of(backend)]
    own = config.RENDEZVOUS is Rendezvous.own
    return str(config_default(config, "local_launcher") if own else LocalLauncher.torchrun)


# the local launcher that starts each backend's ranks (launch facts of the framework configs)
BACKEND_LAUNCHERS = {backend: _launcher_of(backend) for backend in BACKENDS}


def rank_program(rank_args: Sequence[str]) -> RankProgram:
    return RankProgram(module=MODULE, args=tuple(rank_args))


def launcher_for(backends: Sequence[str]) -> str:
    """The one local launcher that starts every backend of the list (ConfigError when they need several)."""
    unknown = [b for b in backends if b not in BACKEND_LAUNCHERS]
    if unknown:
        raise ConfigError(f"--backends {','.join(backends)}: {', '.join(map(repr, unknown))} is unknown; "
                          f"choose from {', '.join(BACKENDS)}")
    groups: dict[str, list[str]] = {}
    for backend in backends:
        groups.setdefault(BACKEND_LAUNCHERS[backend], []).append(backend)
    if len(groups) > 1:
        apart = " and ".join(f"--backends {','.join(names)}" for names in groups.values())
        started = ", ".join(f"{','.join(names)} by {launcher}" for launcher, names in groups.items())
        raise ConfigError(f"--backends {','.join(backends)}: started by different launchers ({started}); "
                          f"run them apart: {apart}")
    return next(iter(groups))


def commbench_command(*, launcher: str, nproc: int, master_port: int, rank_args: Sequence[str]) -> list[str]:
    """The argv that starts `nproc` local commbench ranks with a registered local launcher."""
    shape = local.local_shape(nproc=nproc, master_port=master_port)
    return local.LAUNCHERS.get(launcher, key="commbench launcher")(shape, rank_program(rank_args))


def default_out(nproc: int, backends: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / "commbench" / f"commbench-{backends.replace(',', '+')}-g{nproc}-{socket.gethostname()}-{stamp}.json"


def cmd_commbench(args: argparse.Namespace) -> int:
    if args.nproc < 1:
        raise ConfigError(f"--nproc {args.nproc} must be >= 1; e.g. --nproc 2 (one rank per GPU)")
    if args.max_bytes is not None and args.max_bytes < args.min_bytes:
        raise ConfigError(f"--max-bytes {args.max_bytes} is below --min-bytes {args.min_bytes}; raise --max-bytes")
    out = Path(args.out) if args.out else default_out(args.nproc, args.backends)
    if out.exists():
        raise ConfigError(f"--out {out} exists (never overwritten); pass another --out")
    launcher = launcher_for([b.strip() for b in args.backends.split(",")])
    out.parent.mkdir(parents=True, exist_ok=True)
    rank_args = ["--out", str(out.resolve()), "--backends", args.backends, "--min-bytes", str(args.min_bytes),
                 "--warmup", str(args.warmup), "--iters", str(args.iters), "--device", args.device]
    if args.max_bytes is not None:
        rank_args += ["--max-bytes", str(args.max_bytes)]
    if args.no_gpu_tests:
        rank_args.append("--no-gpu-tests")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    argv = commbench_command(launcher=launcher, nproc=args.nproc, master_port=port, rank_args=rank_args)
    print(f"[ddlbench] {shlex.join(argv)}", file=sys.stderr, flush=True)
    if args.dry_run:
        return 0
    code = subprocess.run(argv, env=os.environ.copy()).returncode
    if code != 0:
        print(f"ddlbench: error: commbench failed with exit code {code}", file=sys.stderr)
    return code


def add_parser(sub) -> None:
    p = sub.add_parser("commbench", help="all-reduce bus bandwidth sweep, GPU P2P matrix, concurrent H2D bandwidth (JSON)")
    p.add_argument("--nproc", type=int, default=2, help="local ranks (one per GPU on GPU machines)")
    p.add_argument("--backends", default="torch", help="comma list: torch, deepspeed (same launch); horovod (alone)")
    p.add_argument("--min-bytes", type=int, default=1024)
    p.add_argument("--max-bytes", type=int, default=None, help="largest all-reduce; default 4 GiB on GPU, 4 MiB on CPU")
    p.add_argument("--warmup", type=int, default=5, help="untimed all-reduces per size")
    p.add_argument("--iters", type=int, default=20, help="timed all-reduces per size")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto")
    p.add_argument("--no-gpu-tests", action="store_true", help="skip the P2P matrix and the concurrent H2D copy")
    p.add_argument("--out", default=None, help="JSON file (default runs/commbench/commbench-<backends>-g<N>-<host>-<time>.json)")
    p.add_argument("--dry-run", action="store_true", help="print the launch command only")
    p.set_defaults(func=cmd_commbench)
