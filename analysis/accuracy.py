"""Validation accuracy, time to accuracy and the learning-rate study: per run and per cell, the curves, the
study's figures (colour = schedule, panels per global batch) and the report's accuracy section.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

from analysis.cells import CARRIED, CELL, carried_columns, cell_key, setting_text
from analysis.figures import VARIANT_MARKERS, finish, legend_columns, panels, paper_style, pretty
from analysis.palette import schedule_color
from analysis.report_blocks import Block, Report, add_figure, columns_shown

if TYPE_CHECKING:
    from analysis.campaign_analysis import CampaignAnalysis


# the setting a learning-rate study varies besides the global batch (docs/optim.md)
SCHEDULE_SETTING = "config.optim.schedule.name"
STUDY = ["schedule", "global_batch"]
ACCURACY = ["top1_pct", "top5_pct", "val_loss", "epochs", "evaluations", "eval_s"]


def study_runs(per_run: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """per_run (run_throughput) with what a learning-rate study varies: `schedule` (optim.schedule.name;
    '' where config.yaml has none) and `global_batch` (per_gpu_batch x world_size where the summary
    lacks it)."""
    out = per_run.copy()
    names = (
        runs.set_index(runs["run_id"].astype(str))[SCHEDULE_SETTING]
        if SCHEDULE_SETTING in runs
        else pd.Series(dtype="object")
    )
    out["schedule"] = setting_text(out["run_id"].astype(str).map(names))
    batch = pd.to_numeric(out["per_gpu_batch"], errors="coerce") * pd.to_numeric(out["world_size"], errors="coerce")
    given = pd.to_numeric(out["global_batch"], errors="coerce") if "global_batch" in out else batch
    out["global_batch"] = given.fillna(batch).astype("Int64")
    return out


def accuracy_runs(evals: pd.DataFrame) -> pd.DataFrame:
    """Per run with evaluations (eval.jsonl): the last evaluation's top-1 / top-5 (%), loss and epochs
    done (NaN where the file predates the field), how many evaluations it made and their seconds in all
    (not in any training step)."""
    if evals.empty:
        return pd.DataFrame(columns=["run_id", *ACCURACY])
    ordered = evals.sort_values(["run_id", "step"])
    last = ordered.groupby("run_id", observed=True).last()
    out = pd.DataFrame(
        {
            "run_id": last.index.astype(str),
            "top1_pct": 100 * last["top1"].to_numpy(),
            "top5_pct": 100 * last["top5"].to_numpy(),
            "val_loss": last["loss"].to_numpy(),
            "epochs": last.reindex(columns=["epochs"])["epochs"].astype("float64").to_numpy(),
        }
    )
    counts = ordered.groupby("run_id", observed=True).agg(evaluations=("step", "size"), eval_s=("eval_s", "sum"))
    counts.index = counts.index.astype(str)
    return out.merge(counts, left_on="run_id", right_index=True).reset_index(drop=True)


def accuracy_cells(per_run_accuracy: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """accuracy_runs() per cell (mean over repeats), with num_repeats (its runs with evaluations) and,
    where per_run has them (study_runs), the schedule and the global batch."""
    by = cell_key(per_run)
    merged = per_run_accuracy.merge(per_run[["run_id", *by]], on="run_id")
    stats = merged.groupby(by, dropna=False, observed=True).agg(
        num_repeats=("run_id", "size"), **{c: (c, "mean") for c in ACCURACY}
    )
    out = carried_columns(per_run, by, extra=("schedule",)).merge(stats.reset_index(), on=by)
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


# what a run's classes are read from: the data set's count (meta.json, since model.num_classes=auto), else the head's
CLASSES_SETTINGS = ("meta.num_classes.data", "config.model.num_classes")


def chance_pct(cells: pd.DataFrame, runs: pd.DataFrame) -> pd.Series:
    """Per row of a per-cell table (accuracy_cells): chance top-1, 100 / the classes, in %: the top-1 of a
    guess, what an untrained or broken model scores. The classes are the data set's where meta.json
    counted them, else model.num_classes; NaN where neither is known or the table has no cell_hash."""
    if "cell_hash" not in cells or "cell_hash" not in runs:
        return pd.Series(np.nan, index=cells.index, dtype="float64")
    known = runs.reindex(columns=list(CLASSES_SETTINGS)).apply(pd.to_numeric, errors="coerce")
    classes = known[CLASSES_SETTINGS[0]].fillna(known[CLASSES_SETTINGS[1]]).where(lambda n: n >= 1)
    per_cell = classes.groupby(runs["cell_hash"].astype(str)).first()
    return (100.0 / cells["cell_hash"].astype(str).map(per_cell)).astype("float64")


def accuracy_curves(evals: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """Validation top-1 over training, per cell and evaluation point (the optimizer steps done: repeats
    evaluate at the same steps): top1_pct, the mean over the repeats that evaluated there, with their
    min and max (top1_pct_min, _max), the epochs done (NaN in eval.jsonl files that predate the field),
    num_repeats, and the cell's columns (schedule and global batch with study_runs' per_run)."""
    by = cell_key(per_run)
    columns = [*by, "step", "epochs", "top1_pct", "top1_pct_min", "top1_pct_max", "num_repeats"]
    if evals.empty:
        return pd.DataFrame(columns=columns)
    points = evals.reindex(columns=["run_id", "step", "epochs", "top1"]).assign(
        run_id=lambda d: d["run_id"].astype(str), epochs=lambda d: d["epochs"].astype("float64")
    )
    merged = points.merge(per_run[["run_id", *by]], on="run_id")
    stats = (
        merged.groupby([*by, "step"], dropna=False, observed=True)
        .agg(
            epochs=("epochs", "mean"),
            top1_pct=("top1", "mean"),
            top1_pct_min=("top1", "min"),
            top1_pct_max=("top1", "max"),
            num_repeats=("run_id", "nunique"),
        )
        .reset_index()
    )
    for column in ("top1_pct", "top1_pct_min", "top1_pct_max"):
        stats[column] *= 100
    out = carried_columns(per_run, by, extra=("schedule",)).merge(stats, on=by)
    return out.sort_values([c for c in [*CELL, "variant", "step"] if c in out]).reset_index(drop=True)


TRAINING_POINTS = 400  # points per cell in the loss and lr curves: more steps are binned


def training_curves(steps: pd.DataFrame, per_run: pd.DataFrame, *, max_points: int = TRAINING_POINTS) -> pd.DataFrame:
    """The training loss and the learning rate against the optimizer step, per cell, from the rank logs:
    every logged step (warm-up included: the schedule starts there), per step the mean loss over the ranks
    and the lr (the same on every rank), then the mean over repeats. A cell of more than max_points
    steps is binned into max_points runs of consecutive steps (their mean step, loss and lr), so a
    figure of 100k-step runs stays light. Only the runs of per_run; empty when no step has a loss or lr."""
    by = cell_key(per_run)
    columns = [*by, "step", "loss", "lr"]
    if steps.empty or steps.reindex(columns=["loss", "lr"]).isna().all().all():
        return pd.DataFrame(columns=columns)
    rows = steps.reindex(columns=["run_id", "step", "loss", "lr"])
    rows = rows[rows[["loss", "lr"]].notna().any(axis=1)]
    per_step = rows.groupby(["run_id", "step"], observed=True)[["loss", "lr"]].mean().reset_index()
    per_step["run_id"] = per_step["run_id"].astype(str)
    merged = per_step.merge(per_run[["run_id", *by]], on="run_id")
    per_cell = merged.groupby([*by, "step"], dropna=False, observed=True)[["loss", "lr"]].mean().reset_index()
    grouped = per_cell.groupby(by, dropna=False, observed=True)
    width = np.ceil(grouped["step"].transform("size") / max(1, max_points)).astype("int64")
    per_cell["bin"] = grouped.cumcount() // width
    binned = per_cell.groupby([*by, "bin"], dropna=False, observed=True)[["step", "loss", "lr"]].mean().reset_index()
    out = carried_columns(per_run, by, extra=("schedule",)).merge(binned.drop(columns="bin"), on=by)
    return out.sort_values([c for c in [*CELL, "variant", "step"] if c in out]).reset_index(drop=True)


TARGET = [
    "target_top1_pct",
    "num_reached",
    "num_repeats",
    "time_to_target_s",
    "samples_to_target",
    "steps_to_target",
    "startup_s",
    "time_to_train_s",
]


def time_to_accuracy(runs: pd.DataFrame, per_run: pd.DataFrame) -> pd.DataFrame:
    """Per cell whose runs had a target (run.target_top1; summary.json's summary_schema.TARGET_FIELDS): the
    target in %, num_reached of num_repeats, and over the repeats that reached it the mean
    time_to_target_s (seconds since the first training step, evaluations included: MLPerf's clock),
    samples_to_target and steps_to_target (NaN where none did); startup_s (process start to the first training
    step, staging included) and time_to_train_s = startup_s + time_to_target_s, as MLPerf HPC counts it (NaN
    where the summary has no startup_s). Only the runs of per_run."""
    by = cell_key(per_run)
    columns = [*by, *[c for c in CARRIED if c not in by], "schedule", *TARGET]
    if "target_top1" not in runs:
        return pd.DataFrame(columns=columns)
    fields = runs.reindex(
        columns=[
            "run_id",
            "target_top1",
            "target_reached",
            "time_to_target_s",
            "samples_to_target",
            "steps_to_target",
            "startup_s",
        ]
    )
    fields["time_to_train_s"] = pd.to_numeric(fields["startup_s"], errors="coerce") + pd.to_numeric(
        fields["time_to_target_s"], errors="coerce"
    )
    fields = fields[pd.to_numeric(fields["target_top1"], errors="coerce").notna()].assign(
        run_id=lambda d: d["run_id"].astype(str)
    )
    if fields.empty:
        return pd.DataFrame(columns=columns)
    reached = fields["time_to_target_s"].notna() | fields["target_reached"].astype("boolean").fillna(False).astype(bool)
    fields = fields.assign(
        reached=reached,
        target_top1_pct=100 * fields["target_top1"].astype("float64"),
        **{c: pd.to_numeric(fields[c], errors="coerce").astype("float64") for c in TARGET[3:]},
    )
    merged = fields.merge(per_run[["run_id", *by]], on="run_id")
    stats = merged.groupby(by, dropna=False, observed=True).agg(
        target_top1_pct=("target_top1_pct", "first"),
        num_reached=("reached", "sum"),
        num_repeats=("run_id", "size"),
        **{c: (c, "mean") for c in TARGET[3:]},
    )
    out = carried_columns(per_run, by, extra=("schedule",)).merge(stats.reset_index(), on=by)
    return out.sort_values([c for c in [*CELL, "variant"] if c in out]).reset_index(drop=True)


@paper_style
def accuracy_curves_figure(evals: pd.DataFrame) -> Figure:
    """Validation top-1 (%) against the optimizer step, one curve per run (columns: run_id, step, top1)."""
    fig, (ax,) = panels(1)
    cmap = matplotlib.colormaps["viridis"]
    runs = sorted(evals["run_id"].astype(str).unique())
    for k, run in enumerate(runs):
        rows = evals[evals["run_id"].astype(str) == run].sort_values("step")
        label = run.rsplit("/", 1)[-1]
        ax.plot(rows["step"], 100 * rows["top1"], marker=".", color=cmap(k / max(1, len(runs) - 1) * 0.85), label=label)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("validation top-1 (%)")
    ax.set_ylim(0, 100)
    return finish(fig, [ax], legend_cols=1)


_STUDY_SHOWN = ("framework", "loader", "model", "precision", "per_gpu_batch")  # named where they differ
_STUDY_LINES = ["-", "--", ":", "-."]
_SCHEDULE_PREFIX = "optim.schedule.name="


def _text_of(value: object) -> str:
    return "" if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)) else str(value)


def _study_key(frame: pd.DataFrame) -> pd.Series:
    """Each row's cell: cell_hash, or (tables without run keys) the columns that show a cell."""
    if "cell_hash" in frame:
        return frame["cell_hash"].astype(str)
    shown = [c for c in (*_STUDY_SHOWN, "world_size", "num_nodes", "schedule", "variant") if c in frame]
    return frame[shown].astype("string").fillna("").agg("/".join, axis=1)


def _study_lines(frame: pd.DataFrame, key: pd.Series) -> dict[str, tuple[str, str, str, str]]:
    """key -> (label, colour, line style, marker) of each line. Colour = schedule; the label is the
    schedule, then whatever else tells the line apart from the figure's others: framework, loader, model,
    precision and per-GPU batch where they differ, and the variant's other settings; lines of one schedule
    differ in line style and marker too."""
    firsts = frame.assign(_key=key.to_numpy()).groupby("_key", sort=False).first()
    varying = [c for c in _STUDY_SHOWN if c in firsts and firsts[c].astype("string").nunique() > 1]
    labels = {}
    for name, row in firsts.iterrows():
        schedule = _text_of(row.get("schedule")) or "no schedule"
        parts = [schedule, *(_study_part(c, row[c]) for c in varying)]
        rest = ", ".join(
            p for p in _text_of(row.get("variant")).split(", ") if p and not p.startswith(_SCHEDULE_PREFIX)
        )
        labels[name] = (schedule, ", ".join(parts) + (f" [{rest}]" if rest else ""))
    lines, seen = {}, {}
    for name, (schedule, label) in sorted(labels.items(), key=lambda item: item[1][1]):
        index = seen.setdefault(schedule, {}).setdefault(label, len(seen[schedule]))
        marker = VARIANT_MARKERS[index % len(VARIANT_MARKERS)]
        lines[name] = (label, schedule_color(schedule), _STUDY_LINES[index % len(_STUDY_LINES)], marker)
    return lines


def _study_part(column: str, value: object) -> str:
    if column == "per_gpu_batch":
        return f"b{_text_of(value)}"
    return pretty(value) if column in ("framework", "loader") else _text_of(value)


def _layout_labels(rows: pd.DataFrame, key: pd.Series, lines: dict) -> dict[str, str]:
    """The labels of one panel's lines; lines that would read alike (the same settings on another node
    layout) are told apart by their GPUs and nodes."""
    labels = {k: lines[k][0] for k in dict.fromkeys(key)}
    counts = pd.Series(labels).value_counts()
    firsts = rows.assign(_key=key.to_numpy()).groupby("_key", sort=False).first()
    for k, label in labels.items():
        if counts[label] > 1 and {"world_size", "num_nodes"} <= set(firsts.columns):
            gpus, nodes = int(firsts.loc[k, "world_size"]), int(firsts.loc[k, "num_nodes"])
            labels[k] = f"{label}, {gpus} GPUs on {nodes} node{'s' if nodes != 1 else ''}"
    return labels


def _batches(frame: pd.DataFrame) -> list:
    return sorted(frame["global_batch"].dropna().unique())


def _batch_label(value: float, _pos=None) -> str:
    """A global batch as a tick: 256, 512, 1k, ..., 64k (k = 1024)."""
    if value >= 1024 and value % 1024 == 0:
        return f"{value / 1024:g}k"
    return f"{value:g}"


@paper_style
def accuracy_by_schedule(curves: pd.DataFrame) -> Figure:
    """Validation top-1 (%) against the epochs done (the optimizer step where eval.jsonl files predate
    epochs), one panel per global batch, one line per cell (accuracy_curves): colour = schedule,
    labelled with whatever else tells the cell apart; a band: min-max over the repeats."""
    batches = _batches(curves)
    by_epochs = curves["epochs"].notna().all()
    x = "epochs" if by_epochs else "step"
    key = _study_key(curves)
    lines = _study_lines(curves, key)
    fig, axes = panels(len(batches), row_height_in=1.9, sharey=True)
    for ax, batch in zip(axes, batches):
        in_panel = (curves["global_batch"] == batch).to_numpy()
        rows_b, key_b = curves[in_panel], key[in_panel]
        labels = _layout_labels(rows_b, key_b, lines)
        for k in labels:
            rows = rows_b[(key_b == k).to_numpy()].sort_values("step")
            _, color, style, marker = lines[k]
            ax.plot(rows[x], rows["top1_pct"], style, marker=marker, color=color, label=labels[k])
            if (rows["num_repeats"] > 1).any():
                ax.fill_between(
                    rows[x], rows["top1_pct_min"], rows["top1_pct_max"], color=color, alpha=0.15, linewidth=0
                )
        ax.set_title(f"global batch {batch:,.0f}")
        ax.set_xlabel("epochs" if by_epochs else "optimizer step")
        ax.set_ylabel("validation top-1 (%)")
    return finish(fig, axes, legend_cols=legend_columns(axes))


@paper_style
def top1_vs_global_batch(cells: pd.DataFrame) -> Figure:
    """Final validation top-1 (%) against the global batch (log2 x), one line per schedule: a line is one
    configuration at every size (group_hash: the per-GPU batch held, the global batch growing with the
    GPUs), labelled with whatever else tells it apart; other node layouts of a batch are hollow markers."""
    frame = cells.dropna(subset=["global_batch", "top1_pct"])
    curve = frame["group_hash"].astype(str) if "group_hash" in frame else _study_key(frame)
    lines = _study_lines(frame, curve)
    fig, (ax,) = panels(1, row_height_in=2.4)
    for k, (label, color, style, marker) in lines.items():
        rows = frame[(curve == k).to_numpy()].sort_values(["global_batch", "num_nodes"])
        line = rows.drop_duplicates("global_batch")
        ax.plot(line["global_batch"], line["top1_pct"], style, marker=marker, color=color, label=label)
        extra = rows.drop(line.index)
        if not extra.empty:
            ax.plot(
                extra["global_batch"],
                extra["top1_pct"],
                linestyle="none",
                marker=marker,
                markerfacecolor="white",
                color=color,
                label="_other node layout",
            )
    ax.set_xscale("log", base=2)
    ax.set_xticks([float(b) for b in _batches(frame)])
    ax.xaxis.set_major_formatter(FuncFormatter(_batch_label))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("global batch")
    ax.set_ylabel("final validation top-1 (%)")
    return finish(fig, [ax], legend_cols=legend_columns([ax]))


@paper_style
def loss_and_lr(curves: pd.DataFrame) -> Figure:
    """Training loss (mean over ranks) and learning rate against the optimizer step, from the rank logs
    (training_curves): a row per global batch, a panel each, one line per cell coloured by
    schedule."""
    batches = _batches(curves)
    shown = [(c, t) for c, t in (("loss", "training loss"), ("lr", "learning rate")) if curves[c].notna().any()]
    key = _study_key(curves)
    lines = _study_lines(curves, key)
    fig, axes = panels(len(batches) * len(shown), ncols=len(shown), row_height_in=1.7)
    axes_left = iter(axes)
    for batch in batches:
        in_row = (curves["global_batch"] == batch).to_numpy()
        rows_b, key_b = curves[in_row], key[in_row]
        labels = _layout_labels(rows_b, key_b, lines)
        for column, title in shown:
            ax = next(axes_left)
            for k in labels:
                rows = rows_b[(key_b == k).to_numpy()].dropna(subset=[column])
                _, color, style, _marker = lines[k]
                ax.plot(rows["step"], rows[column], style, color=color, linewidth=1.0, label=labels[k])
            ax.set_title(f"{title}, global batch {batch:,.0f}")
            ax.set_xlabel("optimizer step")
            ax.set_ylabel(title)
    return finish(fig, axes, legend_cols=legend_columns(axes))


def accuracy_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Validation accuracy (runs with data.val_path or data.val_split): the last evaluation per cell with
    its schedule and global batch; time to accuracy where runs had run.target_top1; and the figures the
    runs have data for: top-1 over training (per schedule and global batch in a study, else per run),
    final top-1 against the global batch, training loss and lr against the step."""
    accuracy = analysis.accuracy()
    if accuracy.empty:
        return
    blocks.append(Block("heading", "Validation accuracy"))
    note = (
        "The last evaluation of each run on its held-out set (data.val_path, or the data.val_split share of "
        "data.path), every rank its shard, summed over ranks; mean over the num_repeats runs. schedule: "
        "optim.schedule.name; global_batch: per-GPU batch x GPUs; epochs: the training epochs done at "
        "that evaluation (empty for eval.jsonl files that predate it; a run that reached its run.target_top1 "
        "stopped there, so its last evaluation is that one). eval_s: the evaluations' seconds, in no "
        "training step (throughput leaves them out). chance_pct: the top-1 of a guess, 100 / the data "
        "set's classes (model.num_classes where the run did not count them): a top-1 near it has "
        "learned nothing yet."
    )
    accuracy = accuracy.assign(chance_pct=chance_pct(accuracy, analysis.counted()))
    columns = [*CELL, "variant", *STUDY, "num_repeats", *ACCURACY]
    columns.insert(columns.index("top1_pct") + 1, "chance_pct")
    if not accuracy["schedule"].astype(bool).any():
        columns.remove("schedule")  # runs from before schedules
    if accuracy["epochs"].isna().all():
        columns.remove("epochs")
    if accuracy["chance_pct"].isna().all():
        columns.remove("chance_pct")  # runs whose classes no file says
    blocks.append(Block("table", columns_shown(accuracy, columns).round(3), note=note, key=("top1_pct", "chance_pct")))
    target = analysis.time_to_accuracy()
    if not target.empty:
        blocks.append(Block("heading", "Time to accuracy (run.target_top1)", 3))
        shown = target.assign(
            reached=[f"{int(k)} of {int(n)}" for k, n in zip(target["num_reached"], target["num_repeats"])]
        )
        if shown["startup_s"].isna().all():  # summaries from before startup_s
            shown = shown.drop(columns=["startup_s", "time_to_train_s"])
        blocks.append(
            Block(
                "table",
                columns_shown(
                    shown,
                    [
                        *CELL,
                        "variant",
                        *STUDY,
                        "target_top1_pct",
                        "reached",
                        "startup_s",
                        "time_to_target_s",
                        "time_to_train_s",
                        "samples_to_target",
                        "steps_to_target",
                    ],
                ).round(1),
                note=(
                    "A run stops at the first evaluation whose top-1 reaches the target. reached: of the cell's "
                    "repeats, how many did; time_to_target_s (seconds since the first training step, evaluations "
                    "included: MLPerf's clock), samples_to_target (global training samples) and steps_to_target: "
                    "the mean over the repeats that reached it (empty where none did). startup_s: process start to the "
                    "first training step (imports, data staging, process group, builds), shown apart; "
                    "time_to_train_s = startup_s + time_to_target_s, as MLPerf HPC counts time to train."
                ),
                key=("time_to_target_s", "reached", "target_top1_pct"),
            )
        )
    curves = analysis.accuracy_curves()
    study = accuracy["schedule"].nunique() > 1 or accuracy["global_batch"].nunique() > 1
    over = "epochs" if curves["epochs"].notna().all() else "optimizer step"
    if study and curves["step"].nunique() > 1:
        add_figure(
            blocks,
            figures,
            "accuracy_by_schedule",
            lambda: accuracy_by_schedule(curves),
            f"Validation top-1 against the {over} (eval.jsonl), one panel per global batch, one line per cell "
            "coloured by schedule (mean over repeats; band: min-max).",
        )
    elif curves["step"].nunique() > 1:
        evals = analysis.evals()
        add_figure(
            blocks,
            figures,
            "accuracy_vs_step",
            lambda: accuracy_curves_figure(evals),
            "Validation top-1 against the optimizer step, one curve per run.",
        )
    if accuracy["global_batch"].nunique() > 1:
        add_figure(
            blocks,
            figures,
            "top1_vs_global_batch",
            lambda: top1_vs_global_batch(accuracy),
            "Final validation top-1 (the table above) against the global batch (log scale; k = 1024), one line per "
            "schedule and configuration.",
        )
    training = analysis.training_curves()
    if not training.empty and training["lr"].notna().any():
        add_figure(
            blocks,
            figures,
            "loss_and_lr",
            lambda: loss_and_lr(training),
            "Training loss (mean over ranks) and learning rate against the optimizer step, from the rank logs "
            f"(warm-up included; mean over repeats, at most {TRAINING_POINTS} points per line), a row per "
            "global batch.",
        )


def draw(report: Report) -> None:
    if report.measured:
        accuracy_section(report.blocks, report.figures, report.analysis)
