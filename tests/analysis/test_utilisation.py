"""Utilisation from telemetry (utilisation.utilisation_runs / _cells) and commbench's GPU tests (P2P matrix,
concurrent H2D): values against hand-computed ones, the figures, and the report sections only where the
data exist."""

from __future__ import annotations

import io
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from analysis.campaign_analysis import CampaignAnalysis
from analysis.figures import cell_labels
from analysis.interconnect import h2d_bandwidth, h2d_bars, p2p_heatmap, p2p_matrix
from analysis.report import assemble, build_report
from analysis.report_render import header
from analysis.synthetic_logs.campaign import write_campaign
from analysis.synthetic_logs.cells import SynthCell
from analysis.synthetic_logs.commbench import H2D_GB_S, gpu_test_records
from analysis.utilisation import UTILISATION, UTILISATION_PANELS, utilisation_bars, utilisation_cells, utilisation_runs

GB = 1e9


def _samples(run_id: str, rank: int, host: str | None, **fields: list) -> list[dict]:
    count = len(next(iter(fields.values())))
    return [
        {
            "run_id": run_id,
            "t_s": 1000.0 + i,
            "rank": rank,
            **({"host": host} if host else {}),
            **{k: v[i] for k, v in fields.items()},
        }
        for i in range(count)
    ]


@pytest.fixture
def telemetry() -> pd.DataFrame:
    """Run a: ranks 0 and 1 on host h1, rank 2 on h2, no NVLink; run b: one sample with NVLink rx only."""
    rows = [
        *_samples(
            "a",
            0,
            "h1",
            gpu_util_percent=[10, 50, 90],
            gpu_mem_used_bytes=[1 * GB, 3 * GB, 2 * GB],
            pcie_rx_bytes_s=[1 * GB, 2 * GB, 3 * GB],
            pcie_tx_bytes_s=[0, 1 * GB, 2 * GB],
            cpu_percent=[20, 40, 60],
            host_mem_used_bytes=[100 * GB, 120 * GB, 110 * GB],
        ),
        *_samples(  # its host's CPU % and memory are rank 0's: these repeats do not count
            "a",
            1,
            "h1",
            gpu_util_percent=[30, 70],
            gpu_mem_used_bytes=[4 * GB, 1 * GB],
            pcie_rx_bytes_s=[5 * GB, 5 * GB],
            pcie_tx_bytes_s=[1 * GB, 1 * GB],
            cpu_percent=[99, 99],
            host_mem_used_bytes=[500 * GB, 500 * GB],
        ),
        *_samples(
            "a",
            2,
            "h2",
            gpu_util_percent=[100],
            gpu_mem_used_bytes=[2 * GB],
            pcie_rx_bytes_s=[0],
            pcie_tx_bytes_s=[0],
            cpu_percent=[80],
            host_mem_used_bytes=[130 * GB],
        ),
        *_samples("b", 0, None, gpu_util_percent=[40], nvlink_rx_bytes_s=[2 * GB]),
    ]
    return pd.DataFrame(rows)


def test_utilisation_runs_by_hand(telemetry):
    out = utilisation_runs(telemetry).set_index("run_id")
    a = out.loc["a"]
    assert a["num_samples"] == 6
    assert a["gpu_util_pct_mean"] == pytest.approx(350 / 6)
    # samples 10 30 50 70 90 100: the 95th percentile at position 0.95 x 5 = 4.75, between 90 and 100
    assert a["gpu_util_pct_p95"] == pytest.approx(97.5)
    assert a["gpu_mem_used_gb_peak"] == pytest.approx(4.0)
    assert a["pcie_rx_gb_s_mean"] == pytest.approx(16 / 6)
    assert a["pcie_tx_gb_s_mean"] == pytest.approx(5 / 6)
    assert a["cpu_pct_mean"] == pytest.approx(50.0)  # rank 0 (h1) and rank 2 (h2): 20 40 60 80
    assert a["host_mem_used_gb_peak"] == pytest.approx(130.0)
    assert math.isnan(a["nvlink_rx_gb_s_mean"]) and math.isnan(a["nvlink_tx_gb_s_mean"])
    b = out.loc["b"]
    assert b["nvlink_rx_gb_s_mean"] == pytest.approx(2.0) and math.isnan(b["nvlink_tx_gb_s_mean"])
    assert math.isnan(b["cpu_pct_mean"]) and b["gpu_util_pct_p95"] == pytest.approx(40.0)


