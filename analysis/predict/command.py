"""`ddlbench predict`: gather the measured parts, run the model (model.py, simulation.py), print and save.

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

import pandas as pd

from analysis.device import RankWords, rank_words
from analysis.predict.calibration import Calibration, LoaderBench, load_folders
from analysis.predict.cell import (
    compute_settings,
    config_of,
    device_words,
    loader_case,
    measured_cell,
    ranks_words,
    sharding_of,
    unmeasured,
)
from analysis.predict.from_run import settings_from_run
from analysis.predict.interval import note as interval_note
from analysis.predict.interval import relative_halfwidth
from analysis.predict.model import Message, check_framework, messages, units_from_groups
from analysis.predict.network import Network, network_from_commbench, network_from_profile
from analysis.predict.simulation import Point, calibrate_to_reference, compare_reference, predict, validation_table
from analysis.predict.text import data_path_line, format_prediction, format_reference, format_validation
from benchmarks.errors import ConfigError


def parse_gpus(text: str) -> list[int]:
    try:
        gpus = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--gpus {text}: give GPU counts separated by commas, e.g. --gpus 4,8,16") from None
    if not gpus or min(gpus) < 1:
        raise ConfigError(f"--gpus {text}: every GPU count must be >= 1, e.g. --gpus 4,8,16")
    return sorted(set(gpus))


def _commbench(paths: Sequence[str]) -> pd.DataFrame:
    frames = []
    for campaign, text in zip(load_folders(paths, what="--commbench"), paths):
        frame = campaign.commbench
        if Path(text).is_file():
            frame = frame[frame["source"] == Path(text).name]
        if frame.empty:
            raise ConfigError(f"--commbench {text}: no commbench measurements there (commbench*.json)")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


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
) -> list[Message]:
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
        units = units_from_groups(
            gathered, owner, -1, gather_scale=1.0 if config.fp32_weights(amp=amp) else 0.5, reduce_scale=0.0
        )
        persistent = float(sum(g.bytes for g in layout.gradients if config.zero3_persists(g.bytes // 4)))
    if framework["name"] == "fsdp":
        units = units_from_groups(
            layout.gradients,
            *_shard_owners(model, str(config.shard_unit), cache=cache),
            gather_scale=0.5 if config.gathers_half(amp=amp) else 1.0,
            reduce_scale=0.5 if config.reduces_half(amp=amp) else 1.0,
        )
    return messages(
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
    from benchmarks import flops
    from benchmarks.frameworks.configs import ShardUnit
    from benchmarks.frameworks.fsdp import shard_groups

    key = json.dumps(["fsdp", model, shard_unit], sort_keys=True, default=str)
    if key not in cache:
        built = flops.meta_model(model)
        names = {id(p): name for name, p in built.named_parameters()}
        groups = shard_groups(built, ShardUnit(shard_unit))
        owner: dict[str, int] = {}
        for index, group in enumerate(groups):
            for parameter in group.parameters():
                owner.setdefault(names[id(parameter)], index)
        cache[key] = (owner, len(groups) - 1)
    return cache[key]


def _network_for(folder: Path, root: Path, *, gpus_per_node: int, fallback: Network | None, cache: dict):
    """The network of a held-out run: commbench files in its folder or the nearest one above it (up to root)."""
    from analysis.load import load_campaign

    here = folder
    while True:
        files = sorted(p for p in here.glob("commbench*.json") if p.is_file())
        if files:
            if here not in cache:
                frame = load_campaign(here).commbench
                frame = frame[frame["source"].isin([p.name for p in files])]
                cache[here] = network_from_commbench(frame, gpus_per_node=gpus_per_node, fallback=fallback)
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
    fallback: Network | None,
    bench: LoaderBench | None = None,
) -> tuple[list[Point], list[str]]:
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
                config_of(flat, "model"),
                _with_defaults(config_of(flat, "framework"), defaults),
                image_size=int(flat.get("config.model.image_size") or 224),
                amp_dtype=config_of(flat, "precision").get("amp_dtype"),
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
                loader = {"name": flat.get("loader"), **config_of(flat, "loader")}
                parts = parts.with_loader(**bench.loader(cell["loader"], loader))
        except ConfigError as error:
            skipped.append(f"{run_id}: {error}")
            continue
        share = shares["allreduce_exposed_share"].get(run_id, math.nan) if run_id in shares.index else math.nan
        points.append(
            Point(
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


def cmd_predict(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from benchmarks.config import compose
    from benchmarks.rundir import cell_identity

    overrides = [*args.overrides, *([f"system={args.system}"] if args.system else [])]
    if not args.from_runs:
        raise ConfigError(
            "predict needs a measured run for the compute: --from RUN_DIR (a 1-GPU run of the same model, "
            "per-GPU batch and precision: ddlbench run ... system.ranks_per_node=1)"
        )
    if args.compute_scale is not None and not args.compute_scale > 0:
        raise ConfigError(f"--compute-scale {args.compute_scale}: give a factor > 0 (1 = the calibration GPU's speed)")
    if args.compute_scale is not None and args.compute_from:
        raise ConfigError(
            "--compute-scale and --compute-from: give one (a factor on the calibration's compute, or a run that "
            "measured it on the system predicted)"
        )
    gpus = parse_gpus(args.gpus)
    if args.fit_to_reference and not args.reference:
        raise ConfigError("--fit-to-reference needs --reference STUDY (the rows to fit to): add --reference aach2023")
    # the model, its image size, the precision and the batch the calibration ran, unless given (one line says so)
    taken, taken_line = settings_from_run(args.from_runs[0], overrides)
    cfg = compose([*taken, *overrides])
    resolved = OmegaConf.to_container(cfg, resolve=True)
    system, model, framework = resolved["system"], resolved["model"], resolved["framework"]
    cell = {
        "model": cell_identity.model_name_of(model),
        "per_gpu_batch": int(resolved["run"]["per_gpu_batch"]),
        "precision": resolved["precision"]["name"],
        "loader": loader_case(resolved["loader"]),
        "sharding": sharding_of(framework),
        "settings": compute_settings(resolved),
    }
    target = {"name": system["name"], "device": str(system.get("device") or "cpu")}
    words = rank_words(target["device"])  # the target's ranks: GPUs, or CPU ranks (analysis.device)
    gpus_per_node = max(1, int(system.get("gpus_per_node") or system.get("ranks_per_node") or 1))
    network = network_from_profile(system)
    if args.commbench:
        network = network_from_commbench(_commbench(args.commbench), gpus_per_node=gpus_per_node, fallback=network)
    if network is None and (not args.validate or args.reference):
        network_or_fail(network)
    check_framework(framework)
    bench = (
        LoaderBench(args.loader_capacity, cell, image_size=int(model.get("image_size") or 224))
        if args.loader_capacity
        else None
    )
    elsewhere = None  # --compute-from: the run that measured the compute on the system predicted
    if args.compute_from:
        elsewhere = Calibration(
            [args.compute_from], cell=cell, scale=None, loader_modelled=True, system=target, what="--compute-from"
        )
    calibration = Calibration(
        args.from_runs,
        cell=cell,
        scale=args.compute_scale,
        loader_modelled=bench is not None,
        system=target,
        compute=elsewhere.for_world(1) if elsewhere else None,
    )
    ran = calibration.system_for(1)
    label = compute_label(ran, scale=args.compute_scale, elsewhere=elsewhere.system_for(1) if elsewhere else None)
    per = words.per
    title = (
        f"system={system['name']}, {framework['name']} {cell['model']} {cell['precision']}, batch "
        f"{cell['per_gpu_batch']}/{per}, {size_words(model)}; "
        + (label or f"calibration {ran['run']} (system={ran['name']})")
    )
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
    if taken_line:
        print(taken_line)
    print(
        f"# ddlbench predict: {framework['name']} {cell['model']} batch {cell['per_gpu_batch']}/{per} "
        f"{size_words(model)} {cell['precision']}, system={system['name']} ({words.count(gpus_per_node)} per node)",
    )
    print(
        f"# compute from {compute_source(ran, scale=args.compute_scale, elsewhere=elsewhere)}: fwd "
        f"{1e3 * parts.fwd_s:.2f} ms, bwd {1e3 * parts.bwd_s:.2f} ms, opt {1e3 * parts.opt_s:.2f} ms, other "
        f"{1e3 * parts.other_s:.2f} ms, jitter {1e3 * parts.jitter_s:.2f} ms"
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
        outputs.update(_prediction(args, parts, plan, network, gpus, reference=reference, label=label, words=words))
    if args.validate:
        points, skipped = validation_points(
            Path(args.validate), calibration, cell=cell, gpus_per_node=gpus_per_node, fallback=network, bench=bench
        )
        validated = validation_table(points)
        print(format_validation(validated, skipped, goal_pct=args.goal_pct, words=words))
        _note(label)
        outputs["validation"] = validated
    if args.out:
        what = {
            **cell,
            "framework": framework["name"],
            "loader": resolved["loader"]["name"],
            "system": system["name"],
            "calibration": parts.source,
            "calibration_system": ran["name"],
            "calibration_device": device_words(ran),
            "image_size": int(model.get("image_size") or 224),
            "seq_len": int(model.get("seq_len") or 0),
            "compute_scale": args.compute_scale,
            "compute": label,
            "title": title,
            "fitted_to": args.reference if args.fit_to_reference else "",
        }
        _save(Path(args.out), outputs, what=what, formats=("png", "svg"), words=words)
    return 0


def size_words(model: dict[str, Any]) -> str:
    """What one sample is as big as: '224 px' for an image model, 'seq 384' for one of token sequences."""
    from benchmarks.models.configs import TaskKind, task_of

    if task_of(str(model["arch"])) is TaskKind.question_answering:
        return f"seq {model.get('seq_len')}"
    return f"{model.get('image_size')} px"


def compute_label(ran: dict[str, Any], *, scale: float | None, elsewhere: dict[str, Any] | None) -> str:
    """The line that every table, figure and cell.json carries where the compute was not measured on the system
    predicted by the calibration run itself: scaled (--compute-scale) or another run's (--compute-from); else ''."""
    if elsewhere is not None:
        return (
            f"compute from {elsewhere['run']} on system={elsewhere['name']} (--compute-from), the data path from "
            f"{ran['run']} (system={ran['name']})"
        )
    if scale is not None:
        return (
            f"compute from a calibration on {device_words(ran)} ({ran['run']}, system={ran['name']}), scaled x{scale:g}"
        )
    return ""


