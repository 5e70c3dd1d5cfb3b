"""Stash stalls: the stall arithmetic (`stash_stalls`, one definition for `ddlbench report` and `ddlbench
stash report`), the stall bars and the report's Stash section; and `ddlbench stash report`: the stalls with
repeats, the model-level view and cost.

For `ddlbench stash report`:
here: repeats of each side (t-intervals), the synchronisation points and gradient bytes of each model,
the latency-vs-bandwidth estimate beside the measured stall, and $ per run and per epoch.

Synchronisation points L = the model's gradient tensors (parameters with requires_grad): the unit the
seed study's model counts (one all-reduce per layer's gradient, each paying the latency once). DDP
fuses them into buckets (bucket_cap_mb, first bucket 1 MiB) and Horovod into fusion buffers, which
lowers the latency term: the bucket count is printed beside L, and the estimate is shown for both.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import PercentFormatter

from analysis.cells import repeat_stats, run_throughput
from analysis.figures import finish, panels, paper_style, pretty
from analysis.palette import FULL_WIDTH_IN, STALL_COLORS
from analysis.report_blocks import Block, Report, add_figure
from benchmarks.adapter_config import config_default
from benchmarks.errors import ConfigError
from benchmarks.frameworks.configs import DDPConfig
from benchmarks.gradients import Gradient

DDP_BUCKET_CAP_MB = config_default(DDPConfig, "bucket_cap_mb")  # runs whose config lacks the key ran with it


def sync_points(model, *, bucket_cap_mb: float = DDP_BUCKET_CAP_MB) -> dict[str, int]:
    """num_layers (gradient tensors), grad_bytes (their size: gradients have the parameters' dtype) and
    num_buckets (DDP's buckets, DDPConfig.gradient_messages, over the gradients in reverse registration
    order: the order DDP fills them in)."""
    grads = [p for p in model.parameters() if p.requires_grad]
    sizes = [p.numel() * p.element_size() for p in grads]
    in_order = [Gradient(str(k), size, 0.0) for k, size in enumerate(reversed(sizes))]
    ddp = DDPConfig(bucket_cap_mb=bucket_cap_mb)
    return {
        "num_layers": len(grads),
        "grad_bytes": int(sum(sizes)),
        "num_buckets": len(ddp.gradient_messages(in_order, amp=False)),
    }


# the model keys besides arch and depth that shape the network (benchmarks/models/configs.py)
MODEL_SHAPE_KEYS = ("width", "batch_norm", "residual", "size")


def model_view(
    arch: str, depth: int | None, num_classes: int, *, bucket_cap_mb: float = DDP_BUCKET_CAP_MB, **shape
) -> dict[str, int]:
    """sync_points of the model as the benchmark builds it (benchmarks.models.build_model); `shape`: the
    model's other keys the run recorded (width, batch_norm, residual)."""
    import torch

    from benchmarks.models import build_model

    # values read from a table are numpy scalars: build_model tests `batch_norm is not False`, which a numpy
    # False passes (a ResNet-50 without batch norm counted as one with it)
    shape = {k: v.item() if hasattr(v, "item") else v for k, v in shape.items()}
    # on the meta device: shapes and dtypes without memory or initialisation (VGG-16: 4.2 s -> 0.03 s)
    with torch.device("meta"):
        model = build_model(arch=arch, depth=depth, num_classes=num_classes, seed=0, **shape)
    return sync_points(model, bucket_cap_mb=bucket_cap_mb)


def comm_time_s(
    *, num_layers: int, grad_bytes: float, bandwidth_gb_s: float, latency_us: float, world_size: int
) -> float:
    """One step's all-reduce time, T ~ (latency + G/(L*B)) * L, with the ring's 2(N-1)/N bytes per GPU on
    the bandwidth term (0 on one GPU)."""
    if world_size <= 1:
        return 0.0
    ring = 2.0 * (world_size - 1) / world_size
    return (latency_us * 1e-6 + ring * grad_bytes / (num_layers * bandwidth_gb_s * 1e9)) * num_layers


def load_prices(path: Path) -> dict[str, dict[str, float]]:
    from omegaconf import OmegaConf

    if not Path(path).is_file():
        raise ConfigError(f"stash.prices={path} does not exist; pass the price table (default conf/stash/prices.yaml)")
    table = OmegaConf.to_container(OmegaConf.load(path))
    if not isinstance(table, dict) or not isinstance(table.get("systems"), dict):
        raise ConfigError(f"stash.prices={path} has no 'systems:' mapping; see conf/stash/prices.yaml for the format")
    return table["systems"]


def _repeats(per_run: pd.DataFrame) -> pd.DataFrame:
    key = [*STASH_PAIR, "loader", "cache", "world_size", "num_nodes"]
    table = per_run.copy()
    table["cache"] = table["cache"].fillna("warm") if "cache" in table else "warm"
    table["per_gpu_samples"] = table["per_gpu_samples"].round(6)
    stats = repeat_stats(table, value="time_s", by=key)
    stats["time_s_ci"] = (stats["time_s_ci_high"] - stats["time_s_ci_low"]) / 2
    return stats[[*key, "num_repeats", "time_s_ci"]]


def stall_table(per_run: pd.DataFrame) -> pd.DataFrame:
    """stash_stalls + repeats and the t-interval half widths of both sides (NaN for one repeat)."""
    stalls = stash_stalls(per_run)
    if stalls.empty:
        return stalls
    reps = _repeats(per_run)
    stalls = stalls.copy()
    stalls["per_gpu_samples"] = stalls["per_gpu_samples"].round(6)
    # the test side of each stall; its baseline is the row the stall names (see stash_stalls)
    base_of = {
        "interconnect": ("synthetic", "warm", 1, 1),
        "network": ("synthetic", "warm", None, 1),
        "cpu": ("synthetic", "warm", None, None),
        "disk": (None, "warm", None, None),
    }
    test_cache = {"interconnect": "warm", "network": "warm", "cpu": "warm", "disk": "cold"}
    rows = []
    for r in stalls.itertuples(index=False):
        row = r._asdict()
        pair = {k: row[k] for k in STASH_PAIR}
        test = reps
        for k, v in {
            **pair,
            "loader": row["loader"],
            "cache": test_cache[row["stall"]],
            "world_size": row["world_size"],
            "num_nodes": row["num_nodes"],
        }.items():
            test = test[test[k] == v]
        loader, cache, world, nodes = base_of[row["stall"]]
        base = reps
        for k, v in {
            **pair,
            "loader": loader or row["loader"],
            "cache": cache,
            "world_size": world or row["world_size"],
            "num_nodes": nodes or row["num_nodes"],
        }.items():
            base = base[base[k] == v]
        row["num_repeats"] = int(test["num_repeats"].iloc[0]) if len(test) else 0
        row["baseline_num_repeats"] = int(base["num_repeats"].iloc[0]) if len(base) else 0
        half = math.hypot(
            test["time_s_ci"].iloc[0] if len(test) else np.nan, base["time_s_ci"].iloc[0] if len(base) else np.nan
        )
        row["stall_s_ci"] = half
        rows.append(row)
    return pd.DataFrame(rows)


def cost_table(per_run: pd.DataFrame, runs: pd.DataFrame, prices: dict, *, epoch_samples: int) -> pd.DataFrame:
    """Per configuration (median over repeats): $ per run (GPUs x measured wall time x price) and $ per
    epoch (GPUs x epoch_samples / throughput x price); where the runs measured their energy (summary.json's
    energy_j_per_sample: NVML over the measured steps), kWh per epoch (epoch_samples x J/sample) and, with the
    system's price_per_kwh_usd, its $ per epoch."""
    energy = "energy_j_per_sample" in runs and runs["energy_j_per_sample"].notna().any()
    columns = ["run_id", "wall_s", "config.system.name", *(["energy_j_per_sample"] if energy else [])]
    info = runs[columns].rename(columns={"config.system.name": "system"})
    table = per_run.merge(info.astype({"run_id": str}), on="run_id", how="left")
    table["cache"] = table["cache"].fillna("warm") if "cache" in table else "warm"
    key = ["system", "model", "loader", "cache", "per_gpu_batch", "world_size", "num_nodes"]
    out = (
        table.groupby(key, dropna=False, observed=True)
        .agg(
            num_repeats=("run_id", "size"),
            wall_s=("wall_s", "median"),
            throughput_img_s=("throughput_img_s", "median"),
            **({"energy_j_per_sample": ("energy_j_per_sample", "median")} if energy else {}),
        )
        .reset_index()
    )
    price = out["system"].map(lambda s: (prices.get(s) or {}).get("price_per_gpu_hour_usd", np.nan)).astype("float64")
    out["price_per_gpu_hour_usd"] = price
    out["usd_per_run"] = price * out["world_size"] * out["wall_s"] / 3600
    out["epoch_h"] = epoch_samples / out["throughput_img_s"] / 3600
    out["usd_per_epoch"] = price * out["world_size"] * out["epoch_h"]
    if energy:
        out["kwh_per_epoch"] = out.pop("energy_j_per_sample").astype("float64") * epoch_samples / 3.6e6
        per_kwh = out["system"].map(lambda s: (prices.get(s) or {}).get("price_per_kwh_usd", np.nan))
        out["usd_energy_per_epoch"] = out["kwh_per_epoch"] * per_kwh.astype("float64")
    return out


def estimates(stalls: pd.DataFrame, runs: pd.DataFrame, prices: dict, *, net_link: dict | None) -> pd.DataFrame:
    """Per stall row: the model's L, G and buckets, and the estimated comm stall over the measured steps
    (interconnect: T(N, interconnect); network: T(N, network) - T(N, interconnect)); NaN for cpu/disk.
    net_link {bandwidth_gb_s, latency_us} replaces the table's network figures (an emulated link)."""
    cfg_cols = {
        "config.model.arch": "arch",
        "config.model.depth": "depth",
        "config.model.num_classes": "num_classes",
        "config.system.name": "system",
        "config.framework.bucket_cap_mb": "bucket_cap_mb",
        **{f"config.model.{key}": key for key in MODEL_SHAPE_KEYS},
    }
    present = {k: v for k, v in cfg_cols.items() if k in runs}
    models = runs[["model", *present]].rename(columns=present).drop_duplicates("model").set_index("model")
    views: dict[str, dict] = {}
    out = stalls.copy()
    for column in ("num_layers", "grad_mb", "num_buckets", "estimate_s", "estimate_buckets_s"):
        out[column] = np.nan
    for i, r in out.iterrows():
        if r["model"] not in models.index:
            continue
        m = models.loc[r["model"]]
        if r["model"] not in views:
            depth = None if pd.isna(m.get("depth", np.nan)) else int(m["depth"])
            cap = (
                float(m["bucket_cap_mb"])
                if "bucket_cap_mb" in m and not pd.isna(m["bucket_cap_mb"])
                else DDP_BUCKET_CAP_MB
            )
            shape = {k: m[k] for k in MODEL_SHAPE_KEYS if k in m and not pd.isna(m[k])}
            views[r["model"]] = model_view(
                str(m["arch"]), depth, int(m.get("num_classes", 1000)), bucket_cap_mb=cap, **shape
            )
        view = views[r["model"]]
        out.at[i, "num_layers"], out.at[i, "num_buckets"] = view["num_layers"], view["num_buckets"]
        out.at[i, "grad_mb"] = view["grad_bytes"] / 1e6
        if r["stall"] not in ("interconnect", "network"):
            continue
        link = prices.get(str(m.get("system", "")), {})
        if not {"interconnect_gb_s", "interconnect_latency_us"} <= set(link):
            continue
        steps = r["per_gpu_samples"] / r["per_gpu_batch"]
        intra = {"bandwidth_gb_s": link["interconnect_gb_s"], "latency_us": link["interconnect_latency_us"]}
        inter = {
            "bandwidth_gb_s": link.get("network_gb_s", np.nan),
            "latency_us": link.get("network_latency_us", np.nan),
        }
        if net_link:  # an emulated link: netem's delay comes on top of the path's own latency
            inter = {
                "bandwidth_gb_s": net_link["bandwidth_gb_s"],
                "latency_us": intra["latency_us"] + net_link["latency_us"],
            }
        for column, layers in (("estimate_s", view["num_layers"]), ("estimate_buckets_s", view["num_buckets"])):

            def t(link):
                return comm_time_s(
                    num_layers=layers, grad_bytes=view["grad_bytes"], world_size=int(r["world_size"]), **link
                )

            out.at[i, column] = steps * (t(intra) if r["stall"] == "interconnect" else t(inter) - t(intra))
    return out


def stash_report(stash, cfg, *, root: Path) -> str:
    """The text report of one stash study folder (every model and batch found there)."""
    from analysis.load import load_campaign

    if not root.is_dir():
        raise ConfigError(f"no stash runs in {root}; run 'ddlbench stash run' with the same overrides first")
    campaign = load_campaign(root)
    counted = campaign.counted
    if counted.empty or campaign.steps.empty:
        raise ConfigError(f"no completed runs in {root}; run 'ddlbench stash run' with the same overrides first")
    per_run = run_throughput(campaign.steps, counted)
    prices = load_prices(Path(stash.prices))
    net_link = None
    if stash.launcher == "local" and stash.net_bandwidth_mbit:
        net_link = {"bandwidth_gb_s": stash.net_bandwidth_mbit / 8e3, "latency_us": stash.net_latency_ms * 1e3}
    stalls = stall_table(per_run)
    lines = [f"Stash study {root} ({len(counted)} completed runs)", ""]
    if stalls.empty:
        lines.append("no paired runs yet: every stall needs both sides (see 'ddlbench stash plan')")
    else:
        table = estimates(stalls, counted, prices, net_link=net_link)
        show = table[
            [
                "stall",
                "model",
                "per_gpu_batch",
                "loader",
                "world_size",
                "num_nodes",
                "num_repeats",
                "baseline_time_s",
                "time_s",
                "stall_s",
                "stall_s_ci",
                "stall_pct",
                "stall_pct_of_training",
                "num_layers",
                "num_buckets",
                "grad_mb",
                "estimate_s",
                "estimate_buckets_s",
            ]
        ]
        lines += [
            "Stalls (T = sum of the slowest rank's measured step times, median over repeats; "
            "stall_s_ci = t-interval half widths of both sides combined, NaN with one repeat;",
            "stall_pct = stall_s / the paired baseline's T; stall_pct_of_training = stall_s / the stalled run's T "
            "(the Stash study gives CPU and disk stalls so: % of the total training time);",
            "estimate_s = steps x (latency + G/(L*B)) * L with L = gradient tensors, "
            "estimate_buckets_s with L = DDP buckets; ring bytes 2(N-1)/N x G):",
            show.to_string(index=False, float_format=lambda v: f"{v:.4g}"),
            "",
        ]
        if net_link and (table["stall"] == "network").any():
            lines.append(
                f"network estimate uses the emulated link: {stash.net_bandwidth_mbit:g} Mbit/s, "
                f"{stash.net_latency_ms:g} ms"
            )
    costs = cost_table(per_run, counted, prices, epoch_samples=stash.epoch_samples)
    lines += [
        "",
        f"Cost (price from {stash.prices}; $/epoch for {stash.epoch_samples:,} samples at the measured throughput):",
        costs.to_string(index=False, float_format=lambda v: f"{v:.4g}"),
    ]
    missing = sorted(set(costs.loc[costs["price_per_gpu_hour_usd"].isna(), "system"].astype(str)))
    if missing:
        lines.append(f"no price for system {', '.join(missing)}: add it to {stash.prices}")
    evicted = [c for c in counted if c.startswith("meta.cache_evict.method")]
    if evicted:
        methods = counted[evicted[0]].dropna().unique()
        lines.append(f"cold cache made with: {', '.join(map(str, methods))} (meta.json cache_evict)")
    return "\n".join(lines)


# Stash pairing: same per-GPU batch and per-GPU samples (and the same software stack)
STASH_PAIR = ["framework", "model", "precision", "per_gpu_batch", "per_gpu_samples"]


def stash_stalls(per_run: pd.DataFrame) -> pd.DataFrame:
    """Stash stalls from paired runs (same framework, model, precision, per-GPU batch, per-GPU samples);
    T = time_s of a run (median over repeats). One row per stall:
      interconnect = T(synthetic, N GPUs, 1 node) - T(synthetic, 1 GPU)
      network      = T(synthetic, N GPUs over k nodes) - T(synthetic, N GPUs, 1 node)
      cpu          = T(real loader, warm cache) - T(synthetic)        (same N and nodes)
      disk         = T(real loader, cold cache) - T(real loader, warm) (same loader, N, nodes)
    stall_pct = stall_s / baseline_time_s x 100 (the stall against the run it is measured from: the Stash
    study's interconnect and network stalls, "as high as 500%"); stall_pct_of_training = stall_s / time_s x
    100 (against the stalled run's own training time: how the study gives CPU and disk stalls, "as a
    percentage of the total training time"). The cache state is the `cache` column (default warm).
    Runs pair within one campaign only (a Stash study is one campaign: its runs differ by design in the
    loader, size, cache and virtual epoch, so they are not one cell; two studies under one root never mix),
    and within one system profile where per_run has a `system` column (per-instance stalls).
    """
    same = [*STASH_PAIR, *(c for c in ("campaign", "system") if c in per_run)]
    columns = [
        "stall",
        *same,
        "loader",
        "world_size",
        "num_nodes",
        "time_s",
        "baseline_time_s",
        "stall_s",
        "stall_pct",
        "stall_pct_of_training",
    ]
    table = per_run.copy()
    table["cache"] = table["cache"].fillna("warm") if "cache" in table else "warm"
    # per-GPU samples can differ in the last digits when logged from floats
    table["per_gpu_samples"] = table["per_gpu_samples"].round(6)
    key = [*same, "loader", "cache", "world_size", "num_nodes"]
    t = table.groupby(key, dropna=False, observed=True)["time_s"].median().reset_index()
    syn = t[t["loader"] == "synthetic"]
    real = t[t["loader"] != "synthetic"]
    warm, cold = real[real["cache"] == "warm"], real[real["cache"] == "cold"]

    def pair(name: str, test: pd.DataFrame, base: pd.DataFrame, on: list[str]) -> pd.DataFrame:
        base = base[[*on, "time_s"]].rename(columns={"time_s": "baseline_time_s"})
        joined = test.merge(base, on=on)
        joined["stall"] = name
        return joined

    one_gpu = syn[syn["world_size"] == 1]
    single_node = syn[(syn["num_nodes"] == 1) & (syn["world_size"] > 1)]
    parts = [
        pair("interconnect", single_node, one_gpu, same),
        pair("network", syn[syn["num_nodes"] > 1], syn[syn["num_nodes"] == 1], [*same, "world_size"]),
        pair("cpu", warm, syn, [*same, "world_size", "num_nodes"]),
        pair("disk", cold, warm, [*same, "loader", "world_size", "num_nodes"]),
    ]
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=columns)
    out = pd.concat(parts, ignore_index=True)
    out["stall_s"] = out["time_s"] - out["baseline_time_s"]
    out["stall_pct"] = 100.0 * out["stall_s"] / out["baseline_time_s"]
    out["stall_pct_of_training"] = 100.0 * out["stall_s"] / out["time_s"]
    order = {"interconnect": 0, "network": 1, "cpu": 2, "disk": 3}
    out = out.sort_values(
        ["stall", "model", "world_size", "num_nodes"], key=lambda s: s.map(order) if s.name == "stall" else s
    )
    return out[columns].reset_index(drop=True)


