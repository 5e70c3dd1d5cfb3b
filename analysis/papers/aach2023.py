"""Seed study A: Aach et al. 2023, Horovod vs PyTorch-DDP vs DeepSpeed with DALI and the native loader,
ResNet-50/101/152 on JUWELS Booster (4 to 1024 A100 GPUs), and its learning-rate annealing study."""

from __future__ import annotations

import pandas as pd

from analysis.accuracy import top1_vs_global_batch
from analysis.load import load_reference
from analysis.papers import figures
from analysis.papers.base import Exhibit, PaperInput, Section, Study
from analysis.papers.common import (
    NO_LOADER,
    evaluated_cells,
    guesses_table,
    predicted_cells,
    predictions_table,
    scaling_cells,
    software_stack,
)
from analysis.reference_overlay import reference_breakdown, reference_comparison
from analysis.scaling import efficiency_vs_gpus, throughput_vs_gpus

SCALING = "ddlbench campaign submit experiment=aach2023_scaling system=<your site> system.account=<project>"
LR = "ddlbench campaign submit experiment=aach2023_lr system=<your site> system.account=<project>"
CPU_SCALING = "ddlbench campaign run experiment=aach2023_scaling_cpu (the CPU miniature, 1 and 2 CPU ranks)"
CPU_LR = "ddlbench campaign run experiment=aach2023_lr_cpu data.path=<images> (the CPU miniature)"
MODELS = {"a": "resnet50", "b": "resnet101", "c": "resnet152"}
# the study's words on each model's breakdown at 512 GPUs (claims.csv)
QUOTES_512 = {
    m: (f"comm_pct_native_{m}_512gpus", f"comm_pct_dali_{m}_512gpus") for m in ("resnet50", "resnet101", "resnet152")
}
FRAMEWORKS = ("ddp", "horovod", "deepspeed")


def _need_scaling(section: Section, cells: pd.DataFrame, what: str) -> bool:
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


def _scaling_section(paper: PaperInput) -> Section:
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
    section = _scaling_section(paper)
    measured = scaling_cells(paper.analysis)
    chosen = study_predictions(paper.predicted)
    predicted = predicted_cells(chosen)
    _need_scaling(section, measured, "throughput")
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
    section = _scaling_section(paper)
    scaled = scaling_cells(paper.analysis, paper.analysis.scaling("weak"))
    if _need_scaling(section, scaled, "speedup"):
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
    section = _scaling_section(paper)
    scaled = scaling_cells(paper.analysis, paper.analysis.scaling("weak"))
    if _need_scaling(section, scaled, "efficiency"):
        section.says(paper, "native_poor_scaling", "num_gpus_not_evaluated_native")
        section.text(
            "Measured: weak-scaling efficiency = per-GPU throughput(N) / per-GPU throughput(N0), per framework "
            "and loader, one panel per model."
        )
        section.figure("efficiency", lambda: efficiency_vs_gpus(scaled), "Scaling efficiency vs GPUs (measured).")
    return section


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


def _breakdown(panel: str) -> callable:
    model = MODELS[panel]

    def build(paper: PaperInput) -> Section:
        section = _scaling_section(paper)
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
    section = _scaling_section(paper)
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


def lr_study(paper: PaperInput) -> Section:
    section = Section()
    cells = paper.analysis.accuracy()
    section.says(paper, "lr_study_batch_size_min", "lr_schedule_finding")
    section.ours("the study's top-1 values are not in its text.")
    section.text("Measured: final validation top-1 per schedule and global batch, and the best schedule at each batch.")
    if cells.empty:
        section.lacks("learning-rate study: runs with evaluations (optim.schedule.name x GPUs)", LR)
        section.commands.append(CPU_LR)
        return section
    best = (
        cells.dropna(subset=["top1_pct"])
        .sort_values("top1_pct", ascending=False)
        .drop_duplicates("global_batch")
        .sort_values("global_batch")[["global_batch", "schedule", "top1_pct"]]
        .rename(columns={"schedule": "best schedule (measured)"})
    )
    low, high = paper.claim("lr_study_batch_size_min"), paper.claim("lr_study_batch_size_max")
    best["best schedule (published)"] = [
        "exponential" if b >= high else "cosine" if b >= low else f"(below the study's {low:,.0f})"
        for b in best["global_batch"]
    ]
    section.table(
        cells[["global_batch", "schedule", "world_size", "top1_pct", "epochs"]]
        .sort_values(["global_batch", "schedule"])
        .round(2)
    )
    section.table(best.round(2))
    section.figure(
        "top1",
        lambda: top1_vs_global_batch(cells),
        "Final top-1 vs global batch per schedule (measured; the study's top-1 values are not in its text).",
    )
    section.cells = cells["cell_hash"]
    guesses = guesses_table(paper.analysis, cells["cell_hash"])
    if not guesses.empty:
        section.text("Where the experiment had to guess (experiment.guesses: what the study does not state):")
        section.table(guesses)
    return section


