"""Seed study A's scaling exhibits: throughput, speedup and efficiency against the GPU count per framework and
loader, DALI's speed-up over the native loader and which framework is fastest at each scale; the predictions
(ddlbench predict) at the study's GPU counts beside the measured curves."""

from __future__ import annotations

import pandas as pd

from analysis.load import load_reference
from analysis.papers import figures
from analysis.papers.base import PaperInput, Section
from analysis.papers.common import NO_LOADER, predicted_cells, predictions_table, scaling_cells
from analysis.scaling import efficiency_vs_gpus, throughput_vs_gpus

SCALING = "ddlbench campaign submit experiment=aach2023_scaling system=<your site> system.account=<project>"
CPU_SCALING = "ddlbench campaign run experiment=aach2023_scaling_cpu (the CPU miniature, 1 and 2 CPU ranks)"
MODELS = {"a": "resnet50", "b": "resnet101", "c": "resnet152"}
FRAMEWORKS = ("ddp", "horovod", "deepspeed")


def need_scaling(section: Section, cells: pd.DataFrame, what: str) -> bool:
    """True when the scaling cells exist; else say what is missing and how to make it."""
    if cells.empty:
        section.lacks(f"{what}: no scaling run of ResNet-50/101/152 (framework x loader x GPUs)", SCALING)
        section.commands.append(CPU_SCALING)
        return False
    missing = [
        f"{m} x {f}"
        for m in MODELS.values()
        for f in FRAMEWORKS
        if not ((cells["model"] == m) & (cells["framework"] == f)).any()
    ]
    if missing:
        section.lacks(f"{what}: no cell of {', '.join(missing)}", SCALING)
    return True


def scaling_section(paper: PaperInput) -> Section:
    """A section of the scaling runs: its stand-ins are theirs, not the learning-rate runs'."""
    cells = scaling_cells(paper.analysis)
    return Section(cells=cells["cell_hash"] if "cell_hash" in cells else None)


def study_predictions(predicted: pd.DataFrame) -> pd.DataFrame:
    """The predictions at the study's GPU counts: from its smallest (4, its breakdown tables' first row) up,
    each one's efficiency against its own value there (the predictor's is against the 1-GPU calibration)."""
    if predicted.empty:
        return predicted
    first = int(load_reference("aach2023")["gpus"].min())
    rows = predicted[predicted["gpus"] >= first].copy()
    base = rows.sort_values("gpus").groupby("source")["per_gpu"].transform("first")
    rows["efficiency"] = rows["per_gpu"] / base
    return rows.reset_index(drop=True)


def prediction_notes(section: Section, predicted: pd.DataFrame) -> None:
    """Each prediction's calibration run, its device and the compute's scaling, and what its data share
    models; a JUWELS prediction whose compute is an unscaled other GPU's says so."""
    table = predictions_table(predicted)
    section.text(
        "Predicted: each prediction's calibration run, the device it ran on, how its compute was scaled to the "
        "system predicted (ddlbench predict --compute-scale; docs/predict.md) and what its data share models:"
    )
    section.table(table)
    unscaled = table[
        (table["system"] == "juwels_booster")
        & table["compute"].str.endswith("unscaled")
        & ~table["calibrated on"].str.contains("A100")
    ]
    if (table["loader"] != "synthetic").any():
        section.ours(
            "a modelled loader's data share comes from its pace where it was measured (loaderbench on its machine, "
            "or the calibration run fed by it), not on JUWELS Booster's nodes and file system."
        )
    for _, row in unscaled.iterrows():
        section.ours(
            f"{row['prediction']}'s compute is its calibration's on {row['calibrated on']}, unscaled: JUWELS Booster's GPUs are A100s, "
            "about 3x slower than an H200 (docs/predict.md: --compute-scale 3), or give a calibration run on "
            "an A100 (--from)."
        )


def throughput(paper: PaperInput) -> Section:
    section = scaling_section(paper)
    measured = scaling_cells(paper.analysis)
    chosen = study_predictions(paper.predicted)
    predicted = predicted_cells(chosen)
    need_scaling(section, measured, "throughput")
    cells = pd.concat([measured, predicted], ignore_index=True) if not predicted.empty else measured
    if cells.empty:
        return section
    section.says(paper, "dali_throughput_scalability", "num_gpus_max")
    section.text(
        "Measured: throughput (img/s) per framework and loader against the GPU count, one panel per model, as "
        "the study plots it; dotted: ideal linear scaling from each curve's smallest GPU count. Predicted: the "
        "curves labelled 'predicted for <system> from <device> compute <scaling>' (ddlbench predict), from the "
        "study's smallest GPU count (4) up."
    )
    section.ours("the study's throughput values are not in its text, so none is drawn beside these.")
    if not chosen.empty:
        prediction_notes(section, chosen)
        section.table(
            chosen[["source", "model", "loader", "gpus"]]
            .rename(columns={"source": "prediction"})
            .assign(
                **{
                    "throughput_img_s (predicted)": chosen["throughput"],
                    "efficiency vs 4 GPUs (predicted)": chosen["efficiency"],
                }
            )
            .round(3)
        )
    caption = "Throughput vs GPUs: measured, and predicted where a curve's label says so"
    if not chosen.empty:
        caption += (
            " ("
            + "; ".join(
                f"{r['prediction']}: calibration {r['calibration run']} on {r['calibrated on']}, {r['compute']}"
                + (f", {NO_LOADER}" if r["loader"] == "synthetic" else "")
                for _, r in predictions_table(chosen).iterrows()
            )
            + ")"
        )
    section.figure("throughput", lambda: throughput_vs_gpus(cells), caption + ".")
    return section


