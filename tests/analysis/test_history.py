"""ddlbench history: the store (one row per run, however often and through whichever roots it is read), the
change-point rule on synthetic series, and the whole command on real runs: tests/data/history holds one CPU
cell (simple_cnn, 1 rank) in three campaigns of two repeats each, the third made beside a CPU hog (two busy
loops pinned to the machine's two CPUs; tests/multiproc/test_history_real.py makes them afresh)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.history.index import index_roots
from analysis.history.store import read_store
from analysis.history.trend import CHANGE, FIRST, NO_NOISE, NONE, NOTHING_DIFFERS, change_points, check, differences

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "history"


def series(means: list[float], *, repeats: int = 2, noise: float = 0.01, seed: int = 0, **columns) -> pd.DataFrame:
    """Runs of one cell: a campaign per mean, `repeats` runs each, relative noise `noise`, a day apart."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, mean in enumerate(means):
        for r in range(repeats):
            rows.append(
                {
                    "series_hash": "s1",
                    "cell_hash": f"h{k}",
                    "label": "ddp-synthetic-resnet50-fp32-g8-n1-b64",
                    "campaign": f"c{k:02d}",
                    "started": f"2026-01-{k + 1:02d}T10:{r:02d}:00+0000",
                    "started_s": 1.767e9 + 86400 * k + 60 * r,
                    "throughput_img_s": mean * (1 + noise * rng.standard_normal()),
                    "marks": "",
                    "torch": "2.14.1",
                    "hosts": "n1",
                    "settings": "{}",
                    **{c: (v(k) if callable(v) else v) for c, v in columns.items()},
                }
            )
    return pd.DataFrame(rows)


def verdicts(changes: pd.DataFrame) -> list[str]:
    return list(changes["verdict"])


def test_a_steady_cell_has_no_change():
    changes = change_points(series([1000.0] * 8, noise=0.02))
    assert verdicts(changes) == [FIRST] + [NONE] * 7
    assert check(changes).empty


def test_a_step_down_is_one_change_where_it_happens_and_the_new_level_is_the_reference_after_it():
    runs = series([1000.0] * 4 + [800.0] * 4, noise=0.01, torch=lambda k: "2.14.1" if k < 4 else "2.15.0")
    changes = change_points(runs)
    assert verdicts(changes) == [FIRST, NONE, NONE, NONE, CHANGE, NONE, NONE, NONE]
    row = changes.iloc[4]
    assert row["campaign"] == "c04" and row["direction"] == "worse" and -22 < row["change_pct"] < -18
    assert row["differs"] == "torch 2.14.1 -> 2.15.0"
    assert check(changes).empty  # the newest campaign is level with the new reference


def test_a_change_in_the_newest_campaign_fails_the_check_and_a_rise_does_not():
    assert len(check(change_points(series([1000.0] * 5 + [700.0])))) == 1
    rise = change_points(series([1000.0] * 5 + [1300.0]))
    assert rise.iloc[-1]["verdict"] == CHANGE and rise.iloc[-1]["direction"] == "better" and check(rise).empty


def test_without_repeats_the_cells_own_history_is_the_noise():
    runs = series([1000.0] * 5 + [850.0], repeats=1, noise=0.01)
    changes = change_points(runs)
    assert verdicts(changes) == [FIRST, NO_NOISE, NO_NOISE, NONE, NONE, CHANGE]
    assert changes.iloc[-1]["noise_from"] == "history"


def test_noisy_repeats_hide_a_step_and_a_tiny_step_is_no_change_however_quiet():
    assert verdicts(change_points(series([1000.0] * 3 + [900.0], noise=0.15, seed=3)))[-1] == NONE
    assert verdicts(change_points(series([1000.0] * 3 + [980.0], noise=0.0001)))[-1] == NONE  # 2 % < 5 %


