"""`ddlbench predict`: gather the measured parts, run the model of analysis/predict.py, print and save.

Its arguments and their help are registered by ddlbench/predict.py (argparse alone: `ddlbench --help` imports
no pandas); cmd_predict is the command.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis import predict as P
from benchmarks.errors import ConfigError
from benchmarks.loaders.configs import batch_makers, queue_depth, worker_count

# what a calibration run must share with the prediction: the compute it measured is for these alone
SAME_CELL = ("model", "per_gpu_batch", "precision")


def loader_case(loader: dict[str, Any]) -> str:
    """The loader as `ddlbench loaderbench` names its cases (benchmarks/loaderbench.py's loader_overrides):
    its name, dali-tfrecord for DALI's TFRecord reader, native_gpu-nvimgcodec for nvImageCodec."""
    name = str(loader["name"])
    if name == "dali" and str(loader.get("reader", "file")) == "tfrecord":
        return "dali-tfrecord"
    if name == "native_gpu" and str(loader.get("gpu_decoder", "torchvision")) == "nvimgcodec":
        return "native_gpu-nvimgcodec"
    return name


# how a framework holds the parameters: a sharded mode's measured compute holds its own host work per unit
# (gathers issued, shards copied in and out), which a replicated mode's does not, and the other way round;
# FSDP2's units are its shard_unit
REPLICATED = "replicated"


def sharding_of(framework: dict[str, Any]) -> str:
    """replicated, fsdp:<shard_unit> or zero3: how the framework holds the parameters (sharding_words)."""
    name = str(framework.get("name"))
    if name == "fsdp":
        return f"fsdp:{framework.get('shard_unit') or 'children'}"
    if name == "deepspeed" and int(framework.get("zero_stage", 0) or 0) == 3:
        return "zero3"
    return REPLICATED


def sharding_words(sharding: str) -> str:
    """A sharding as the overrides that select it."""
    if sharding.startswith("fsdp:"):
        return f"framework=fsdp framework.shard_unit={sharding.removeprefix('fsdp:')}"
    if sharding == "zero3":
        return "framework=deepspeed framework.zero_stage=3"
    return "framework=ddp, horovod or deepspeed with framework.zero_stage 0-2"


def unmeasured(run: str, measured: dict[str, Any], cell: dict[str, Any]) -> str | None:
    """One line naming what the calibration run `run` did not measure and what to measure, or None."""
    for key in SAME_CELL:
        if str(measured[key]) != str(cell[key]):
            return (
                f"{key}={cell[key]}: the calibration run {run} ran {key}={measured[key]}; pass --from a run of "
                f"{key}={cell[key]} (ddlbench run ... on a GPU of the kind it ran on), or predict {key}={measured[key]}"
            )
    if measured.get("sharding", REPLICATED) != cell.get("sharding", REPLICATED):
        asked, ran = sharding_words(cell["sharding"]), sharding_words(measured["sharding"])
        return (
            f"{asked}: the calibration run {run} ran {ran}, whose compute lacks (or holds) the sharded mode's own "
            f"work per unit; pass --from a run of {asked}"
        )
    if measured["loader"] != cell["loader"]:
        asked = loader_words(cell["loader"])
        return (
            f"{asked}: the calibration run {run} was fed by {loader_words(measured['loader'])}; pass --from "
            f"a run with {asked}, or --loader-capacity FILE from 'ddlbench loaderbench' on that machine"
        )
    return None


def loader_words(case: str) -> str:
    """A loader case as the overrides that select it."""
    return {
        "dali-tfrecord": "loader=dali loader.reader=tfrecord",
        "native_gpu-nvimgcodec": "loader=native_gpu loader.gpu_decoder=nvimgcodec",
    }.get(case, f"loader={case}")


def parse_gpus(text: str) -> list[int]:
    try:
        gpus = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--gpus {text}: give GPU counts separated by commas, e.g. --gpus 4,8,16") from None
    if not gpus or min(gpus) < 1:
        raise ConfigError(f"--gpus {text}: every GPU count must be >= 1, e.g. --gpus 4,8,16")
    return sorted(set(gpus))


def _nested(flat: dict[str, Any], prefix: str) -> dict[str, Any]:
    """config.<prefix>.<key> columns of a runs row -> {key: value} (one level; lists stay JSON text)."""
    start = f"config.{prefix}."
    return {k[len(start) :]: v for k, v in flat.items() if k.startswith(start) and not pd.isna(v)}


def _load(paths: Sequence[str], *, what: str):
    from analysis.load import load_campaign

    campaigns = []
    for text in paths:
        path = Path(text)
        if not path.exists():
            raise ConfigError(f"{what} {text}: no such file or directory; give a run directory or a runs folder")
        campaigns.append(load_campaign(path if path.is_dir() else path.parent))
    return campaigns


def _commbench(paths: Sequence[str]) -> pd.DataFrame:
    frames = []
    for campaign, text in zip(_load(paths, what="--commbench"), paths):
        frame = campaign.commbench
        if Path(text).is_file():
            frame = frame[frame["source"] == Path(text).name]
        if frame.empty:
            raise ConfigError(f"--commbench {text}: no commbench measurements there (commbench*.json)")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


class Calibration:
    """The calibration runs: their Parts, and which one predicts a held-out run. A calibration run's label is
    the name of the folder it lies in; a held-out run in a folder of the same name, of the same size, takes
    it (perf/predict_cpu.py measures each calibration just before the runs it calibrates, so that both see
    the machine alike); else one of its size; else the smallest."""

    def __init__(
        self, paths: Sequence[str], *, cell: dict[str, Any], scale: float, loader_modelled: bool = False
    ) -> None:
        self.parts: dict[int, P.Parts] = {}
        self.labelled: dict[tuple[str, int], P.Parts] = {}
        self.run_dirs: set[str] = set()
        for campaign, text in zip(_load(paths, what="--from"), paths):
            runs = campaign.counted
            if runs.empty:
                raise ConfigError(f"--from {text}: no completed run there; pass the directory of a completed run")
            for _, row in runs.iterrows():
                refused = unmeasured(Path(row["run_dir"]).name, measured_cell(row), cell)
                if refused and not (refused.startswith("loader=") and loader_modelled):
                    raise ConfigError(refused)
                steps = campaign.steps[campaign.steps["run_id"].astype(str) == str(row["run_id"])]
                parts = P.parts_from_steps(
                    steps,
                    per_gpu_batch=int(row["per_gpu_batch"]),
                    source=f"{Path(row['run_dir']).name}",
                    # runs from before summary.json said (NaN in the runs table) counted images
                    sample_unit=str(row["sample_unit"]) if pd.notna(row.get("sample_unit")) else "images",
                    loader=measured_cell(row)["loader"],
                )
                parts = _loader_from_run(parts, steps, row) if not loader_modelled else parts
                parts = parts.scaled(scale) if scale != 1.0 else parts
                world = int(row["world_size"])
                self.parts.setdefault(world, parts)
                self.labelled[(Path(row["run_dir"]).resolve().parent.name, world)] = parts
                self.run_dirs.add(str(Path(row["run_dir"]).resolve()))

    def for_world(self, world: int, *, label: str | None = None) -> P.Parts:
        """The run of the same label and size, else of the same size, else the smallest."""
        return self.labelled.get((label, world)) or self.parts.get(world) or self.parts[min(self.parts)]


def _loader_from_run(parts: P.Parts, steps: pd.DataFrame, row: Any) -> P.Parts:
    """A calibration run that waited for its loader (P.loader_bound): the loader's pace as its batches arrived
    (P.arrival_intervals) with the run's own workers and queue, simulated as loaderbench's would be; any other
    run keeps the closed form (its loader's capacity: at least a batch per mean step)."""
    measured = P.measured_steps(steps)
    if math.isinf(parts.loader_img_s) or measured.empty or not P.loader_bound(measured):
        return parts
    loader = {"name": row.get("loader"), **_nested(row.to_dict(), "loader")}
    workers = worker_count(loader)
    intervals = P.arrival_intervals(measured)
    if not intervals:
        return parts
    return parts.with_loader(
        loader=parts.loader,
        img_s=parts.per_gpu_batch / float(np.mean(intervals)),
        source=f"the arrivals of {parts.source}'s batches: it waited for its loader",
        intervals_s=intervals,
        makers=batch_makers(loader, workers=workers),
        queue=queue_depth(loader, workers=workers),
    )


def measured_cell(row: Any) -> dict[str, Any]:
    """What a run of the runs table measured, as `unmeasured` compares it: SAME_CELL and its loader case."""
    flat = row.to_dict() if hasattr(row, "to_dict") else dict(row)
    loader = {"name": flat.get("loader"), **_nested(flat, "loader")}
    framework = {"name": flat.get("framework"), **_nested(flat, "framework")}
    return {**{k: flat.get(k) for k in SAME_CELL}, "loader": loader_case(loader), "sharding": sharding_of(framework)}


def _with_defaults(framework: dict[str, Any], cache: dict) -> dict[str, Any]:
    """A run's framework settings over the framework's defaults (older config.yaml files lack newer keys)."""
    from omegaconf import OmegaConf

    from benchmarks.config import compose

    name = str(framework["name"])
    if name not in cache:
        cache[name] = OmegaConf.to_container(compose([f"framework={name}"]).framework, resolve=True)
    return {**cache[name], **framework}


def _plan(
    model: dict[str, Any], framework: dict[str, Any], *, image_size: int, amp_dtype: str | None, cache: dict
) -> list[P.Message]:
    from benchmarks import gradients
    from benchmarks.frameworks.configs import framework_config

    key = json.dumps([model, image_size], sort_keys=True, default=str)
    if key not in cache:
        cache[key] = gradients.layout(model, image_size=image_size)
    layout, amp = cache[key], amp_dtype is not None
    config = framework_config(framework)
    units, persistent = None, 0.0
    if framework["name"] == "deepspeed" and config.zero_stage == 3:
        # DeepSpeed gathers a module's partitioned parameters before its forward and backward; the small ones it
        # keeps whole on every rank, gathered once after the step
        gathered = [g for g in layout.gradients if not config.zero3_persists(g.bytes // 4)]
        modules: dict[str, int] = {}
        owner = {g.name: modules.setdefault(g.name.rpartition(".")[0], len(modules)) for g in gathered}
        units = P.units_from_groups(
            gathered, owner, -1, gather_scale=1.0 if config.fp32_weights(amp=amp) else 0.5, reduce_scale=0.0
        )
        persistent = float(sum(g.bytes for g in layout.gradients if config.zero3_persists(g.bytes // 4)))
    if framework["name"] == "fsdp":
        units = P.units_from_groups(
            layout.gradients,
            *_shard_owners(model, str(config.shard_unit), cache=cache),
            gather_scale=0.5 if config.gathers_half(amp=amp) else 1.0,
            reduce_scale=0.5 if config.reduces_half(amp=amp) else 1.0,
        )
    return P.messages(
        framework,
        config.gradient_messages(layout.gradients, amp=amp) if framework["name"] != "fsdp" else [],
        buffer_bytes=layout.buffer_bytes,
        param_bytes=sum(g.bytes for g in layout.gradients),
        units=units,
        persistent_bytes=persistent,
        amp=amp,
    )


def _shard_owners(model: dict[str, Any], shard_unit: str, *, cache: dict) -> tuple[dict[str, int], int]:
    """Each parameter's FSDP2 group (the first of fsdp.shard_groups, inner first, that holds it) and the index
    of the model's own group: the groups the adapter builds, on the meta device."""
    from benchmarks import gradients
    from benchmarks.frameworks.configs import ShardUnit
    from benchmarks.frameworks.fsdp import shard_groups

    key = json.dumps(["fsdp", model, shard_unit], sort_keys=True, default=str)
    if key not in cache:
        built = gradients.meta_model(model)
        names = {id(p): name for name, p in built.named_parameters()}
        groups = shard_groups(built, ShardUnit(shard_unit))
        owner: dict[str, int] = {}
        for index, group in enumerate(groups):
            for parameter in group.parameters():
                owner.setdefault(names[id(parameter)], index)
        cache[key] = (owner, len(groups) - 1)
    return cache[key]


def _network_for(folder: Path, root: Path, *, gpus_per_node: int, fallback: P.Network | None, cache: dict):
    """The network of a held-out run: commbench files in its folder or the nearest one above it (up to root)."""
    from analysis.load import load_campaign

    here = folder
    while True:
        files = sorted(p for p in here.glob("commbench*.json") if p.is_file())
        if files:
            if here not in cache:
                frame = load_campaign(here).commbench
                frame = frame[frame["source"].isin([p.name for p in files])]
                cache[here] = P.network_from_commbench(frame, gpus_per_node=gpus_per_node, fallback=fallback)
            return cache[here], here
        if here == root or root not in here.parents:
            return fallback, None
        here = here.parent


def validation_points(
    root: Path,
    calibration: Calibration,
    *,
    cell: dict[str, Any],
    gpus_per_node: int,
    fallback: P.Network | None,
    bench: LoaderBench | None = None,
) -> tuple[list[P.Point], list[str]]:
    """Every completed run below root of the predicted model, batch and precision that did not calibrate. With
    bench, each run's loader is modelled from loaderbench's row at that run's own worker count."""
    from analysis.cells import run_throughput
    from analysis.load import load_campaign
    from analysis.time_shares import breakdown

    campaign = load_campaign(root)
    runs = campaign.counted
    measured = run_throughput(campaign.steps, campaign.runs).set_index("run_id")
    shares = breakdown(campaign.steps).set_index("run_id")
    points, skipped = [], []
    layouts, defaults, networks = {}, {}, {}  # caches: per model, per framework name, per folder
    for _, row in runs.iterrows():
        run_dir = Path(row["run_dir"]).resolve()
        run_id = str(row["run_id"])
        if str(run_dir) in calibration.run_dirs:
            continue  # calibrated from: never held out
        if unmeasured(run_id, measured_cell(row), cell):
            skipped.append(f"{run_id}: another model, batch, precision, loader or parameter sharding")
            continue
        flat = row.to_dict()
        try:
            plan = _plan(
                _nested(flat, "model"),
                _with_defaults(_nested(flat, "framework"), defaults),
                image_size=int(flat.get("config.model.image_size") or 224),
                amp_dtype=_nested(flat, "precision").get("amp_dtype"),
                cache=layouts,
            )
            network, where = _network_for(
                run_dir.parent, root.resolve(), gpus_per_node=gpus_per_node, fallback=fallback, cache=networks
            )
            if network is None:
                raise ConfigError("no commbench file beside it and no system network")
            network.level(int(row["world_size"]))
            parts = calibration.for_world(int(row["world_size"]), label=run_dir.parent.name)
            if bench is not None:
                loader = {"name": flat.get("loader"), **_nested(flat, "loader")}
                parts = parts.with_loader(**bench.loader(cell["loader"], loader))
        except ConfigError as error:
            skipped.append(f"{run_id}: {error}")
            continue
        share = shares["allreduce_exposed_share"].get(run_id, math.nan) if run_id in shares.index else math.nan
        points.append(
            P.Point(
                run_id=run_id,
                world_size=int(row["world_size"]),
                num_nodes=int(row["num_nodes"]),
                measured_throughput=float(measured.loc[run_id, "throughput_img_s"]),
                measured_allreduce_pct=100 * float(share),
                network=network,
                parts=parts,
                plan=tuple(plan),
                label=str(where.relative_to(root.resolve())) if where is not None else "",
            )
        )
    return points, skipped


def _reference_rows(cell: dict[str, Any], loader: str, name: str) -> pd.DataFrame:
    from analysis.load import load_reference

    ref = load_reference(name)
    rows = ref[(ref["model"] == cell["model"]) & (ref["loader"] == loader)]
    if rows.empty:
        models = sorted(set(ref["model"]))
        raise ConfigError(
            f"--reference {name}: no rows for model={cell['model']} loader={loader}; it has "
            f"{', '.join(models)} with loaders {', '.join(sorted(set(ref['loader'])))}"
        )
    return rows.reset_index(drop=True)


def format_prediction(table: pd.DataFrame, *, unit: str, simulated: bool = False) -> str:
    per = "img/s" if unit == "images" else "seq/s"
    lines = [
        f"{'gpus':>6} {'nodes':>5} {'step ms':>9} {per:>12} {per + '/GPU':>10} {'eff':>6} "
        f"{'allreduce%':>10} {'sync ms':>8} {'data%':>6} {'compute%':>8} {'other%':>6}"
    ]
    for _, r in table.iterrows():
        lines.append(
            f"{int(r['gpus']):>6d} {int(r['nodes']):>5d} {1e3 * r['step_s']:>9.2f} {r['throughput']:>12,.0f} "
            f"{r['per_gpu']:>10,.1f} {r['efficiency']:>6.3f} {r['allreduce_pct']:>10.1f} {1e3 * r['sync_s']:>8.2f} "
            f"{r['data_pct']:>6.1f} {r['compute_pct']:>8.1f} {r['other_pct']:>6.1f}"
        )
    how = (
        "simulated: each rank's loader makes batches at its measured intervals, compute jitter normal"
        if simulated
        else "its compute and data-time spread x the expected maximum of n normals"
    )
    lines.append(
        f"# allreduce% holds sync: every collective waits for the slowest rank ({how}), which a trace shows as "
        "collective time, as study A's table counts it"
    )
    bound = table[table["loader_wait_s"] > 0]
    if len(bound):
        asked, delivered = bound["demand_node_img_s"].max(), bound["loader_node_img_s"].iloc[-1]
        why = (
            f"the GPUs of a node ask {asked:,.0f} img/s at most, its loaders deliver {delivered:,.0f}"
            if asked > delivered
            else f"its loaders deliver {delivered:,.0f} img/s per node on average, more than the GPUs ask "
            f"({asked:,.0f} at most), but their batches come unevenly"
        )
        lines.append(f"# data% waits for the loader at {', '.join(str(int(g)) for g in bound['gpus'])} GPUs: {why}")
    return "\n".join(lines)


def format_reference(table: pd.DataFrame, name: str, *, fitted: bool) -> str:
    how = (
        "* = the point the prediction was fitted to, the rest held out"
        if fitted
        else "the study's rows beside the prediction: none of them feeds it"
    )
    lines = [
        f"# against --reference {name} (percent of the step; {how})",
        f"{'gpus':>6} {'allreduce ref':>13} {'pred':>6} {'err pp':>7} {'data ref':>9} {'pred':>6} "
        f"{'compute ref':>11} {'pred':>6}",
    ]
    for _, r in table.iterrows():
        mark = " " if r["held_out"] else "*"
        lines.append(
            f"{int(r['gpus']):>5d}{mark} {r['allreduce_pct_ref']:>13.1f} {r['allreduce_pct_pred']:>6.1f} "
            f"{r['allreduce_err_pp']:>+7.1f} {r['data_pct_ref']:>9.1f} {r['data_pct_pred']:>6.1f} "
            f"{r['compute_pct_ref']:>11.1f} {r['compute_pct_pred']:>6.1f}"
        )
    held = table[table["held_out"]]
    if len(held):
        lines.append(
            f"# held out: allreduce share mean |error| {held['allreduce_err_pp'].abs().mean():.1f} pp, "
            f"max {held['allreduce_err_pp'].abs().max():.1f} pp; rises with the GPU count: "
            f"{'yes' if held['allreduce_pct_pred'].is_monotonic_increasing else 'no'} "
            f"(reference: {'yes' if table['allreduce_pct_ref'].is_monotonic_increasing else 'no'})"
        )
    return "\n".join(lines)


def format_validation(table: pd.DataFrame, skipped: list[str], *, goal_pct: float) -> str:
    lines = [
        "# validation: held-out measured runs (never a calibration run)",
        f"{'where':<16} {'gpus':>4} {'nodes':>5} {'measured':>10} {'predicted':>10} {'error%':>7} "
        f"{'allreduce% meas':>15} {'pred':>6}  run",
    ]
    for _, r in table.iterrows():
        lines.append(
            f"{r['label']:<16} {int(r['gpus']):>4d} {int(r['nodes']):>5d} {r['measured']:>10,.1f} {r['predicted']:>10,.1f} "
            f"{r['error_pct']:>+7.1f} {r['allreduce_pct_measured']:>15.1f} {r['allreduce_pct_predicted']:>6.1f}  "
            f"{r['run_id']}"
        )
    if len(table):
        lines.append("# " + P.summary_line(table, goal_pct=goal_pct))
    else:
        lines.append("# no held-out run of this configuration was found")
    lines += [f"# skipped {s}" for s in skipped]
    return "\n".join(lines)


def cmd_predict(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from benchmarks import rundir
    from benchmarks.config import compose

    overrides = [*args.overrides, *([f"system={args.system}"] if args.system else [])]
    if not args.from_runs:
        raise ConfigError(
            "predict needs a measured run for the compute: --from RUN_DIR (a 1-GPU run of the same model, "
            "per-GPU batch and precision: ddlbench run ... system.ranks_per_node=1)"
        )
    if not args.compute_scale > 0:
        raise ConfigError(f"--compute-scale {args.compute_scale}: give a factor > 0 (1 = the calibration GPU's speed)")
    gpus = parse_gpus(args.gpus)
    if args.fit_to_reference and not args.reference:
        raise ConfigError("--fit-to-reference needs --reference STUDY (the rows to fit to): add --reference aach2023")
    cfg = compose(overrides)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    system, model, framework = resolved["system"], resolved["model"], resolved["framework"]
    cell = {
        "model": rundir.model_name_of(model),
        "per_gpu_batch": int(resolved["run"]["per_gpu_batch"]),
        "precision": resolved["precision"]["name"],
        "loader": loader_case(resolved["loader"]),
        "sharding": sharding_of(framework),
    }
    gpus_per_node = max(1, int(system.get("gpus_per_node") or system.get("ranks_per_node") or 1))
    network = P.network_from_profile(system)
    if args.commbench:
        network = P.network_from_commbench(_commbench(args.commbench), gpus_per_node=gpus_per_node, fallback=network)
    if network is None and (not args.validate or args.reference):
        network_or_fail(network)
    P.check_framework(framework)
    bench = (
        LoaderBench(args.loader_capacity, cell, image_size=int(model.get("image_size") or 224))
        if args.loader_capacity
        else None
    )
    calibration = Calibration(args.from_runs, cell=cell, scale=args.compute_scale, loader_modelled=bench is not None)
    plan = _plan(
        model,
        framework,
        image_size=int(model.get("image_size") or 224),
        amp_dtype=resolved["precision"].get("amp_dtype"),
        cache={},
    )
    parts = calibration.for_world(1)
    if bench is not None:
        parts = parts.with_loader(**bench.loader(cell["loader"], resolved["loader"]))
    # the study's rows of this model and loader, or the one-line refusal, before any output
    reference = _reference_rows(cell, resolved["loader"]["name"], args.reference) if args.reference else None
    print(
        f"# ddlbench predict: {framework['name']} {cell['model']} batch {cell['per_gpu_batch']}/GPU "
        f"{cell['precision']}, system={system['name']} ({gpus_per_node} GPUs per node)",
    )
    print(
        f"# compute from {parts.source}: fwd {1e3 * parts.fwd_s:.2f} ms, bwd {1e3 * parts.bwd_s:.2f} ms, "
        f"opt {1e3 * parts.opt_s:.2f} ms, other {1e3 * parts.other_s:.2f} ms, jitter {1e3 * parts.jitter_s:.2f} ms"
    )
    print("# " + data_path_line(parts, gpus_per_node=gpus_per_node))
    print(
        f"# {len(plan)} message(s) per step: {sum(m.bytes for m in plan) / 1e6:.1f} MB "
        f"({', '.join(sorted({m.op for m in plan}))})"
    )
    outputs: dict[str, pd.DataFrame] = {}
    if network is None:  # --validate alone: each held-out run's own commbench files are its network
        print("# no network given (--commbench or the system's): only the held-out runs are predicted")
    else:
        outputs.update(_prediction(args, parts, plan, network, gpus, reference=reference))
    if args.validate:
        points, skipped = validation_points(
            Path(args.validate), calibration, cell=cell, gpus_per_node=gpus_per_node, fallback=network, bench=bench
        )
        validated = P.validation_table(points)
        print(format_validation(validated, skipped, goal_pct=args.goal_pct))
        outputs["validation"] = validated
    if args.out:
        what = {
            **cell,
            "framework": framework["name"],
            "loader": resolved["loader"]["name"],
            "system": system["name"],
            "calibration": parts.source,
            "fitted_to": args.reference if args.fit_to_reference else "",
        }
        _save(Path(args.out), outputs, what=what, formats=("png", "svg"))
    return 0


def _prediction(args, parts, plan, network, gpus, *, reference) -> dict[str, pd.DataFrame]:
    """The prediction table at the GPU counts; with --reference the study's rows beside it (and with
    --fit-to-reference the prediction fitted to them)."""
    calibrated_at = None
    if reference is not None:
        gpus = sorted(set(gpus) | set(int(g) for g in reference["gpus"]))
        if args.fit_to_reference:
            parts, calibrated_at = P.calibrate_to_reference(parts, plan, network, reference)
            print(
                f"# fitted to the study {args.reference}: {parts.source} (data {1e3 * parts.data_s:.2f} ms, other "
                f"{1e3 * parts.other_s:.2f} ms, jitter {1e3 * parts.jitter_s:.2f} ms); no independent check there"
            )
    for level, name in ((network.intra, "intra-node"), (network.inter, "inter-node")):
        if level is not None:
            print(f"# {name}: {level.describe()}")
    table = P.predict(parts, plan, network, gpus)
    if calibrated_at is not None:
        print(f"# prediction fitted to the study {args.reference} at {calibrated_at} GPUs")
    print(format_prediction(table, unit=parts.sample_unit, simulated=bool(parts.loader_intervals_s)))
    outputs = {"prediction": table}
    if reference is not None:
        compared = P.compare_reference(table, reference, calibrated_at=calibrated_at)
        print(format_reference(compared, args.reference, fitted=calibrated_at is not None))
        outputs["reference"] = compared
    return outputs


def data_path_line(parts: P.Parts, *, gpus_per_node: int) -> str:
    """Where the data time comes from: the loader's capacity per rank and node, its source, its spread."""
    if math.isinf(parts.loader_img_s):
        return (
            f"data: loader={parts.loader or '?'} {1e3 * parts.data_s:.2f} ms per step at every GPU count "
            f"({parts.data_source or parts.source})"
        )
    node = f"{gpus_per_node * parts.loader_img_s:,.0f} per node of {gpus_per_node} ({parts.data_source})"
    if parts.loader_intervals_s:  # loaderbench: its rate, and its spread from the intervals between batches
        intervals = pd.Series(parts.loader_intervals_s)
        return (
            f"data: loader={parts.loader} delivers {parts.loader_img_s:,.0f} img/s per rank, {node}; a batch "
            f"every {1e3 * intervals.mean():.2f} ms ({len(intervals)} measured), {parts.loader_makers} made at "
            f"once in {1e3 * parts.maker_batch_s().mean():.1f} ms (spread {1e3 * parts.maker_batch_s().std():.1f} "
            f"ms), {parts.loader_queue} batches ahead"
        )
    # a run's loader delivered a batch per mean step at least (a lower bound)
    return (
        f"data: loader={parts.loader} delivers at least {parts.loader_img_s:,.0f} img/s per rank, {node}; "
        f"data-time spread {1e3 * parts.data_jitter_s:.2f} ms per rank ({parts.source})"
    )


class LoaderBench:
    """`ddlbench loaderbench`'s JSON (--loader-capacity): one rank's loader alone on the machine predicted, checked
    against the configuration predicted (its loader case, per-GPU batch and image size)."""

    def __init__(self, path: str, cell: dict[str, Any], *, image_size: int) -> None:
        self.path = path
        file = Path(path)
        if not file.is_file():
            raise ConfigError(
                f"--loader-capacity {path}: no such file; give the loaderbench.json of 'ddlbench loaderbench --out DIR'"
            )
        try:
            bench = json.loads(file.read_text())
            self.measurements = pd.DataFrame(bench["measurements"])
        except (ValueError, KeyError, TypeError):
            raise ConfigError(
                f"--loader-capacity {path}: not a loaderbench.json (no 'measurements'); give the file 'ddlbench "
                "loaderbench --out DIR' writes"
            ) from None
        if cell["loader"] == "synthetic":
            raise ConfigError(
                f"--loader-capacity {path}: loader=synthetic reads nothing; predict another loader, or drop the option"
            )
        for key, asked in (("per_gpu_batch", cell["per_gpu_batch"]), ("image_size", image_size)):
            if bench.get(key) != asked:
                timed = (
                    f"timed {key} {bench[key]}" if key in bench else f"records no {key} (loaderbench before 2026-12-04)"
                )
                override = "run.per_gpu_batch" if key == "per_gpu_batch" else "model.image_size"
                raise ConfigError(
                    f"--loader-capacity {path}: the file {timed}, the prediction's is {asked}; run 'ddlbench "
                    f"loaderbench {override}={asked} ...' on the machine predicted"
                )

    def loader(self, case: str, loader: dict[str, Any]) -> dict[str, Any]:
        """Parts.with_loader's arguments for this loader at its own worker (or thread) count: its img/s, the
        seconds between its batches, the batches it makes at once and prepares ahead."""
        workers = worker_count(loader)
        row = P.loader_capacity(self.measurements, case=case, workers=workers, source=self.path)
        intervals = row.get("batch_intervals_s")
        if not isinstance(intervals, list) or not intervals:
            raise ConfigError(
                f"--loader-capacity {self.path}: its {case} row has no batch intervals, so the loader's spread is "
                "unknown; run 'ddlbench loaderbench' again (it records them since 2026-12-04)"
            )
        return {
            "loader": case,
            "img_s": float(row["img_s"]),
            "intervals_s": intervals,
            "makers": batch_makers(loader, workers=workers),
            "queue": queue_depth(loader, workers=workers),
            "source": f"--loader-capacity {self.path}",
        }


def network_or_fail(network: P.Network | None) -> P.Network:
    if network is None:
        raise ConfigError(
            "no network to predict with: the system profile has no `network` block and no --commbench was given; "
            "pass --commbench FILE (ddlbench commbench output) or system=juwels_booster"
        )
    return network


def _save(out: Path, outputs: dict[str, pd.DataFrame], *, what: dict[str, Any], formats: Sequence[str]) -> None:
    """The tables (CSV), their figures, and cell.json: the configuration predicted, the calibration run
    and the reference it was fitted to ('' for none), so that `ddlbench paper` can draw it as predicted."""
    from analysis.predict_figures import predicted_breakdown, predicted_vs_measured, predicted_vs_reference

    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out}: the folder is not empty (never overwritten); give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / "cell.json").write_text(json.dumps(what, indent=1, default=str) + "\n")
    for name, table in outputs.items():
        table.to_csv(out / f"{name}.csv", index=False)
    figures = {}
    if "prediction" in outputs:
        figures["predict_breakdown"] = predicted_breakdown(outputs["prediction"])
    if "reference" in outputs:
        figures["predict_vs_reference"] = predicted_vs_reference(outputs["reference"])
    if "validation" in outputs and len(outputs["validation"]):
        figures["predict_validation"] = predicted_vs_measured(outputs["validation"])
    for name, figure in figures.items():
        for fmt in formats:
            figure.savefig(out / f"{name}.{fmt}", dpi=150 if fmt == "png" else None)
    print(f"[ddlbench] predict: {len(outputs)} table(s) and {len(figures)} figure(s) -> {out}", file=sys.stderr)