def compute_source(ran: dict[str, Any], *, scale: float | None, elsewhere: Calibration | None) -> str:
    """The header's word on the compute: which run, on what ranks and system, scaled or from --compute-from."""
    if elsewhere is not None:
        there = elsewhere.system_for(1)
        return (
            f"{there['run']} on system={there['name']} ({ranks_words(there)}, --compute-from); data path from "
            f"{ran['run']} ({ranks_words(ran)}, system={ran['name']})"
        )
    return f"{ran['run']} ({ranks_words(ran)}, system={ran['name']})" + (f", scaled x{scale:g}" if scale else "")


def _prediction(args, parts, plan, network, gpus, *, reference, label, words) -> dict[str, pd.DataFrame]:
    """The prediction table at the GPU counts; with --reference the study's rows beside it (and with
    --fit-to-reference the prediction fitted to them)."""
    calibrated_at = None
    if reference is not None:
        gpus = sorted(set(gpus) | set(int(g) for g in reference["gpus"]))
        if args.fit_to_reference:
            parts, calibrated_at = calibrate_to_reference(parts, plan, network, reference)
            print(
                f"# fitted to the study {args.reference}: {parts.source} (data {1e3 * parts.data_s:.2f} ms, other "
                f"{1e3 * parts.other_s:.2f} ms, jitter {1e3 * parts.jitter_s:.2f} ms); no independent check there"
            )
    for level, name in ((network.intra, "intra-node"), (network.inter, "inter-node")):
        if level is not None:
            print(f"# {name}: {level.describe()}")
    table = predict(parts, plan, network, gpus)
    if calibrated_at is not None:
        print(f"# prediction fitted to the study {args.reference} at {calibrated_at} GPUs")
    halfwidth = relative_halfwidth(parts)
    table = table.assign(throughput_pm=halfwidth * table["throughput"])  # prediction.csv keeps the interval too
    print(
        format_prediction(
            table,
            unit=parts.sample_unit,
            simulated=bool(parts.loader_intervals_s),
            words=words,
            halfwidth=halfwidth,
            interval_note=interval_note(parts, halfwidth),
        )
    )
    _note(label)
    outputs = {"prediction": table}
    if reference is not None:
        compared = compare_reference(table, reference, calibrated_at=calibrated_at)
        print(format_reference(compared, args.reference, fitted=calibrated_at is not None))
        _note(label)
        outputs["reference"] = compared
    return outputs