@paper_style
def stash_bars(stalls: pd.DataFrame) -> Figure:
    """Stash stalls in % of the paired baseline's time, one bar per stall and configuration."""
    fig, axes = panels(1, width_in=min(FULL_WIDTH_IN, 1.6 + 0.75 * len(stalls)), row_height_in=2.4)
    ax = axes[0]
    labels = [
        f"{pretty(r.framework)}\n{r.model}\n{pretty(r.loader)}\n{int(r.world_size)} GPUs\n{int(r.num_nodes)} node"
        + ("s" if int(r.num_nodes) > 1 else "")
        for r in stalls.itertuples()
    ]
    x = np.arange(len(stalls))
    bars = ax.bar(x, stalls["stall_pct"], 0.7, color=[STALL_COLORS.get(s, "#999999") for s in stalls["stall"]])
    ax.bar_label(bars, fmt="%.1f%%", fontsize=6, padding=1)
    for kind, color in STALL_COLORS.items():
        if (stalls["stall"] == kind).any():
            ax.add_patch(Rectangle((0, 0), 0, 0, color=color, label=f"{kind} stall"))
    ax.axhline(0, color="black", linewidth=0.6)
    ax.set_xticks(x, labels, fontsize=6)
    ax.margins(y=0.12)
    ax.set_ylabel("stall (% of paired baseline time)")
    ax.yaxis.set_major_formatter(PercentFormatter())
    ax.grid(axis="x", visible=False)
    ax.set_title("Stash stalls")
    return finish(fig, axes, xlabel_in=0.8, left_in=0.7)
    return fig


def draw(report: Report) -> None:
    if not report.measured or report.analysis.stash_runs().empty:
        return
    stalls = report.analysis.stash_stalls()
    report.blocks.append(Block("heading", "Stash stalls"))
    if stalls.empty:
        report.blocks.append(
            Block(
                "text",
                "No paired runs (synthetic on 1 GPU / N GPUs on 1 node / N over k nodes / "
                "real data warm and cold, same per-GPU batch and samples).",
            )
        )
        return
    report.blocks.append(Block("table", stalls.round(3), key=("stall_pct", "stall_pct_of_training")))
    add_figure(
        report.blocks,
        report.figures,
        "stash_stalls",
        lambda: stash_bars(stalls),
        "Stash stalls, % of the paired baseline.",
    )