def test_utilisation_cells_mean_over_the_repeats_with_telemetry(telemetry):
    cell = {"framework": "ddp", "loader": "dali", "model": "resnet50", "precision": "amp_bf16", "per_gpu_batch": 64}
    per_run = pd.DataFrame(
        [
            {"run_id": "a", "cell_hash": "c1", **cell, "world_size": 3, "num_nodes": 2, "variant": ""},
            {"run_id": "b", "cell_hash": "c1", **cell, "world_size": 3, "num_nodes": 2, "variant": ""},
            {"run_id": "c", "cell_hash": "c2", **cell, "world_size": 1, "num_nodes": 1, "variant": ""},  # no telemetry
        ]
    )
    out = utilisation_cells(utilisation_runs(telemetry), per_run)
    assert list(out["cell_hash"]) == ["c1"]
    row = out.iloc[0]
    assert row["num_repeats"] == 2
    assert row["gpu_util_pct_mean"] == pytest.approx((350 / 6 + 40) / 2)
    assert row["nvlink_rx_gb_s_mean"] == pytest.approx(2.0)  # the one repeat that has it
    assert row["cpu_pct_mean"] == pytest.approx(50.0)
    assert list(out.columns[-len(UTILISATION) :]) == list(UTILISATION)


def test_no_telemetry_gives_no_rows():
    assert utilisation_runs(pd.DataFrame()).empty
    assert utilisation_cells(utilisation_runs(pd.DataFrame()), pd.DataFrame({"run_id": []})).empty


def test_p2p_matrix_and_h2d_from_the_gpu_tests_records():
    bench = pd.DataFrame([{**r, "source": "node/commbench.json"} for r in gpu_test_records(4)])
    matrix = p2p_matrix(bench)
    assert len(matrix) == 12  # every ordered pair of 4 GPUs
    pair = matrix.set_index(["src_gpu", "dst_gpu"])
    assert pair.loc[(0, 1), "p2p_gb_s"] == pytest.approx(300.0)
    assert pair.loc[(2, 0), "p2p_gb_s"] == pytest.approx(150.0)
    assert pair.loc[(3, 0), "p2p_gb_s"] == pytest.approx(20.0) and not pair.loc[(3, 0), "peer_access"]
    assert pair.loc[(0, 1), "p2p_latency_us"] == pytest.approx(2.0)
    assert pair.loc[(0, 3), "p2p_latency_us"] == pytest.approx(9.0)
    assert set(matrix["host"]) == {"jwb0100"}
    h2d = h2d_bandwidth(bench)
    assert list(h2d["rank"]) == [0, 1, 2, 3] and list(h2d["gpu"]) == [0, 1, 2, 3]
    assert (h2d["concurrent_gpus"] == 4).all()
    assert h2d["h2d_gb_s"].tolist() == pytest.approx([H2D_GB_S * 0.5 * (1 - 0.02 * g) for g in range(4)])


def test_commbench_without_the_gpu_tests_or_with_junk_indices():
    collectives = pd.DataFrame([{"op": "all_reduce", "size_bytes": 1024, "algbw_gb_s": 1.0, "source": "x"}])
    assert p2p_matrix(collectives).empty and h2d_bandwidth(collectives).empty
    junk = pd.DataFrame(
        [
            {"op": "p2p_copy", "src_gpu": "zero", "dst_gpu": 1, "algbw_gb_s": 5.0, "time_s": 1.0, "source": "x"},
            {"op": "p2p_copy", "src_gpu": 1.5, "dst_gpu": 0, "algbw_gb_s": 5.0, "time_s": 1.0, "source": "x"},
            {"op": "h2d_copy", "gpu": -1, "world_size": 2, "algbw_gb_s": 3.0, "source": "x"},
        ]
    )
    assert p2p_matrix(junk).empty
    h2d = h2d_bandwidth(junk)
    assert h2d["gpu"].isna().all() and h2d["concurrent_gpus"].tolist() == [2]


# --- figures ----------------------------------------------------------------------------------------


def _render(fig) -> None:
    fig.savefig(io.BytesIO(), format="png", dpi=40)


def _cells() -> pd.DataFrame:
    base = {"model": "resnet50", "precision": "amp_bf16", "per_gpu_batch": 64, "world_size": 2, "num_nodes": 1}
    values = {c: 50.0 for c in UTILISATION}
    return pd.DataFrame(
        [
            {"framework": "ddp", "loader": "dali", "variant": "", **base, **values, "gpu_util_pct_mean": 91.0},
            {"framework": "ddp", "loader": "dali", "variant": "framework.bucket_cap_mb=50", **base, **values},
            {
                "framework": "horovod",
                "loader": "native",
                "variant": "",
                **base,
                **values,
                "nvlink_rx_gb_s_mean": np.nan,
            },
        ]
    )


def test_utilisation_bars_one_bar_per_cell_in_every_panel():
    cells = _cells()
    fig = utilisation_bars(cells)
    _render(fig)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == [title for title, _ in UTILISATION_PANELS.values()]
    for ax in axes:
        assert len(ax.containers[0]) == len(cells)  # every cell its own bar (a NaN one is an empty bar)
    assert axes[0].containers[0][0].get_width() == pytest.approx(91.0)
    labels = [t.get_text() for t in axes[0].get_yticklabels()]
    assert labels == [  # what every bar shares (resnet50, 2 GPUs) is left out
        "PyTorch-DDP, DALI",
        "PyTorch-DDP, DALI, framework.bucket_cap_mb=50",
        "Horovod, native",
    ]