def test_differences_name_versions_hosts_settings_and_say_when_nothing_differs():
    before = series([1.0], settings='{"env.NCCL_ALGO": "Ring"}')
    after = series([1.0], hosts="n7", settings='{"env.NCCL_ALGO": "Tree"}')
    assert differences(before, after) == "hosts n1 -> n7; env.NCCL_ALGO Ring -> Tree"
    assert differences(before, before) == NOTHING_DIFFERS


@pytest.fixture
def golden(tmp_path) -> Path:
    root = tmp_path / "runs"
    shutil.copytree(GOLDEN, root)
    return root


def test_real_runs_one_change_at_the_campaign_beside_the_hog_none_at_the_second(golden):
    index_roots([golden], golden / "history.sqlite")
    runs = read_store(golden / "history.sqlite")
    assert len(runs) == 6 and runs["series_hash"].nunique() == 1 and runs["cell_hash"].nunique() == 3
    assert runs["throughput_img_s"].notna().all() and runs["step_s_cv"].notna().all()
    changes = change_points(runs)
    assert list(zip(changes["campaign"], changes["verdict"])) == [("a", FIRST), ("b", NONE), ("c", CHANGE)]
    assert changes.iloc[-1]["direction"] == "worse"
    assert changes.iloc[-1]["differs"] == NOTHING_DIFFERS  # the hog is in no record


def test_reading_the_same_and_overlapping_roots_again_counts_each_run_once(golden):
    store = golden.parent / "h.sqlite"
    first = index_roots([golden], store)
    again = index_roots([golden, golden / "c", golden], store)
    refreshed = index_roots([golden / "a"], store, refresh=True)
    assert (first.num_added, again.num_added, again.num_known) == (6, 0, 6)
    assert (refreshed.num_added, refreshed.num_updated) == (0, 2)
    copy = golden.parent / "copy"  # the same runs copied to another site's folder: the same runs
    shutil.copytree(golden / "b", copy / "b")
    assert index_roots([copy], store).num_added == 0
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 6


def test_history_check_exits_1_naming_the_cell_and_writes_its_page(golden, tmp_path, cli):
    result = cli("history", str(golden), "--check", "--html", str(tmp_path / "page"))
    assert result.returncode == 1, result.stderr
    assert "ddp-synthetic-simple_cnn-fp32-g1-n1-b64: campaign c" in result.stderr
    assert "change: ddp-synthetic-simple_cnn-fp32-g1-n1-b64 at campaign c" in result.stdout
    assert (tmp_path / "page" / "history.html").read_text().count("<table") == 2
    assert (tmp_path / "page" / "figures" / "history.png").is_file()
    # the first two campaigns alone: no change, the check passes
    shutil.rmtree(golden / "c")
    ok = cli("history", str(golden), "--store", str(tmp_path / "ab.sqlite"), "--check")
    assert ok.returncode == 0 and "--check: ok" in ok.stdout


def test_history_refuses_a_missing_root_in_one_line(cli, tmp_path):
    result = cli("history", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and "is not a directory" in result.stderr and "\n" not in result.stderr.strip()


def test_two_series_that_share_a_label_are_told_apart():
    """Two cells with the same framework, loader, model, precision and size but another setting (run.steps) are two
    series, and their labels say so (the series hash), never two identical labels."""
    import pandas as pd

    from analysis.history.trend import campaigns

    runs = pd.DataFrame(
        {
            "series_hash": ["aaaaaa11", "bbbbbb22", "aaaaaa11"],
            "cell_hash": ["c1", "c2", "c3"],
            "campaign": ["x", "x", "y"],
            "label": ["ddp-synthetic-simple_cnn-fp32-g1-n1-b8"] * 3,
            "started_s": [1.0, 2.0, 3.0],
            "started": ["d1", "d2", "d3"],
            "throughput_img_s": [10.0, 11.0, 12.0],
            "marks": ["", "", ""],
        }
    )
    labels = campaigns(runs).drop_duplicates("series")["label"].tolist()
    assert len(set(labels)) == 2 and all(" #" in label for label in labels), labels
