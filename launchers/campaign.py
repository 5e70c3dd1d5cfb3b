"""Campaigns, the plan: an experiment's `campaign:` grid -> its cells, one Slurm job each.

A cell is one run directory (runs/<campaign>/<name>-<cell hash>-r<R>, benchmarks/rundir/), so
the run directories are the truth of what ran. Pure planning: no scheduler, no files written.
The rest of `ddlbench campaign plan|submit|status`: launchers/submit.py (sbatch and the ledger),
launchers/scheduler.py (what Slurm says), ddlbench/campaign.py (the commands).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass
from pathlib import Path


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


def job_overrides(overrides: list[str]) -> list[str]:
    """The overrides a cell's job gets: the grid itself (campaign.*) is the planner's business, not the job's."""
    return [o for o in overrides if not o.startswith("campaign.")]


def plan(overrides: list[str]) -> tuple[object, list[Cell]]:
    """The composed base config and every cell of its campaign grid (impossible ones carry `problem`): what
    each cell's job would refuse before it starts (validate), its layout on the system's nodes, and whether the
    data set feeds one step of its GPUs (validate.check_data). `campaign plan`, `status`, `submit` and `run`
    all plan here, so they agree on which cells are impossible and why."""
    from benchmarks.config import compose, options
    from benchmarks.errors import ConfigError
    from benchmarks.frameworks.configs import CONFIGS as FRAMEWORKS
    from benchmarks.validate import check_data, validate
    from launchers.lifecycle.staging import check_staging_fits

    if not any(o.startswith("experiment=") for o in overrides):
        raise ConfigError(f"campaign needs experiment=<name>; choose one of: {', '.join(options('experiment'))}")
    grid = [o for o in overrides if _grid_key(o)]
    cfg = compose([o for o in overrides if not _grid_key(o)])
    experiment = next(o.split("=", 1)[1] for o in overrides if o.startswith("experiment="))
    cfg.campaign = camp = campaign_of(cfg.campaign, grid, experiment=experiment)
    if cfg.run.dir:
        raise ConfigError(
            f"run.dir={cfg.run.dir} cannot be set for a campaign: every cell needs its own directory; drop it"
        )
    if camp.repeats < 1:
        raise ConfigError(f"campaign.repeats={camp.repeats} must be >= 1")
    axes = [(key, [str(v) for v in values]) for key, values in camp.axes.items()]
    system = cfg.system
    cells: list[Cell] = []
    for combo in itertools.product(*(values for _, values in axes)):
        choices = tuple(zip((k for k, _ in axes), combo))
        cell_cfg, problem = None, None
        try:
            cell_cfg = _cell_config(job_overrides(overrides), choices)
            validate(cell_cfg, check_device=False)
            check_staging_fits(cell_cfg)  # the data set against the nodes' scratch, for data.stage=node_local
        except ConfigError as error:
            problem = str(error)
        single_process = cell_cfg is not None and FRAMEWORKS[cell_cfg.framework.name].SINGLE_PROCESS
        settings = None if cell_cfg is None else _settings(cell_cfg)  # once per cell: its sizes and repeats share it
        for num_gpus in camp.gpus:
            nodes, per_node, size_problem = layout(
                int(num_gpus), ranks_per_node=system.ranks_per_node, max_nodes=system.max_nodes
            )
            if single_process and nodes > 1 and size_problem is None:  # DataParallel: one process, one node
                size_problem = (
                    f"framework={cell_cfg.framework.name} drives one node's GPUs from one process; "
                    f"{num_gpus} GPUs need {nodes} nodes"
                )
            if problem is None and size_problem is None:
                try:  # the data set holds one step of this many GPUs (counted once per size: validate.py)
                    check_data(cell_cfg, world_size=int(num_gpus))
                except ConfigError as error:
                    size_problem = str(error)
            for r in range(camp.repeats):
                repeat = cfg.run.repeat + r
                run_dir = None
                if settings is not None:
                    run_dir = _run_dir(settings, num_gpus=int(num_gpus), num_nodes=max(nodes, 1), repeat=repeat)
                cells.append(
                    Cell(
                        choices=choices,
                        num_gpus=int(num_gpus),
                        num_nodes=nodes,
                        ranks_per_node=per_node,
                        repeat=repeat,
                        run_dir=run_dir,
                        problem=problem or size_problem,
                    )
                )
    check_distinct(cells)
    return cfg, cells


# how the grid's axes are written on the command line, for every error about them
AXES_FORMS = (
    "write one axis as campaign.axes.KEY=[a,b] (e.g. campaign.axes.optim.schedule.name=[step,cosine]) or "
    "several as campaign.axes='{KEY: [a, b], KEY2: [c]}'"
)


def _grid_key(override: str) -> bool:
    """An override of the grid itself (campaign.gpus, campaign.repeats, campaign.axes...): the planner's, not
    Hydra's (an axis key holds dots, which Hydra would read as nesting; an experiment without a campaign:
    section has no node to set them in)."""
    return override.lstrip("+").startswith("campaign.")


