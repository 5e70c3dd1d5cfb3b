"""Tables more than one study's exhibits draw: the scaling cells, the experiment's guesses, the
software stack, and cells paired across system profiles."""

from __future__ import annotations

import json
import weakref
from pathlib import Path

import pandas as pd

from analysis.campaign_analysis import CampaignAnalysis
from analysis.cells import variants
from analysis.device import GPU, rank_words, run_devices, with_device

GUESSES = "config.experiment.guesses."
STAND_INS = "config.experiment.stand_ins."


def evaluated_cells(analysis: CampaignAnalysis) -> set[str]:
    """The cells whose runs evaluate (a learning-rate study's: drawn by the accuracy exhibits, not beside
    the throughput runs)."""
    evaluated = set(analysis.accuracy_runs()["run_id"].astype(str))
    runs = analysis.counted()
    return set(runs.loc[runs["run_id"].astype(str).isin(evaluated), "cell_hash"].astype(str))


def scaling_cells(analysis: CampaignAnalysis, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows of a per-cell table (default: cells()) whose runs do not evaluate, with the device their
    ranks ran on (analysis.device: the figures name CPU ranks as such)."""
    table = analysis.cells() if table is None else table
    if table.empty or "cell_hash" not in table:
        return table
    table = table[~table["cell_hash"].astype(str).isin(evaluated_cells(analysis))].reset_index(drop=True)
    if "variant" in table and not table.empty:
        table["variant"] = table["cell_hash"].astype(str).map(_scaling_variants(analysis)).fillna("")
    return with_device(table, analysis.counted())


_VARIANTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _scaling_variants(analysis: CampaignAnalysis) -> pd.Series:
    """Per cell hash, its variant among the cells whose runs do not evaluate (what told them from the
    evaluated cells, the campaign or the schedule, is no difference between them); once per analysis."""
    if analysis not in _VARIANTS:
        runs = analysis.counted()
        runs = runs[~runs["cell_hash"].astype(str).isin(evaluated_cells(analysis))]
        variant = pd.Series(variants(runs).to_numpy(), index=runs["cell_hash"].astype(str))
        _VARIANTS[analysis] = variant[~variant.index.duplicated()]
    return _VARIANTS[analysis]


def _given_on_command_line(runs: pd.DataFrame, key: str) -> list[str]:
    """The `key=value` arguments the runs were started with (meta.json argv): a value given there is the
    user's, not the experiment's guess."""
    given: set[str] = set()
    for run_dir in runs.get("run_dir", pd.Series(dtype=str)).dropna().astype(str):
        meta = Path(run_dir) / "meta.json"
        if meta.is_file():
            argv = json.loads(meta.read_text()).get("argv") or []
            given |= {a for a in argv if isinstance(a, str) and a.lstrip("+").startswith(f"{key}=")}
    return sorted(given)


def _experiment_notes(analysis: CampaignAnalysis, prefix: str, cell_hashes: pd.Series | None) -> pd.DataFrame:
    runs = analysis.counted()
    if cell_hashes is not None and "cell_hash" in runs:
        runs = runs[runs["cell_hash"].isin(set(cell_hashes))]
    rows = []
    for column in sorted(c for c in runs.columns if c.startswith(prefix)):
        key = column[len(prefix) :]
        why = runs[column].dropna().astype(str)
        if why.empty:  # a note of other runs' experiment
            continue
        values = runs.get(f"config.{key}", pd.Series(dtype=object)).dropna().astype(str)
        reason = why.iloc[0]
        if prefix == GUESSES and (given := _given_on_command_line(runs, key)):
            reason = f"given on the command line ({', '.join(given)}), not the experiment's guess, which was: {reason}"
        rows.append({"setting": key, "value in these runs": ", ".join(sorted(set(values))) or "-", "why": reason})
    return pd.DataFrame(rows, columns=["setting", "value in these runs", "why"])


def guesses_table(analysis: CampaignAnalysis, cell_hashes: pd.Series | None = None) -> pd.DataFrame:
    """experiment.guesses of the runs (every setting the study does not state, and why this value), with
    the value the runs used."""
    return _experiment_notes(analysis, GUESSES, cell_hashes)


def stand_ins_table(analysis: CampaignAnalysis, cell_hashes: pd.Series | None = None) -> pd.DataFrame:
    """experiment.stand_ins of the runs (of these cells): what this suite runs where the study ran something else."""
    table = _experiment_notes(analysis, STAND_INS, cell_hashes)
    return table.rename(columns={"setting": "we run", "why": "the study ran"})[["we run", "the study ran"]]


def _values(rows: pd.DataFrame, column: str, fmt=str) -> str:
    values = rows[column].dropna() if column in rows else pd.Series(dtype=object)
    return ", ".join(sorted({fmt(v) for v in values}, key=lambda v: (len(v), v))) or "-"


def _data_words(rows: pd.DataFrame) -> str:
    """Where a campaign's samples came from: synthetic tensors, or files at data.path, with the classes."""
    classes = rows.get("meta.num_classes.data", pd.Series(dtype=object)).dropna()
    if classes.empty:
        classes = rows.get("config.model.num_classes", pd.Series(dtype=object)).dropna()
    count = ", ".join(sorted({str(int(float(c))) for c in classes})) or "?"
    parts = []
    loaders = rows["loader"].astype(str) if "loader" in rows else pd.Series(dtype=str)
    if (loaders == "synthetic").any():
        parts.append(f"synthetic tensors ({count} classes)")
    read = rows[loaders != "synthetic"] if not loaders.empty else rows
    if not read.empty:
        paths = _values(read, "config.data.path")
        parts.append(f"image files of data.path={paths} ({count} classes; {_values(read, 'loader')} loader)")
    return "; ".join(parts) or "-"


def what_runs_are(analysis: CampaignAnalysis) -> pd.DataFrame:
    """Per campaign of the runs: what its ranks ran on and how many, the models, image size, data, batch per
    rank, precision and measured steps, read from the runs themselves (config.yaml, meta.json, summary)."""
    runs = analysis.counted()
    if runs.empty:
        return pd.DataFrame()
    runs = runs.assign(device=run_devices(runs).to_numpy())
    rows = []
    for campaign, group in runs.groupby("campaign", sort=True) if "campaign" in runs else [("-", runs)]:
        words = rank_words(group["device"])
        sizes = sorted({int(n) for n in group["world_size"].dropna()})
        nodes = sorted({int(n) for n in group.get("num_nodes", pd.Series([1])).dropna()})
        where = f"{', '.join(map(str, sizes))} {words.many if sizes != [1] else words.one}"
        if nodes and nodes != [1]:
            where += f" on {', '.join(map(str, nodes))} hosts"
        rows.append(
            {
                "campaign": campaign,
                "runs": len(group),
                "ranks": where,
                "models": _values(group, "model"),
                "image size (px)": _values(group, "config.model.image_size", lambda v: str(int(v))),
                "data": _data_words(group),
                f"batch per {words.per}": _values(group, "per_gpu_batch", lambda v: str(int(v))),
                "precision": _values(group, "precision"),
                "measured steps": _values(group, "measured_steps", lambda v: str(int(v))),
            }
        )
    return pd.DataFrame(rows)


# meta.json's columns of each package: a column counts when it is one of these or one of them followed by
# '-' (every build of a package: nvidia-dali-cuda110, -cuda120, -cuda130); python is meta.hardware.python
_VERSIONS = {
    "torch": ("meta.versions.torch",),
    "horovod": ("meta.versions.horovod",),
    "deepspeed": ("meta.versions.deepspeed",),
    "dali": ("meta.versions.nvidia-dali",),
    "cuda": ("meta.hardware.cuda",),
    "nccl": ("meta.hardware.nccl",),
    "python": ("meta.hardware.python", "meta.versions.python"),
    "transformers": ("meta.versions.transformers",),
}
# what a GPU run used at run time; on a CPU run meta.json's cuda is the build torch was compiled for
_GPU_RUNTIME = {"cuda", "nccl"}
NO_GPU = "none (CPU)"


def recorded_versions(runs: pd.DataFrame, name: str) -> list[str]:
    """The versions of one package these runs recorded in meta.json (every package name it goes by); for
    CUDA and NCCL, the runtime of the GPU runs, and NO_GPU for runs that used no GPU."""
    if runs.empty:
        return []
    prefixes = _VERSIONS.get(name, ())
    columns = [c for c in runs.columns if any(c == p or c.startswith(f"{p}-") for p in prefixes)]
    on_gpu = run_devices(runs) == GPU if name in _GPU_RUNTIME else pd.Series(True, index=runs.index)
    found: set[str] = set()
    for column in columns:
        found |= set(runs.loc[on_gpu, column].dropna().astype(str)) - {"", "None", "nan"}
    return sorted(found) + ([NO_GPU] if not on_gpu.all() else [])


def software_stack(paper, names: list[str]) -> pd.DataFrame:
    """Per package: the study's version (claims.csv rows of unit `version` whose key names it) beside the
    versions these runs recorded in meta.json."""
    claims = paper.claims[paper.claims["unit"] == "version"] if "unit" in paper.claims else paper.claims.iloc[:0]
    runs = paper.analysis.counted()
    rows = []
    for name in names:
        published = claims[claims["key"].str.contains(name, case=False, regex=False)]
        rows.append(
            {
                "software": name,
                "published (the study)": published["value"].iloc[0] if not published.empty else "-",
                "measured (these runs)": ", ".join(recorded_versions(runs, name)) or "-",
            }
        )
    return pd.DataFrame(rows)


PREDICTION_COLUMNS = [
    "framework",
    "loader",
    "model",
    "per_gpu_batch",
    "precision",
    "system",
    "fitted_to",
    "calibration",
    "calibration_system",
    "calibration_device",
    "compute_scale",
]
# a prediction of loader=synthetic models no loader: its data share is the handover of a batch made on the GPU
NO_LOADER = "no loader modelled"


def load_predictions(root: Path) -> pd.DataFrame:
    """Every `ddlbench predict --out` folder below root (prediction.csv beside its cell.json): one row per
    predicted GPU count with the configuration predicted, what it was calibrated on and the reference it
    was fitted to ('' for none)."""
    frames = []
    for table in sorted(Path(root).rglob("prediction.csv")):
        cell = table.parent / "cell.json"
        if not cell.is_file():
            continue
        what = json.loads(cell.read_text())
        rows = pd.read_csv(table)
        for column in PREDICTION_COLUMNS:
            value = what.get(column)
            rows[column] = "" if value is None else value  # an older cell.json: not recorded
        rows["source"] = table.parent.name
        frames.append(rows)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*PREDICTION_COLUMNS, "gpus"])


