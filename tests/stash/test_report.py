"""Stash stall formulas, repeats, model view and cost on the golden paired study (tests/data/stash/make_golden.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from analysis import stash as report
from analysis.cells import run_throughput
from analysis.load import load_campaign
from launchers.stash_config import parse_stash

STUDY = Path(__file__).resolve().parent.parent / "data" / "stash" / "study"
PRICES = Path(__file__).resolve().parent.parent.parent / "conf" / "stash" / "prices.yaml"


@pytest.fixture(scope="module")
def study():
    campaign = load_campaign(STUDY)
    return campaign, run_throughput(campaign.steps, campaign.counted)


def test_golden_stalls_seconds_and_percent(study):
    _, per_run = study
    stalls = report.stall_table(per_run).set_index("stall")
    # medians over 2 repeats of the slowest rank's summed step times (make_golden.py's table)
    expect = {"interconnect": (1.1, 1.5), "network": (1.5, 3.0), "cpu": (1.5, 2.0), "disk": (2.0, 4.0)}
    assert list(stalls.index) == list(expect)
    for stall, (base, test) in expect.items():
        row = stalls.loc[stall]
        assert row["baseline_time_s"] == pytest.approx(base) and row["time_s"] == pytest.approx(test)
        assert row["stall_s"] == pytest.approx(test - base)
        assert row["stall_pct"] == pytest.approx(100 * (test - base) / base)
        assert row["num_repeats"] == 2 and row["baseline_num_repeats"] == 2
        assert row["per_gpu_batch"] == 4 and row["per_gpu_samples"] == 8
    assert stalls.loc["interconnect", "stall_pct"] == pytest.approx(36.3636, abs=1e-3)
    # t-interval: gpu1 (1.0, 1.2) and node (1.4, 1.6) each +-12.706 x 0.1414/sqrt(2) = 1.2706; combined in quadrature
    assert stalls.loc["interconnect", "stall_s_ci"] == pytest.approx(math.hypot(1.2706, 1.2706), rel=1e-3)
    assert stalls.loc["disk", "stall_s_ci"] == 0.0  # both sides repeat exactly


def test_sync_points_of_simple_cnn_and_resnet():
    view = report.model_view("simple_cnn", None, 10)
    # conv 3->16 (432 + 16), conv 16->32 (4608 + 32), linear 32->10 (320 + 10), fp32
    assert view == {"num_layers": 6, "grad_bytes": 4 * 5418, "num_buckets": 1}
    resnet50 = report.model_view("resnet", 50, 1000)
    assert resnet50["num_layers"] == 161 and resnet50["grad_bytes"] == 4 * 25_557_032
    assert 4 <= resnet50["num_buckets"] <= 6  # ~102 MB in a 1 MiB bucket then 25 MiB ones


def test_comm_time_formula():
    # (latency + G/(L*B)) * L with ring bytes 2(N-1)/N: 10 layers, 1 GB, 10 GB/s, 5 us, 4 GPUs
    t = report.comm_time_s(num_layers=10, grad_bytes=1e9, bandwidth_gb_s=10, latency_us=5, world_size=4)
    assert t == pytest.approx(10 * 5e-6 + 1.5 * 1e9 / 10e9)
    assert report.comm_time_s(num_layers=10, grad_bytes=1e9, bandwidth_gb_s=10, latency_us=5, world_size=1) == 0.0


def test_estimates_beside_the_stalls(study):
    campaign, per_run = study
    prices = report.load_prices(PRICES)
    table = report.estimates(report.stall_table(per_run), campaign.counted, prices, net_link=None).set_index("stall")
    link = prices["local_cpu"]
    g, steps = 4 * 5418, 2
    intra = report.comm_time_s(
        num_layers=6,
        grad_bytes=g,
        bandwidth_gb_s=link["interconnect_gb_s"],
        latency_us=link["interconnect_latency_us"],
        world_size=2,
    )
    inter = report.comm_time_s(
        num_layers=6,
        grad_bytes=g,
        bandwidth_gb_s=link["network_gb_s"],
        latency_us=link["network_latency_us"],
        world_size=2,
    )
    assert table.loc["interconnect", "estimate_s"] == pytest.approx(steps * intra)
    assert table.loc["network", "estimate_s"] == pytest.approx(steps * (inter - intra))
    assert math.isnan(table.loc["cpu", "estimate_s"]) and table.loc["cpu", "num_layers"] == 6


def test_cost_per_run_and_epoch(study):
    campaign, per_run = study
    costs = report.cost_table(
        per_run, campaign.counted, {"local_cpu": {"price_per_gpu_hour_usd": 3.6}}, epoch_samples=1000
    )
    cold = costs[(costs["cache"] == "cold")].iloc[0]
    # 2 GPUs x 4 s wall x $3.6/h = $0.008; epoch: 1000 samples / 4 img/s = 250 s -> 2 x 250/3600 x 3.6 = $0.5
    assert cold["usd_per_run"] == pytest.approx(0.008) and cold["usd_per_epoch"] == pytest.approx(0.5)
    unpriced = report.cost_table(per_run, campaign.counted, {}, epoch_samples=1000)
    assert unpriced["usd_per_run"].isna().all()
    assert "kwh_per_epoch" not in costs  # no run measured its energy (CPU runs)


def test_cost_per_epoch_uses_the_measured_energy(study):
    """Runs that measured their energy (NVML, summary.json's energy_j_per_sample) get kWh per epoch and, with the
    system's price per kWh, its dollars."""
    campaign, per_run = study
    runs = campaign.counted.assign(energy_j_per_sample=2.0)
    costs = report.cost_table(
        per_run, runs, {"local_cpu": {"price_per_gpu_hour_usd": 3.6, "price_per_kwh_usd": 0.3}}, epoch_samples=1_800_000
    )
    # 1.8 M samples x 2 J = 3.6 MJ = 1 kWh; x $0.3
    assert costs["kwh_per_epoch"].to_numpy() == pytest.approx(1.0)
    assert costs["usd_energy_per_epoch"].to_numpy() == pytest.approx(0.3)


def test_report_text_and_cli(cli):
    stash, _ = parse_stash(["stash.launcher=slurm"])
    text = report.stash_report(stash, None, root=STUDY)
    assert "cold cache made with: fadvise" in text and "usd_per_epoch" in text and "interconnect" in text
    done = cli(
        "stash",
        "report",
        "model=simple_cnn",
        "stash.loader=none",
        f"run.root={STUDY.parent}",
        "run.campaign=study",
        "run.per_gpu_batch=4",
    )
    assert done.returncode == 0, done.stderr
    assert "network estimate uses the emulated link: 1000 Mbit/s" in done.stdout
    missing = cli("stash", "report", "model=simple_cnn", "stash.loader=none", "run.root=/nonexistent")
    assert missing.returncode == 2 and "run 'ddlbench stash run' with the same overrides first" in missing.stderr


def test_missing_price_table_is_one_line():
    from benchmarks.errors import ConfigError

    with pytest.raises(ConfigError, match=r"stash.prices=/nope.yaml does not exist"):
        report.load_prices(Path("/nope.yaml"))


def test_the_model_view_builds_the_network_the_run_trained():
    """ShuffleNet needs its width, and the no-BatchNorm ablation has fewer gradient tensors than ResNet."""
    from analysis.stash import model_view

    assert model_view("shufflenet_v2", None, 10, width=0.5)["num_layers"] > 0
    plain, ablated = model_view("resnet", 18, 10), model_view("resnet", 18, 10, batch_norm=False)
    assert ablated["num_layers"] < plain["num_layers"]


def test_the_model_view_reads_an_ablation_from_a_table():
    """A run's settings come out of a DataFrame as numpy scalars: numpy's False is not `False`, and the
    no-BatchNorm ResNet was counted with its BatchNorm tensors (161 for ResNet-50 instead of 55)."""
    import numpy as np

    from analysis.stash import model_view

    from_table = model_view("resnet", 18, 10, batch_norm=np.False_)
    assert from_table == model_view("resnet", 18, 10, batch_norm=False)
