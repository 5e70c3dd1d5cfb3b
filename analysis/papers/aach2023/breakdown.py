"""Seed study A's breakdown exhibits: its tables (a)-(c) of AllReduce, data and cuDNN % per model and GPU count
beside this campaign's DDP cells and the predictions, and the absolute data time of DALI against native."""

from __future__ import annotations

import pandas as pd

from analysis.load import load_reference
from analysis.papers.aach2023.scaling import (
    CPU_SCALING,
    MODELS,
    SCALING,
    prediction_notes,
    scaling_section,
    study_predictions,
)
from analysis.papers.base import PaperInput, Section
from analysis.papers.common import NO_LOADER, evaluated_cells, scaling_cells
from analysis.reference_overlay import reference_breakdown, reference_comparison

# the study's words on each model's breakdown at 512 GPUs (claims.csv)
QUOTES_512 = {
    m: (f"comm_pct_native_{m}_512gpus", f"comm_pct_dali_{m}_512gpus") for m in ("resnet50", "resnet101", "resnet152")
}


def breakdown_layout(
    side: pd.DataFrame, reference: pd.DataFrame, model: str, predicted: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The study's breakdown table for one model: a row per GPU count (the study's, this campaign's and the
    predictions', and per matching configuration), for DALI then native the published AllReduce / data /
    cuDNN % beside this campaign's, defined as report.reference_comparison defines them (exposed allreduce,
    data, compute), then each prediction's shares (common.load_predictions) from the study's smallest GPU count
    up, named by the loader predicted; a synthetic one's data share is common.NO_LOADER, not a number."""
    ref = reference[reference["model"] == model]
    predicted = pd.DataFrame() if predicted is None or predicted.empty else predicted
    if not predicted.empty:
        predicted = predicted[
            (predicted["model"] == model) & (predicted["framework"] == "ddp") & (predicted["gpus"] >= ref["gpus"].min())
        ]
    side = side[side["model"] == model] if not side.empty else side
    sizes = set(ref["gpus"]) | (set(side["gpus"]) if not side.empty else set())
    sizes |= set(predicted["gpus"]) if not predicted.empty else set()
    parts = (("allreduce", "allreduce_exposed"), ("data", "data"), ("compute", "compute"))
    rows = []
    for gpus in sorted(int(g) for g in sizes):
        here = side[side["gpus"] == gpus] if not side.empty else side
        for name in sorted(set(here["series"])) if not here.empty else [""]:
            row: dict = {"gpus": gpus, "configuration": name}
            for loader in ("dali", "native"):
                published = ref[(ref["gpus"] == gpus) & (ref["loader"] == loader)]
                mine = here[(here["loader"] == loader) & (here["series"] == name)] if not here.empty else here
                for part, ours in parts:
                    # as the study prints them (two decimals), not rounded like the measured columns
                    row[f"{loader} {part} % published"] = (
                        f"{float(published[f'{part}_pct'].iloc[0]):.2f}" if not published.empty else ""
                    )
                    row[f"{loader} {part} % measured"] = (
                        float(mine[f"{ours}_pct_here"].iloc[0]) if not mine.empty else float("nan")
                    )
            for loader in sorted(set(predicted["loader"])) if not predicted.empty else []:
                guess = predicted[(predicted["gpus"] == gpus) & (predicted["loader"] == loader)]
                for part, _ in parts:
                    value = float(guess[f"{part}_pct"].iloc[0]) if not guess.empty else float("nan")
                    # a synthetic calibration's data share is the handover of a batch made on the GPU: no loader
                    row[f"{part} % predicted (loader={loader})"] = (
                        NO_LOADER if part == "data" and loader == "synthetic" and not guess.empty else value
                    )
            rows.append(row)
    return pd.DataFrame(rows)


def _with_measured_sizes(reference: pd.DataFrame, shares: pd.DataFrame) -> pd.DataFrame:
    """The reference plus an empty row for each DDP (model, loader, GPU count) measured where the study has
    none, so that reference_comparison computes this campaign's shares at every size it ran."""
    if shares is None or shares.empty:
        return reference
    ddp = shares[shares["framework"] == "ddp"]
    measured = ddp[["model", "loader", "world_size"]].drop_duplicates().rename(columns={"world_size": "gpus"})
    measured["gpus"] = measured["gpus"].astype(int)
    extra = measured.merge(reference[["model", "loader", "gpus"]], how="left", indicator=True)
    extra = extra[extra["_merge"] == "left_only"].drop(columns="_merge")
    return pd.concat([reference, extra], ignore_index=True)