def compute_words(row) -> str:
    """How a prediction's compute was obtained: the calibration's device and its scaling (cell.json's
    calibration_device, compute_scale), e.g. 'NVIDIA H200 compute x3' or 'NVIDIA H200 compute unscaled'."""
    device = str(row.get("calibration_device") or "") or "device not recorded"
    scale = pd.to_numeric(pd.Series([row.get("compute_scale")]), errors="coerce").iloc[0]
    return f"{device} compute " + (f"x{scale:g}" if pd.notna(scale) else "unscaled")


def loader_words(loader: str) -> str:
    """What a prediction's data share is: no loader modelled (synthetic), or the loader's measured pace."""
    if str(loader) == "synthetic":
        return f"{NO_LOADER}: calibrated on synthetic data, its data share is the handover alone"
    return f"loader={loader} modelled from its measured pace (loaderbench, or a calibration run fed by it)"


def predictions_table(predicted: pd.DataFrame) -> pd.DataFrame:
    """One row per prediction (`ddlbench predict --out` folder): the system and configuration predicted, the
    calibration run, its device and system, the compute's scaling and what its data share models."""
    columns = ["prediction", "system", "framework", "model", "loader", "calibration run", "calibrated on", "compute"]
    if predicted.empty:
        return pd.DataFrame(columns=[*columns, "data"])
    rows = []
    for source, group in predicted.groupby("source", sort=True):
        row = group.iloc[0]
        where = str(row.get("calibration_system") or "")
        rows.append(
            {
                "prediction": source,
                "system": row["system"],
                "framework": row["framework"],
                "model": row["model"],
                "loader": row["loader"],
                "calibration run": str(row["calibration"]).split(", compute x")[0],  # the scaling: its own column
                "calibrated on": (str(row.get("calibration_device") or "") or "not recorded")
                + (f" (system={where})" if where else ""),
                "compute": compute_words(row),
                "data": loader_words(row["loader"]),
            }
        )
    return pd.DataFrame(rows, columns=[*columns, "data"])


