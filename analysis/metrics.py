"""Pure metric functions: DataFrame in, DataFrame out; no I/O, no plotting."""
from __future__ import annotations

import pandas as pd

# runs that differ only in the number of GPUs: one scaling curve
SCALING_GROUP = ["framework", "loader", "model", "precision", "per_gpu_batch"]


def weak_scaling(runs: pd.DataFrame, *, baseline_world_size: int | None = None) -> pd.DataFrame:
    """Add efficiency = per_gpu_img_s(N) / per_gpu_img_s(N0), N0 the smallest GPU count of each group
    (or `baseline_world_size`); repeats are reduced to their median first."""
    cells = (
        runs.groupby([*SCALING_GROUP, "world_size", "num_nodes"], as_index=False)
        .agg(throughput_img_s=("throughput_img_s", "median"), per_gpu_img_s=("per_gpu_img_s", "median"),
             num_repeats=("throughput_img_s", "size"))
    )

    groups = cells.groupby(SCALING_GROUP, dropna=False)
    n0 = groups["world_size"].transform("min") if baseline_world_size is None else baseline_world_size
    # NaN where a group has no run at the baseline size: no efficiency without a baseline
    baseline = cells["per_gpu_img_s"].where(cells["world_size"] == n0)
    cells["efficiency"] = cells["per_gpu_img_s"] / baseline.groupby([cells[c] for c in SCALING_GROUP], dropna=False).transform("max")
    return cells.sort_values([*SCALING_GROUP, "world_size"]).reset_index(drop=True)