def campaign_of(section, grid: list[str], *, experiment: str):
    """The experiment's campaign: section (None: it has none) with the grid's overrides applied: campaign.gpus
    and campaign.repeats replace the experiment's; campaign.axes.KEY=[a,b] adds the axis KEY or replaces its
    values, for any key, dotted or not (model.depth, optim.schedule.name, a config group, experiment/x@_global_);
    campaign.axes='{KEY: [a, b], ...}' does so for each KEY (a merge, as Hydra merges a dict). An axis of one
    value fixes that setting for every cell."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from benchmarks.errors import ConfigError
    from benchmarks.schema import CampaignConfig

    camp = OmegaConf.structured(CampaignConfig) if section is None else copy.deepcopy(section)
    OmegaConf.set_struct(camp, False)  # an axis may be new to the experiment
    parser = OverridesParser.create()
    for override in grid:
        key, equals, text = override.lstrip("+").partition("=")
        if not equals:
            raise ConfigError(f"override {override!r} is not key=value; {AXES_FORMS}")
        try:
            parsed = parser.parse_override(f"value={text}")
        except Exception:  # Hydra's grammar errors: many types, all bad input here
            raise ConfigError(f"override {override!r} cannot be read; {AXES_FORMS}") from None
        value = list(parsed.sweep_string_iterator()) if parsed.is_sweep_override() else parsed.value()
        if key == "campaign.axes":
            if not isinstance(value, dict):
                raise ConfigError(f"override {override!r}: campaign.axes is a dict of axes; {AXES_FORMS}")
            axes = {str(k): (v, f"{key}={{{k}: ...}}") for k, v in value.items()}
        elif key.startswith("campaign.axes."):
            axes = {key.removeprefix("campaign.axes."): (value, override)}
        elif key in ("campaign.gpus", "campaign.repeats"):
            try:
                setattr(camp, key.removeprefix("campaign."), value)
            except OmegaConfBaseException:
                kind = "a list of world sizes, e.g. campaign.gpus=[1,2,4]" if key == "campaign.gpus" else "a count"
                raise ConfigError(f"{key}={text} must be {kind}") from None
            continue
        else:
            raise ConfigError(
                f"{key} is not a campaign key; set campaign.gpus=[...], campaign.repeats=N or the axes: {AXES_FORMS}"
            )
        for axis, (values, said) in axes.items():
            camp.axes[axis] = _axis_values(axis, values, said)
    if OmegaConf.is_missing(camp, "gpus"):
        raise ConfigError(
            f"experiment={experiment} has no campaign: section; pass its world sizes with the axes "
            "(campaign.gpus=[1,2] campaign.axes.loader=[synthetic,native]), add a campaign: section (see "
            "conf/experiment/slurm_smoke.yaml) or pick an experiment that has one"
        )
    return camp


def _axis_values(axis: str, values, said: str) -> list:
    """An axis' values as the grid takes them: a list of one value or more (a single value is a list of one),
    each a value an override can carry."""
    from benchmarks.errors import ConfigError

    if not axis or axis.startswith(".") or axis.endswith("."):
        raise ConfigError(f"override {said!r} names no config key; {AXES_FORMS}")
    values = values if isinstance(values, list) else [values]
    if not values:
        raise ConfigError(f"override {said!r} gives campaign.axes.{axis} no value; give one or more: {AXES_FORMS}")
    if any(isinstance(v, dict) for v in values):
        raise ConfigError(f"override {said!r}: an axis value is one setting, not a dict; {AXES_FORMS}")
    return values


def _cell_config(base: list[str], choices: tuple[tuple[str, str], ...]):
    """compose([*base, *choices]): benchmarks/config.py composes each choice of the grid's config groups once
    and applies the plain keys (model.depth) to a copy, as Hydra does (aach2023_scaling: 7 compositions for
    its 18 axis choices)."""
    from benchmarks.config import compose

    return compose([*base, *(f"{k}={v}" for k, v in choices)])


def axis_configs(overrides: list[str]) -> list:
    """The composed config of every combination of the experiment's axes (those that compose: `plan` says why
    the others cannot run), for `ddlbench doctor experiment=...`: what each cell will run (its loader, framework,
    launcher), not only the experiment's defaults."""
    from benchmarks.config import compose
    from benchmarks.errors import ConfigError

    experiment = next(o.split("=", 1)[1] for o in overrides if o.startswith("experiment="))
    grid = [o for o in overrides if _grid_key(o)]
    base = compose([o for o in overrides if not _grid_key(o)])
    camp = campaign_of(base.campaign, grid, experiment=experiment)
    axes = [(key, [str(v) for v in values]) for key, values in camp.axes.items()]
    configs = []
    for combo in itertools.product(*(values for _, values in axes)):
        try:
            configs.append(_cell_config(job_overrides(overrides), tuple(zip((k for k, _ in axes), combo))))
        except ConfigError:
            continue
    return configs or [base]


def reasons(cells: list[Cell]) -> list[tuple[int, str]]:
    """Why the impossible cells cannot run: (number of cells, reason), most cells first, then in the grid's
    order; an unset data path shared by 486 cells is one reason."""
    counts: dict[str, int] = {}
    for cell in cells:
        if cell.problem:
            counts[cell.problem] = counts.get(cell.problem, 0) + 1
    return sorted(((n, reason) for reason, n in counts.items()), key=lambda item: -item[0])


def _settings(cfg) -> dict:
    """A cell's resolved settings, flat (cell_identity.flatten): what its run directories are named from."""
    from omegaconf import OmegaConf

    from benchmarks.rundir import cell_identity

    return cell_identity.flatten(OmegaConf.to_container(cfg, resolve=True))


def _run_dir(settings: dict, *, num_gpus: int, num_nodes: int, repeat: int) -> Path:
    """What benchmarks.validate.resolve_run_dir gives the job for this allocation and run.repeat."""
    from benchmarks.rundir import cell_identity

    return cell_identity.run_dir({**settings, "run.repeat": repeat}, world_size=num_gpus, num_nodes=num_nodes).resolve()


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

            raise ConfigError(
                f"campaign cells '{says(other)}' and '{says(cell)}' are one configuration "
                f"({cell.run_dir.name}): an axis value repeats or sets a key that is no run setting; "
                "drop the duplicate from campaign.axes"
            )
