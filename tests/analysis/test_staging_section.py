"""analysis/staging.py: staging time and GB/s per node count, only over the staged runs."""

from __future__ import annotations

import math

import pandas as pd

from analysis.staging import COLUMNS, staging_by_nodes


def test_staging_per_node_count_over_the_staged_runs_only():
    runs = pd.DataFrame(
        {
            "num_nodes": [1, 1, 2, 2],
            "staging_s": [2.0, 4.0, 5.0, None],  # the last run read data.path itself
            "staging_gb_s_per_node": [1.0, 0.5, 0.4, None],
            "staging_bytes": [2e9, 2e9, 2e9, None],
            "startup_s": [10.0, 12.0, 15.0, 3.0],
        }
    )
    table = staging_by_nodes(runs)
    assert list(table.columns) == COLUMNS
    assert table.to_dict("list") == {
        "data_set": ["?", "?"],
        "scratch": ["?", "?"],
        "num_nodes": [1, 2],
        "num_runs": [2, 1],
        "staging_s": [3.0, 5.0],
        "staging_max_s": [4.0, 5.0],
        "staging_gb_s_per_node": [0.75, 0.4],
        "staged_gb": [2.0, 2.0],
        "startup_s": [11.0, 15.0],
    }
    assert staging_by_nodes(runs.assign(staging_s=math.nan)).empty  # no staged run: no section
    assert staging_by_nodes(runs.drop(columns="staging_s")).empty  # summaries from before the field


def test_two_data_sets_are_never_averaged_together():
    runs = pd.DataFrame(
        {
            "config.data.path": ["/p/imagenet", "/p/tiny"],
            "num_nodes": [1, 1],
            "staging_s": [100.0, 1.0],
            "staging_gb_s_per_node": [1.4, 0.1],
            "staging_bytes": [140e9, 1e8],
            "startup_s": [110.0, 5.0],
        }
    )
    table = staging_by_nodes(runs)
    assert table[["data_set", "staging_s", "staged_gb"]].to_dict("list") == {
        "data_set": ["/p/imagenet", "/p/tiny"],
        "staging_s": [100.0, 1.0],
        "staged_gb": [140.0, 0.1],
    }


def test_each_cell_gets_its_runs_mean_staging_seconds_and_an_unstaged_cell_none():
    from analysis.staging import with_staging

    cells = pd.DataFrame({"cell_hash": ["a", "b"], "throughput_img_s": [10.0, 20.0]})
    runs = pd.DataFrame({"cell_hash": ["a", "a", "b"], "staging_s": [2.0, 4.0, None]})
    shown = with_staging(cells, runs)
    assert shown["staging_s"].iloc[0] == 3.0 and math.isnan(shown["staging_s"].iloc[1])
    assert with_staging(cells, runs.drop(columns="staging_s"))["staging_s"].isna().all()  # older summaries


def test_two_scratches_of_one_data_set_are_two_rows():
    """system.local_scratch is no part of the cell, but /dev/shm and an NVMe copy at two rates."""
    runs = pd.DataFrame(
        {
            "config.data.path": ["/p/imagenet"] * 2,
            "config.system.local_scratch": ["/dev/shm", "$TMPDIR"],
            "num_nodes": [1, 1],
            "staging_s": [100.0, 300.0],
            "staging_gb_s_per_node": [1.4, 0.47],
            "staging_bytes": [140e9, 140e9],
            "startup_s": [110.0, 310.0],
        }
    )
    table = staging_by_nodes(runs)
    assert table[["scratch", "staging_s"]].to_dict("list") == {
        "scratch": ["$TMPDIR", "/dev/shm"],
        "staging_s": [300.0, 100.0],
    }