def network_or_fail(network: Network | None) -> Network:
    if network is None:
        raise ConfigError(
            "no network to predict with: the system profile has no `network` block and no --commbench was given; "
            "pass --commbench FILE (ddlbench commbench output) or system=juwels_booster"
        )
    return network


def _note(label: str) -> None:
    """The compute's label under a table, where it has one (compute_label)."""
    if label:
        print(f"# {label}")


def _save(
    out: Path, outputs: dict[str, pd.DataFrame], *, what: dict[str, Any], formats: Sequence[str], words: RankWords
) -> None:
    """The tables (CSV), their figures, and cell.json: the configuration predicted, the calibration run
    and the reference it was fitted to ('' for none), so that `ddlbench paper` can draw it as predicted; every
    figure carries its title (system, model, batch, image size, calibration run and the compute's label)."""
    from analysis.predict.figures import predicted_breakdown, predicted_vs_measured, predicted_vs_reference

    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out}: the folder is not empty (never overwritten); give a new folder")
    out.mkdir(parents=True, exist_ok=True)
    (out / "cell.json").write_text(json.dumps(what, indent=1, default=str) + "\n")
    about = what["title"]
    for name, table in outputs.items():
        table.to_csv(out / f"{name}.csv", index=False)
    figures = {}
    if "prediction" in outputs:
        figures["predict_breakdown"] = predicted_breakdown(outputs["prediction"], about=about, words=words)
    if "reference" in outputs:
        figures["predict_vs_reference"] = predicted_vs_reference(outputs["reference"], about=about, words=words)
    if "validation" in outputs and len(outputs["validation"]):
        figures["predict_validation"] = predicted_vs_measured(outputs["validation"], about=about, words=words)
    for name, figure in figures.items():
        for fmt in formats:
            figure.savefig(out / f"{name}.{fmt}", dpi=150 if fmt == "png" else None)
    print(f"[ddlbench] predict: {len(outputs)} table(s) and {len(figures)} figure(s) -> {out}", file=sys.stderr)
