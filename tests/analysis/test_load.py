"""analysis.load: run directories -> runs / steps / telemetry / commbench tables."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest

from analysis import load
from analysis.load import LogWarning, load_campaign, load_runs, ranklogs
from tests.analysis.conftest import CAMPAIGN, HAND


def test_hand_runs_are_completed_with_config_and_provenance(hand):
    runs = hand.runs.set_index("cell")
    assert list(runs["status"]) == ["completed", "completed"]
    g2 = runs.loc["ddp-synthetic-simple_cnn-g2-n1-b4-r0"]
    assert g2["config.framework.name"] == "ddp" and g2["config.run.per_gpu_batch"] == 4
    assert g2["meta.git_sha"] == "abc123" and g2["meta.versions.torch"] == "2.14.1"
    assert g2["world_size"] == 2 and str(runs["world_size"].dtype) == "Int64"
    assert "meta.env.OMP_NUM_THREADS" not in runs  # the environment stays in meta.json


def test_steps_one_row_per_rank_per_step(hand):
    steps = hand.steps
    assert len(steps) == 3 + 2 * 3
    g2 = steps[steps["run_id"] == "ddp-synthetic-simple_cnn-g2-n1-b4-r0"]
    assert sorted(g2["rank"].unique()) == [0, 1]
    assert g2["warmup"].sum() == 2
    assert g2.loc[(g2["rank"] == 1) & (g2["step"] == 2), "step_s"].item() == pytest.approx(0.6)
    g1 = steps[steps["run_id"] == "ddp-synthetic-simple_cnn-g1-n1-b4-r0"]
    assert g1["comm_s"].isna().all()  # null where the framework does not time collectives


def test_campaign_lists_excluded_runs_with_reasons(campaign):
    excluded = campaign.excluded.set_index("cell")
    assert excluded.loc["ddp-native-resnet50-g2-n1-b64-r1", "status"] == "failed"
    assert "NCCL error" in excluded.loc["ddp-native-resnet50-g2-n1-b64-r1", "reason"]
    assert excluded.loc["ddp-native-resnet50-g2-n1-b64-r2", "status"] == "incomplete"
    assert "no summary.json" in excluded.loc["ddp-native-resnet50-g2-n1-b64-r2", "reason"]
    assert excluded.loc["ddp-native-resnet50-g1-n1-b64-r3", "status"] == "unsupported"
    assert "schema_version 2" in excluded.loc["ddp-native-resnet50-g1-n1-b64-r3", "reason"]
    # never counted: no step of an excluded run is in the steps table
    assert not set(campaign.steps["run_id"].astype(str)) & set(campaign.excluded["run_id"])
    assert len(campaign.counted) == 13  # 12 clean + 1 with a corrupt line


def test_corrupt_line_is_skipped_with_a_warning():
    with pytest.warns(LogWarning, match=r"rank1\.jsonl: skipped 1 unreadable line"):
        campaign = load_campaign(CAMPAIGN)
    run = "small/ddp-dali-resnet50-g2-n1-b64-r1"
    assert run in set(campaign.counted["run_id"])  # one bad line does not exclude the run
    steps = campaign.steps[campaign.steps["run_id"] == run]
    assert len(steps) == 2 * 8 - 1
    assert campaign.problems["problem"].str.contains("corrupt line").any()


def test_telemetry_and_commbench(campaign):
    assert {"t_s", "rank", "gpu", "gpu_util_percent", "host", "run_id"} <= set(campaign.telemetry.columns)
    assert set(campaign.telemetry["run_id"]) == {"small/ddp-dali-resnet50-g2-n1-b64-r1"}
    bench = campaign.commbench
    assert set(bench["op"]) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert {"size_bytes", "algbw_gb_s", "busbw_gb_s", "time_s", "world_size", "backend", "source"} <= set(bench.columns)


def test_pure_python_fallback_gives_the_same_steps(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = load_campaign(CAMPAIGN).steps
        monkeypatch.setattr(ranklogs, "HAVE_ARROW", False)
        slow = load_campaign(CAMPAIGN).steps
    key = ["run_id", "rank", "step"]
    fast = fast.assign(run_id=fast["run_id"].astype(str)).sort_values(key).reset_index(drop=True)
    slow = slow.assign(run_id=slow["run_id"].astype(str)).sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(fast[list(slow.columns)], slow, check_dtype=False)


def test_load_runs_does_not_read_rank_logs():
    runs = load_runs(HAND)
    assert set(runs["status"]) == {"completed"} and "throughput_img_s" in runs


def test_parquet_export_round_trip(tmp_path, hand):
    written = load.export_parquet(hand, tmp_path / "pq")
    assert [p.name for p in written] == [
        "runs.parquet",
        "steps.parquet",
        "telemetry.parquet",
        "commbench.parquet",
        "problems.parquet",
        "traces.parquet",
    ]
    steps = pd.read_parquet(tmp_path / "pq" / "steps.parquet")
    assert len(steps) == len(hand.steps) and steps["step_s"].sum() == pytest.approx(hand.steps["step_s"].sum())


def test_parquet_export_never_overwrites(tmp_path, hand):
    from benchmarks.errors import ConfigError

    (tmp_path / "pq").mkdir()
    (tmp_path / "pq" / "keep.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"--parquet .* not empty .* pass a new folder"):
        load.export_parquet(hand, tmp_path / "pq")


def test_empty_directory(tmp_path):
    campaign = load_campaign(tmp_path)
    assert campaign.runs.empty and campaign.steps.empty and list(campaign.counted.columns)


@pytest.mark.parametrize(
    "model, name",
    [
        ("{arch: resnet, depth: 50, batch_norm: false, num_classes: 10}", "resnet50_nobn"),
        ("{arch: resnet, depth: 18, residual: false, num_classes: 10}", "resnet18_noskip"),
        ("{arch: vgg, depth: 11, batch_norm: true, num_classes: 10}", "vgg11_bn"),
        ("{arch: shufflenet_v2, width: 0.5, num_classes: 10}", "shufflenet_v2_x0_5"),
    ],
)
def test_the_model_name_comes_from_every_key_that_shapes_the_network(copy_of, model, name):
    """Two runs of different networks are never one model in the tables (the ablations, VGG's BatchNorm,
    ShuffleNet's width)."""
    import re

    from analysis.load import load_campaign
    from tests.analysis.conftest import HAND

    root = copy_of(HAND)
    config = next(root.glob("*/config.yaml"))
    config.write_text(re.sub(r"(?m)^model:\n(  .*\n)+", f"model: {model}\n", config.read_text()))
    runs = load_campaign(root).runs
    assert name in set(runs["model"])
