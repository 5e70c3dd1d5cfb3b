"""The rank program, a Hydra app run on every rank: python -m benchmarks framework=ddp loader=native model.depth=50.

It composes the engine (benchmarks/) with the run's life (launchers/lifecycle/rank.py: the rank's place, staging,
the watchdog, the interference observer, the failure record): with commbench's, the one module of the engine that
imports launchers (tests/unit/test_import_graph.py PROGRAMS)."""

from __future__ import annotations

import signal
import sys

import hydra
from omegaconf import DictConfig, OmegaConf

from benchmarks import config_groups, resources, schema
from benchmarks.errors import ConfigError
from launchers.lifecycle import liveness
from launchers.lifecycle.forked_rank import as_fresh_interpreter, exit_rank, is_forked_rank

schema.register()
# `--help` lists the options of each group from the YAML files, never the ConfigStore's *_schema entries
OmegaConf.register_new_resolver("ddlbench_groups", config_groups.groups_text, replace=True)


# the shipped configs (benchmarks/resources.py), found relative to this package wherever it is installed
@hydra.main(config_path="_shipped/conf", config_name="config", version_base=None)
def main(cfg: DictConfig) -> None:
    from launchers.lifecycle.rank import run

    try:
        code = run(cfg)
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt as interrupt:  # the run directory says so (app.run); no traceback
        print(f"ddlbench: interrupted ({str(interrupt) or 'SIGINT'})", file=sys.stderr)
        code = 130
    exit_rank(code)


def _interrupt(signum, _frame) -> None:
    """SIGTERM (Slurm at the time limit, a launcher stopping its ranks) ends a rank as Ctrl-C does; a further
    SIGINT or SIGTERM (the supervisor and torchrun both signal) does not cut its clean-up short, which
    writes the end record and rank 0's summary."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def refuse_multirun(argv: list[str]) -> str | None:
    """Hydra's multirun would run the ranks' program once per combination in one process, outside the
    launchers and the run directories: a sweep is a campaign (experiment files' campaign: axes)."""
    if any(a in ("-m", "--multirun") or a.startswith("--multirun=") for a in argv):
        return (
            "ddlbench: error: -m/--multirun is not supported here (one process would run every combination, "
            "outside the launchers); use 'ddlbench run -m a=1,2 ...' (one launched run per combination) or a "
            "campaign (conf/experiment/*.yaml campaign.axes)"
        )
    return None


if __name__ == "__main__":
    if is_forked_rank():  # torchrun --run-path --start-method=fork: a CPU run's rank, forked from its agent
        as_fresh_interpreter(unbuffered=True)
        import torch  # imported already, by the process this rank forked from

        # one thread before anything computes: OpenMP's pool, if the parent had one, did not survive the fork
        # (launchers/local.py ranks_may_fork forks only the ranks of system.cpus_per_rank=1)
        torch.set_num_threads(1)
    if (message := refuse_multirun(sys.argv[1:])) is not None:
        print(message, file=sys.stderr)
        sys.exit(2)
    signal.signal(signal.SIGTERM, _interrupt)
    liveness.exit_when_orphaned()  # a rank whose launcher died (kill -9, a lost agent) stops, not trains on
    try:
        sys.argv += resources.search_path_override()  # the user's own options (DDLBENCH_CONFIG)
        for refused in filter(None, map(config_groups.schema_choice, sys.argv[1:])):
            raise ConfigError(refused)  # Hydra would compose framework=ddp_schema as an option of its own
    except ConfigError as error:
        print(f"ddlbench: error: {error}", file=sys.stderr)
        sys.exit(2)
    main()
