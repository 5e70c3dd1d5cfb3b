"""What the ranks ran on, said once: a run's device (GPU or CPU) from what it recorded, and the words every
table, axis, title and label uses for its ranks ("GPUs" on GPUs, "ranks (CPU)" on CPUs), so that a CPU
campaign is never read as a GPU one. results, report, compare, paper and their figures all ask here.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

GPU, CPU, MIXED = "gpu", "cpu", "mixed"
# a config's system.device (benchmarks/schema.py's Choice) as this module names it
_CONFIG_DEVICE = {"cuda": GPU, "cpu": CPU}
_NO_GPUS = {"none", "[]", "", "null", "nan", "<na>"}


def run_devices(runs: pd.DataFrame) -> pd.Series:
    """Per run (the runs table's index): GPU or CPU. The run's config.yaml system.device (a CPU run on a
    GPU host is a CPU run); where a run records none, GPU when its meta.json lists GPUs, else CPU; a
    table with neither (hand-built) reads as GPU, the suite's default."""
    none = pd.Series(pd.NA, index=runs.index, dtype="object")
    config = (
        runs.get("config.system.device", none)
        .astype("object")
        .map(lambda v: _CONFIG_DEVICE.get(str(v).split(":")[0].lower(), pd.NA) if isinstance(v, str) else pd.NA)
    )
    if "meta.hardware.gpus" in runs:
        listed = ~runs["meta.hardware.gpus"].astype(str).str.lower().isin(_NO_GPUS)
        meta = listed.map({True: GPU, False: CPU}).where(runs["meta.hardware.gpus"].notna(), pd.NA)
    else:
        meta = none
    return config.where(config.notna(), meta).where(lambda d: d.notna(), GPU).astype("object")


def with_device(cell_table: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """cell_table (keyed by cell_hash) with each cell's `device` (run_devices of its runs; a device is a
    setting, so a cell's runs share it); GPU where the table has no cell_hash."""
    if "cell_hash" not in cell_table or "cell_hash" not in runs or runs.empty:
        return cell_table.assign(device=GPU) if "device" not in cell_table else cell_table
    devices = pd.Series(run_devices(runs).to_numpy(), index=runs["cell_hash"].to_numpy())
    devices = devices[~devices.index.duplicated()]
    return cell_table.assign(device=cell_table["cell_hash"].map(devices).astype("object").fillna(GPU))


def device_of(frame: pd.DataFrame | pd.Series | str | None) -> str:
    """GPU, CPU or MIXED: of a frame's `device` column, a Series of devices or one device; GPU for a
    frame without one."""
    if frame is None:
        return GPU
    if isinstance(frame, str):
        return _CONFIG_DEVICE.get(frame, frame) if frame in (*_CONFIG_DEVICE, GPU, CPU, MIXED) else GPU
    values = frame if isinstance(frame, pd.Series) else frame.get("device")
    if values is None:
        return GPU
    found = {_CONFIG_DEVICE.get(str(v), str(v)) for v in values.dropna()}
    return MIXED if len(found) > 1 else found.pop() if found else GPU


@dataclass(frozen=True, slots=True)
class RankWords:
    """How a table, axis or title names the ranks of one device (or of a mix)."""

    axis: str  # an axis or column of rank counts: "GPUs", "ranks (CPU)"
    one: str  # one of them: "GPU", "CPU rank"
    many: str  # several: "GPUs", "CPU ranks"
    per: str  # a rate or batch per one: "GPU" (img/s/GPU), "rank" (img/s/rank)
    column: str  # the word in a column's name: per_gpu_img_s, per_rank_img_s; baseline_gpus, baseline_ranks

    def count(self, n: object) -> str:
        """'1 GPU', '2 GPUs', '2 CPU ranks'."""
        return f"{n} {self.one if str(n) == '1' else self.many}"


WORDS = {
    GPU: RankWords(axis="GPUs", one="GPU", many="GPUs", per="GPU", column="gpu"),
    CPU: RankWords(axis="ranks (CPU)", one="CPU rank", many="CPU ranks", per="rank", column="rank"),
    MIXED: RankWords(axis="ranks (GPU or CPU)", one="rank", many="ranks", per="rank", column="rank"),
}


def rank_words(frame: pd.DataFrame | pd.Series | str | None = None) -> RankWords:
    """The words for the ranks of a frame's cells (its `device` column), of a Series of devices or of one
    device: GPUs where they all ran on GPUs, "ranks (CPU)" where on CPUs, "ranks" for a mix."""
    return WORDS[device_of(frame)]


# the report's and results' columns whose names say GPU: on CPU ranks (or a mix) they say rank
_GPU_COLUMNS = ("per_gpu_", "baseline_gpus")


def rank_columns(table: pd.DataFrame, words: RankWords) -> pd.DataFrame:
    """A table's per_gpu_* and baseline_gpus columns named for its ranks' device (per_rank_img_s,
    baseline_ranks on CPUs); a GPU table unchanged."""
    if words.column == "gpu":
        return table
    renamed = {
        c: c.replace("per_gpu_", f"per_{words.column}_").replace("baseline_gpus", f"baseline_{words.column}s")
        for c in table.columns
        if isinstance(c, str) and c.startswith(_GPU_COLUMNS)
    }
    return table.rename(columns=renamed)


def device_names(runs: pd.DataFrame) -> pd.Series:
    """Per run, what it ran on, for a reader: the GPUs' names (meta.json), or 'CPU (N cores)' (meta.json's
    cpu_count; the CPU's model where a meta.json records it)."""
    devices = run_devices(runs)
    gpus = runs.get("meta.hardware.gpus", pd.Series(pd.NA, index=runs.index, dtype="object"))
    model = runs.get("meta.hardware.cpu_model", pd.Series(pd.NA, index=runs.index, dtype="object"))
    cores = runs.get("meta.hardware.cpu_count", pd.Series(pd.NA, index=runs.index, dtype="object"))
    # a run that stopped before it wrote config.yaml and meta.json (a failed start) says nothing of its device
    said = runs.get("config.system.device", pd.Series(pd.NA, index=runs.index)).notna() | gpus.notna() | cores.notna()

    def name(device: str, gpu: object, cpu: object, count: object, known: bool) -> str:
        if not known:
            return "not recorded (no config.yaml or meta.json)"
        if device == GPU:
            text = str(gpu) if isinstance(gpu, str) and gpu.lower() not in _NO_GPUS else ""
            return f"GPU: {_gpu_list(text)}" if text else "GPU (name not recorded)"
        what = str(cpu) if isinstance(cpu, str) and cpu else "CPU (model not recorded)"
        what = what if what.startswith("CPU") else f"CPU: {what}"
        number = pd.to_numeric(pd.Series([count]), errors="coerce").iloc[0]
        return f"{what}, {int(number)} cores" if pd.notna(number) else what

    return pd.Series(
        [name(*values) for values in zip(devices, gpus, model, cores, said)], index=runs.index, dtype="object"
    )


def _gpu_list(text: str) -> str:
    """meta.json's GPU list as text (['A100', 'A100']) -> 'A100 x2'."""
    import json

    try:
        names = json.loads(text.replace("'", '"'))
    except json.JSONDecodeError:
        return text
    if not isinstance(names, list):
        return text
    distinct = sorted({str(n) for n in names})
    return " + ".join(f"{n} x{names.count(n)}" if names.count(n) > 1 else n for n in distinct)
