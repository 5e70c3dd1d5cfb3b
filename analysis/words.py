"""The words a reader sees for a column: one mapping from the tables' column names to the README's words
('img/s 95% CI low', 'peak memory GiB (reserved)'), used by `results`, every table of the report and any axis
that names a column. A column the mapping lacks reads by rule (report_render.header: per_gpu_img_s ->
'per GPU img/s'), so that no table shows a raw snake_case name.
"""

from __future__ import annotations

import pandas as pd

from analysis.device import RankWords

# {axis}: the rank count's name ("GPUs", "ranks (CPU)"); {per}: one rank ("GPU", "rank"); {mode}: weak or strong
COLUMN_WORDS = {
    "campaign": "campaign",
    "framework": "framework",
    "loader": "loader",
    "model": "model",
    "precision": "precision",
    "device": "device",
    "per_gpu_batch": "batch/{per}",
    "global_batch": "global batch",
    "world_size": "{axis}",
    "num_nodes": "nodes",
    "throughput_img_s": "img/s",
    "throughput_img_s_mean": "img/s mean",
    "throughput_img_s_std": "img/s std",
    "throughput_img_s_ci_low": "img/s 95% CI low",
    "throughput_img_s_ci_high": "img/s 95% CI high",
    "interval": "img/s 95% CI",
    "per_gpu_img_s": "img/s/{per}",
    "num_repeats": "repeats",
    "efficiency": "{mode} eff.",
    "baseline_gpus": "vs {per}s",
    "peak_allocated_gib": "peak memory GiB (allocated)",
    "peak_reserved_gib": "peak memory GiB (reserved)",
    "mfu": "MFU",
    "energy_j_per_sample": "J/sample",
    "staging_s": "staging s",
    "marks": "marks",
    "variant": "variant",
}


def column_word(column: object, words: RankWords, *, mode: str = "weak") -> str:
    """How `column` reads in a table header or on an axis: COLUMN_WORDS, its rates in the table's sample unit
    (_seq_s: seq/s), else by rule (report_render.header)."""
    from analysis.report_render import header

    name = str(column)
    for suffix, rate in (("_seq_s", "seq/s"),):  # a table of sequences (report_blocks.in_unit)
        if suffix in name and name.replace(suffix, "_img_s") in COLUMN_WORDS:
            return column_word(name.replace(suffix, "_img_s"), words, mode=mode).replace("img/s", rate)
    if name in COLUMN_WORDS:
        return COLUMN_WORDS[name].format(axis=words.axis, per=words.per, mode=mode)
    return header(name)


def worded(table: pd.DataFrame, words: RankWords, *, mode: str = "weak") -> tuple[pd.DataFrame, dict[str, str]]:
    """(the table with its columns in words, {column: its words} for those renamed); a column the mapping
    lacks is first named for the ranks' device (device.rank_columns: per_rank_samples on CPUs)."""
    from analysis.device import rank_columns

    ranked = dict(zip(table.columns, rank_columns(table, words).columns))
    renamed = {c: column_word(c if c in COLUMN_WORDS else ranked[c], words, mode=mode) for c in table.columns}
    renamed = {c: w for c, w in renamed.items() if w != c}
    return table.rename(columns=renamed), renamed
