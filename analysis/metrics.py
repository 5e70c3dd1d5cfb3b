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

    def _efficiency(group: pd.DataFrame) -> pd.Series:
        n0 = baseline_world_size if baseline_world_size is not None else group["world_size"].min()
        base = group.loc[group["world_size"] == n0, "per_gpu_img_s"]
        return group["per_gpu_img_s"] / base.iloc[0] if len(base) else pd.Series(float("nan"), index=group.index)

    cells["efficiency"] = cells.groupby(SCALING_GROUP, group_keys=False)[cells.columns.tolist()].apply(_efficiency)
    return cells.sort_values([*SCALING_GROUP, "world_size"]).reset_index(drop=True)