def breakdown(panel: str) -> callable:
    model = MODELS[panel]

    def build(paper: PaperInput) -> Section:
        section = scaling_section(paper)
        reference = load_reference("aach2023")
        shares = scaling_cells(paper.analysis, paper.analysis.breakdown())
        side = reference_comparison(_with_measured_sizes(reference, shares), shares)
        table = breakdown_layout(side, reference, model, paper.predicted)
        ref_m = reference[reference["model"] == model]
        measured = table[[c for c in table if c.endswith("measured")]].notna().any(axis=1)
        in_study = table["gpus"].isin(set(ref_m["gpus"]))
        section.says(paper, *QUOTES_512[model], "cudnn_decreases")
        section.text(
            f"Published: the study's PyTorch-DDP table of {model}, its columns 'AllReduce [%] (Communication)', "
            "'data [%] (I/O)' and 'cuDNN [%] (Computation)' for DALI and native, per GPU count. Measured: this "
            "campaign's DDP cells of the model and loader at each GPU count it ran (the study's or not). Predicted: "
            "ddlbench predict's shares, named by the loader predicted (loader=synthetic: no loader modelled)."
        )
        section.ours(
            "we set exposed allreduce beside the study's AllReduce, waiting for data beside its data, and compute "
            "without exposed allreduce beside its cuDNN (analysis/reference/README.md). That is our reading: the "
            "study's text does not define its three columns beyond those headings."
        )
        section.table(table.round(2))
        mine = study_predictions(paper.predicted)
        mine = mine[(mine["model"] == model) & (mine["framework"] == "ddp")] if not mine.empty else mine
        if not mine.empty:
            prediction_notes(section, mine)
        if not paper.predicted.empty and paper.predicted["fitted_to"].astype(bool).any():
            section.text(
                "A prediction fitted to the study (fitted_to) took its data, other and jitter times from the study's "
                "smallest GPU count: there it equals the study by construction, and it is no independent check."
            )
        missing = table.loc[in_study & ~measured, "gpus"].tolist()
        if not (in_study & measured).any():
            section.lacks(f"breakdown of {model}: no PyTorch-DDP cell at the study's GPU counts", SCALING)
            section.commands.append(CPU_SCALING)
            section.drawn_without("measured markers: the figure draws the published bars alone")
        elif missing:
            section.lacks(f"breakdown of {model} at {', '.join(map(str, missing))} GPUs", SCALING)
        side_m = side[(side["model"] == model) & side["gpus"].isin(set(ref_m["gpus"]))] if not side.empty else side
        section.figure(
            "breakdown",
            lambda: reference_breakdown(ref_m, ours=side_m, source="aach2023"),
            f"{model}: the study's breakdown (bars, published) with this campaign's DDP cells at the study's GPU "
            "counts (markers, measured).",
        )
        return section

    return build


def data_time_table(paper: PaperInput) -> pd.DataFrame:
    """Per (model, GPUs) with both loaders measured: each loader's data share and its absolute data time
    (data share x the run's measured time, mean over repeats), and native over DALI; the study's one pair
    (ResNet-152 on 64 GPUs) beside it."""
    per_run = paper.analysis.run_throughput()
    shares = paper.analysis.breakdown_runs()
    columns = ["model", "world_size", "loader", "data_pct", "data_s", "data_s_per_step_ms"]
    if per_run.empty or shares.empty:
        return pd.DataFrame(columns=columns)
    runs = per_run.merge(shares[["run_id", "data_share"]], on="run_id")
    runs = runs[(runs["framework"] == "ddp") & ~runs["cell_hash"].astype(str).isin(evaluated_cells(paper.analysis))]
    runs = runs.assign(
        data_pct=100 * runs["data_share"],
        data_s=runs["data_share"] * runs["time_s"],
        data_s_per_step_ms=1e3 * runs["data_share"] * runs["time_s"] / runs["measured_steps"],
    )
    table = runs.groupby(["model", "world_size", "loader"], as_index=False)[columns[3:]].mean()
    both = table.groupby(["model", "world_size"])["loader"].transform(lambda s: {"dali", "native"} <= set(s))
    return table[both].reset_index(drop=True)


def data_time(paper: PaperInput) -> Section:
    section = scaling_section(paper)
    table = data_time_table(paper)
    published = pd.DataFrame(
        [
            {
                "loader": loader,
                "data_pct published": paper.claim(f"data_pct_{loader}_resnet152_64gpus"),
                "data_s published": paper.claim(f"data_time_s_{loader}_resnet152_64gpus"),
            }
            for loader in ("dali", "native")
        ]
    )
    section.says(
        paper,
        "data_pct_dali_resnet152_64gpus",
        "data_time_s_dali_resnet152_64gpus",
        "data_pct_native_resnet152_64gpus",
        "data_time_s_native_resnet152_64gpus",
        "dali_faster_absolute",
    )
    section.ours("the study does not give its run length, so the seconds compare through their ratio (47 / 25 = 1.9).")
    section.text(
        "Measured: every model and GPU count where both loaders ran under PyTorch-DDP: data share, data time over "
        "the measured steps and per step, and native / DALI."
    )
    section.table(published)
    if table.empty:
        section.lacks("data time: DDP cells with both loaders at one model and GPU count", SCALING)
        return section
    ratio = table.pivot_table(index=["model", "world_size"], columns="loader", values="data_s").reset_index()
    ratio["native / dali (measured)"] = ratio["native"] / ratio["dali"]
    ratio["native / dali (published, ResNet-152 at 64)"] = paper.claim(
        "data_time_s_native_resnet152_64gpus"
    ) / paper.claim("data_time_s_dali_resnet152_64gpus")
    section.table(table.round(3))
    section.table(ratio.rename(columns={"dali": "dali data_s", "native": "native data_s"}).round(3))
    if not ((table["model"] == "resnet152") & (table["world_size"] == 64)).any():
        section.lacks("data time: ResNet-152 on 64 GPUs with both loaders (the study's pair)", SCALING)
    return section