def test_utilisation_bars_leave_out_a_metric_no_cell_has():
    cells = _cells().assign(nvlink_rx_gb_s_mean=np.nan, pcie_tx_gb_s_mean=np.nan)
    fig = utilisation_bars(cells)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
    assert "NVLink rx, mean" not in titles and "PCIe tx (from GPU), mean" not in titles and len(titles) == 4


def test_cell_labels_number_cells_that_read_alike():
    cells = _cells().iloc[[0, 0]].reset_index(drop=True)
    assert cell_labels(cells) == [
        "PyTorch-DDP, DALI, resnet50, 2 GPUs #1",
        "PyTorch-DDP, DALI, resnet50, 2 GPUs #2",
    ]


def test_p2p_heatmap_and_h2d_bars():
    bench = pd.DataFrame(
        [{**r, "source": s} for s in ("a/commbench.json", "b/commbench.json") for r in gpu_test_records(4)]
    )
    fig = p2p_heatmap(p2p_matrix(bench))
    _render(fig)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2  # one heatmap per file and host
    assert sorted(t.get_text() for t in axes[0].texts) == sorted(["300"] * 6 + ["150"] * 4 + ["20"] * 2)
    fig = h2d_bars(h2d_bandwidth(bench))
    _render(fig)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2 and all(len(ax.containers[0]) == 4 for ax in axes)
    assert axes[0].containers[0][0].get_height() == pytest.approx(H2D_GB_S * 0.5)


# --- report -----------------------------------------------------------------------------------------


def _headings(blocks) -> list[str]:
    return [b.content for b in blocks if b.kind == "heading"]


SECTIONS = (
    "Utilisation",
    "GPU-to-GPU copies (commbench P2P)",
    "Host-to-device copies, all GPUs at once (commbench H2D)",
)


def _synth(root, *, telemetry: bool, commbench: bool):
    cells = [
        SynthCell("ddp", "dali", "resnet50", 2, 1, telemetry=telemetry),
        SynthCell("ddp", "dali", "resnet50", 2, 1, repeat=1, telemetry=telemetry),
        SynthCell("horovod", "native", "resnet50", 4, 2, telemetry=telemetry),
    ]
    write_campaign(root, cells, steps=12, warmup_steps=2, commbench=commbench)
    return root


def test_report_has_the_sections_and_figures_when_the_data_exist(tmp_path):
    root = _synth(tmp_path / "runs", telemetry=True, commbench=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        build_report(root, tmp_path / "rep", formats=("png",), jobs=1)
    text = (tmp_path / "rep" / "report.md").read_text()
    for heading in SECTIONS:
        assert f"## {heading}\n" in text
    assert "over the whole run" in text
    table = CampaignAnalysis(root).utilisation()
    assert len(table) == 2 and table["num_repeats"].tolist() == [2, 1]
    assert table["nvlink_rx_gb_s_mean"].notna().all() and table["host_mem_used_gb_peak"].notna().all()
    assert "| synth/commbench.json | jwb0100 | 0 | 1 | True | 300.0 | 2.0 |" in text
    for name in ("utilisation", "p2p_matrix", "h2d_bandwidth"):
        assert (tmp_path / "rep" / "figures" / f"{name}.png").stat().st_size > 1000


def test_report_leaves_the_sections_out_without_the_data(tmp_path):
    root = _synth(tmp_path / "runs", telemetry=False, commbench=False)
    blocks, figures = assemble(CampaignAnalysis(root).campaign)
    assert not set(SECTIONS) & set(_headings(blocks))
    assert not {"utilisation", "p2p_matrix", "h2d_bandwidth", "commbench"} & set(figures)


def test_report_of_collectives_only_and_telemetry_without_pcie_tx(campaign):
    """The golden campaign: commbench has collectives only; one run's telemetry lacks PCIe tx, NVLink and
    host memory, which its table leaves out."""
    blocks, figures = assemble(campaign)
    headings = _headings(blocks)
    assert "Utilisation" in headings and "Collective bandwidth (commbench)" in headings
    assert not set(SECTIONS[1:]) & set(headings) and "utilisation" in figures
    start = next(i for i, b in enumerate(blocks) if b.kind == "heading" and b.content == "Utilisation")
    table = blocks[start + 2].content  # the heading, its paragraph, the table
    shown = {header(c) for c in ("gpu_util_pct_mean", "pcie_rx_gb_s_mean", "cpu_pct_mean")}  # in the README's words
    assert shown <= set(table.columns)
    assert not {header(c) for c in ("pcie_tx_gb_s_mean", "nvlink_rx_gb_s_mean", "host_mem_used_gb_peak")} & set(
        table.columns
    )