def predicted_cells(predicted: pd.DataFrame) -> pd.DataFrame:
    """Predictions as rows of a cells table (one curve per prediction, its variant saying 'predicted'), so
    that the throughput and efficiency figures draw them beside the measured curves, labelled."""
    if predicted.empty:
        return pd.DataFrame()
    label = (
        predicted["system"].astype(str).radd("predicted for ")
        + predicted.apply(lambda r: f" from {compute_words(r)}", axis=1)
        + predicted["loader"].map(lambda loader: f", {NO_LOADER}" if loader == "synthetic" else "")
        + predicted["fitted_to"].map(lambda f: f", fitted to {f}" if f else "")
    )
    return pd.DataFrame(
        {
            "framework": predicted["framework"],
            "loader": predicted["loader"],
            "model": predicted["model"],
            "precision": predicted["precision"],
            "per_gpu_batch": predicted["per_gpu_batch"],
            "world_size": predicted["gpus"],
            "num_nodes": predicted["nodes"],
            "variant": label,
            "group_hash": "predicted-" + predicted["source"].astype(str),
            "throughput_img_s": predicted["throughput"],
            "per_gpu_img_s": predicted["per_gpu"],
            "sample_unit": "images",
            "device": GPU,  # a prediction is for a system profile's GPUs
        }
    )