def speedup(paper: PaperInput) -> Section:
    section = scaling_section(paper)
    scaled = scaling_cells(paper.analysis, paper.analysis.scaling("weak"))
    if need_scaling(section, scaled, "speedup"):
        section.says(paper, "framework_small_vs_large")
        section.text(
            "Measured: speedup = throughput(N) / throughput(N0), N0 the curve's smallest GPU count; dotted: "
            "ideal N / N0."
        )
        section.ours("the study's smallest GPU count is 4 (its breakdown tables' first row).")
        section.table(
            scaled[["model", "framework", "loader", "world_size", "baseline_gpus", "speedup", "efficiency"]]
            .dropna(subset=["speedup"])
            .round(3)
        )
        section.figure("speedup", lambda: figures.speedup_vs_gpus(scaled), "Speedup vs GPUs (measured).")
    return section


def efficiency(paper: PaperInput) -> Section:
    section = scaling_section(paper)
    scaled = scaling_cells(paper.analysis, paper.analysis.scaling("weak"))
    if need_scaling(section, scaled, "efficiency"):
        section.says(paper, "native_poor_scaling", "num_gpus_not_evaluated_native")
        section.text(
            "Measured: weak-scaling efficiency = per-GPU throughput(N) / per-GPU throughput(N0), per framework "
            "and loader, one panel per model."
        )
        section.figure("efficiency", lambda: efficiency_vs_gpus(scaled), "Scaling efficiency vs GPUs (measured).")
    return section


def _by_loader(cells: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Throughput (img/s) per loader side by side, the mean over a key's variants."""
    return cells.pivot_table(index=index, columns="loader", values="throughput_img_s", aggfunc="mean").reset_index()


def dali_speedup(paper: PaperInput) -> Section:
    """The text's DALI speed-up over the native loader (20-40% in throughput) beside the runs' and the predictions'."""
    section = scaling_section(paper)
    section.says(paper, "dali_speedup_pct_low")
    section.ours("the study does not say which model, framework or GPU count its initial benchmarks ran.")
    low, high = paper.claim("dali_speedup_pct_low"), paper.claim("dali_speedup_pct_high")
    cells = scaling_cells(paper.analysis)
    both = _by_loader(cells, ["model", "framework", "world_size"]) if not cells.empty else pd.DataFrame()
    if both.empty or not {"dali", "native"} <= set(both.columns):
        section.lacks("DALI speed-up: cells of one model, framework and GPU count with both loaders", SCALING)
        section.commands.append(CPU_SCALING)
        return section
    both = both.dropna(subset=["dali", "native"])
    both["DALI speed-up % (measured)"] = 100 * (both["dali"] / both["native"] - 1)
    both["published"] = f"{low:g} to {high:g}"
    section.text(
        "Measured: throughput with DALI over throughput with the native loader, minus 1, per model, framework and "
        "GPU count where both ran; published: the text's range."
    )
    section.table(both.rename(columns={"dali": "dali img/s", "native": "native img/s"}).round(1))
    predicted = study_predictions(paper.predicted)
    if not predicted.empty and {"dali", "native"} <= set(predicted["loader"]):
        pairs = predicted.pivot_table(
            index=["model", "framework", "gpus"], columns="loader", values="throughput", aggfunc="mean"
        ).reset_index()
        pairs = pairs.dropna(subset=["dali", "native"])
        pairs["DALI speed-up % (predicted)"] = 100 * (pairs["dali"] / pairs["native"] - 1)
        if predicted.loc[predicted["loader"].isin(["dali", "native"]), "data_pct"].max() < 1:
            section.ours(
                "both predicted loaders keep up with the step (a data share below 1% at every GPU count), so the "
                "predictions give DALI no speed-up: the loaders' pace, not the GPUs, would make one."
            )
        pairs["published"] = f"{low:g} to {high:g}"
        section.text(
            "Predicted: the same of the DALI and native predictions (their calibration, device and scaling: the "
            "throughput section's table)."
        )
        shown = pairs.rename(columns={"dali": "dali img/s", "native": "native img/s"}).round(1)
        shown["DALI speed-up % (predicted)"] += 0.0  # -0.0 reads as '-0'
        section.table(shown)
    return section


def frameworks_by_scale(paper: PaperInput) -> Section:
    """Which framework is fastest at each GPU count, per model and loader: the text's ranking of the three."""
    section = scaling_section(paper)
    section.says(paper, "framework_small_vs_large")
    section.ours("the study does not say where a small number of GPUs ends; these are the runs' own counts.")
    cells = scaling_cells(paper.analysis)
    if cells.empty or cells["framework"].nunique() < 2:
        section.lacks("frameworks by scale: cells of two or more frameworks at one GPU count", SCALING)
        section.commands.append(CPU_SCALING)
        return section
    table = cells.pivot_table(
        index=["model", "loader", "world_size"], columns="framework", values="throughput_img_s", aggfunc="mean"
    )
    best = table.idxmax(axis=1)
    table = table.rename(columns=lambda f: f"{f} img/s").reset_index()
    table["fastest (measured)"] = best.to_numpy()
    section.text("Measured: throughput per framework at each GPU count the runs have, and the fastest.")
    section.table(table.round(1))
    first = int(load_reference("aach2023")["gpus"].min())
    if cells["world_size"].max() < first:
        sizes = ", ".join(str(int(n)) for n in sorted(set(cells["world_size"])))
        section.drawn_without(f"the study's GPU counts ({first} to 1024): these runs have {sizes}")
    missing = [f for f in FRAMEWORKS if f not in set(cells["framework"])]
    if missing:
        section.lacks(f"frameworks by scale: no cell of {', '.join(missing)}", SCALING)
    return section