def _by_loader(cells: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """Throughput (img/s) per loader side by side, the mean over a key's variants."""
    return cells.pivot_table(index=index, columns="loader", values="throughput_img_s", aggfunc="mean").reset_index()


def dali_speedup(paper: PaperInput) -> Section:
    """The text's DALI speed-up over the native loader (20-40% in throughput) beside the runs' and the predictions'."""
    section = _scaling_section(paper)
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


def dataset_sizes(paper: PaperInput) -> Section:
    section = Section()
    section.says(paper, "dataset_size_gb_imagenet_tfrecord")
    section.published(paper, "dataset_size_gb_imagenet_tfrecord", "dataset_size_gb_imagenet_jpg")
    section.text_only(
        "the sizes of the study's ImageNet copies on JUWELS; the runs record no data set's size (`ddlbench data "
        "convert` makes the TFRecord copy of an image folder, `du -sh` gives both sizes)"
    )
    return section


def frameworks_by_scale(paper: PaperInput) -> Section:
    """Which framework is fastest at each GPU count, per model and loader: the text's ranking of the three."""
    section = _scaling_section(paper)
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


FRAMEWORKS_TABLE = pd.DataFrame(
    [
        ("DistBelief", "Model + Data", "Asynchronous", "no"),
        ("FireCaffe", "Data", "Synchronous", "no"),
        ("Horovod", "Model + Data", "Synchronous", "framework=horovod"),
        ("MXNet", "Model + Data", "Bounded Asynchronous", "no"),
        ("Petuum", "Model + Data", "Bounded Asynchronous", "no"),
        ("TensorFlow", "model + Data", "Bounded Asynchronous", "no"),
        ("PyTorch-DDP", "Model + Data", "Synchronous", "framework=ddp"),
        ("DeepSpeed", "Model + Data", "Synchronous", "framework=deepspeed"),
    ],
    columns=["Framework", "Parallelism", "Communication", "in ddlbench"],
)


def frameworks(paper: PaperInput) -> Section:
    section = Section()
    section.text(
        "Published: the study's table of distributed frameworks (its related work: 'Framework | Parallelism | "
        "Communication'), with the ddlbench option of each it benchmarks (ours)."
    )
    section.table(FRAMEWORKS_TABLE)
    return section


def stack(paper: PaperInput) -> Section:
    section = Section()
    section.text("Published: the study's software stack on JUWELS; measured: what these runs recorded (meta.json).")
    section.table(software_stack(paper, ["gcc", "openmpi", "python", "cuda", "torch", "horovod", "deepspeed", "dali"]))
    return section


STUDY = Study(
    name="aach2023",
    title="Aach et al. 2023: Horovod, PyTorch-DDP and DeepSpeed with DALI and native loaders on JUWELS Booster",
    campaigns=("aach2023_scaling", "aach2023_lr", "aach2023_lr_cpu", "aach2023_scaling_cpu"),
    commands=(SCALING, CPU_SCALING, LR, CPU_LR),
    exhibits=(
        Exhibit("Frameworks table", "Distributed deep-learning frameworks", ("published",), frameworks),
        Exhibit("Software stack", "JUWELS software stack", ("measured", "published"), stack),
        Exhibit("Throughput vs GPUs", "Throughput per framework and loader", ("measured", "predicted"), throughput),
        Exhibit("Speedup", "Speedup per framework and loader", ("measured",), speedup),
        Exhibit("Efficiency", "Scaling efficiency per framework and loader", ("measured",), efficiency),
        Exhibit(
            "Breakdown table (a) ResNet50",
            "Training of ResNet50: AllReduce, data, cuDNN %",
            ("measured", "predicted", "published"),
            _breakdown("a"),
        ),
        Exhibit(
            "Breakdown table (b) ResNet101",
            "Training of ResNet101: AllReduce, data, cuDNN %",
            ("measured", "predicted", "published"),
            _breakdown("b"),
        ),
        Exhibit(
            "Breakdown table (c) ResNet152",
            "Training of ResNet152: AllReduce, data, cuDNN %",
            ("measured", "predicted", "published"),
            _breakdown("c"),
        ),
        Exhibit(
            "Data time",
            "Absolute data-loading time, DALI vs native (text)",
            ("measured", "published"),
            data_time,
            from_text=True,
        ),
        Exhibit(
            "DALI speed-up",
            "DALI over the native loader in throughput (text)",
            ("measured", "predicted", "published"),
            dali_speedup,
            from_text=True,
        ),
        Exhibit(
            "Dataset sizes",
            "ImageNet as TFRecord and as JPEG (text)",
            ("published",),
            dataset_sizes,
            from_text=True,
        ),
        Exhibit(
            "Frameworks by scale",
            "Which framework is fastest on few and on many GPUs (text)",
            ("measured", "published"),
            frameworks_by_scale,
            from_text=True,
        ),
        Exhibit(
            "LR annealing accuracy",
            "Validation accuracy per schedule and global batch",
            ("measured", "published"),
            lr_study,
        ),
    ),
)
