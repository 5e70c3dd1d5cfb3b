"""Hosts of multi-node runs: per-host step, data and collective times, the slow host named; the bars; the
report's section.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from analysis.cells import measured
from analysis.figures import finish, panels, paper_style
from analysis.palette import BREAKDOWN_COLORS, FULL_WIDTH_IN, IDEAL_COLOR
from analysis.report_blocks import Block, Report, add_figure

if TYPE_CHECKING:
    from analysis.campaign_analysis import CampaignAnalysis


STRAGGLER_PCT = 5.0  # a host whose compute is this much slower than the run's median host is slow ...
STRAGGLER_MIN_MS = 1.0  # ... by at least this much per step (the timers' resolution on small CPU steps)

HOSTS = [
    "run_id",
    "host",
    "num_ranks",
    "ranks",
    "step_ms_mean",
    "step_ms_p95",
    "compute_ms_mean",
    "fwd_ms_mean",
    "comm_ms_mean",
    "comm_exposed_ms_mean",
    "data_ms_mean",
    "compute_slowdown_pct",
    "straggler",
]


def _rank_ranges(ranks: list[int]) -> str:
    """0, 1, 2, 3, 8 -> '0-3, 8'."""
    ranges: list[list[int]] = []
    for rank in sorted(ranks):
        if ranges and rank == ranges[-1][1] + 1:
            ranges[-1][1] = rank
        else:
            ranges.append([rank, rank])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


def distinct_hosts(ranks: pd.DataFrame) -> pd.DataFrame:
    """The ranks table with each run's hosts told apart: where ranks of several launcher nodes share a host name
    (containers, network namespaces), the host is '<name> (node <i>)'."""
    if "node" not in ranks or ranks["node"].isna().all():
        return ranks
    nodes = ranks.groupby("run_id")["node"].transform("nunique")
    names = ranks.groupby("run_id")["host"].transform("nunique")
    shared = (nodes > names) & ranks["node"].notna()
    labelled = ranks["host"].astype(str) + " (node " + ranks["node"].astype("string") + ")"
    return ranks.assign(host=ranks["host"].where(~shared, labelled))


def host_times(
    steps: pd.DataFrame,
    ranks: pd.DataFrame,
    *,
    threshold_pct: float = STRAGGLER_PCT,
    min_gap_ms: float = STRAGGLER_MIN_MS,
) -> pd.DataFrame:
    """Per run whose ranks ran on 2+ hosts (`ranks`: the rank logs' header hosts) and per host, over its
    ranks' measured steps: num_ranks, ranks ('0-3'), step_ms_mean / _p95, compute_ms_mean (fwd + bwd + opt
    minus the exposed collective time where it is measured, as breakdown's compute), fwd_ms_mean, comm_ms_mean and
    comm_exposed_ms_mean (NaN where collectives are not timed), data_ms_mean, compute_slowdown_pct (against
    the run's median host) and `straggler`: compute slower than the median host's by more than
    threshold_pct and min_gap_ms. Compute, not step time: in synchronous training every rank's step takes
    as long as the slowest one's, the others wait in the collectives."""
    if steps.empty or ranks.empty or not ranks["host"].notna().any():
        return pd.DataFrame(columns=HOSTS)
    where = distinct_hosts(ranks.dropna(subset=["host"]).assign(run_id=lambda d: d["run_id"].astype(str)))
    where = where[where.groupby("run_id")["host"].transform("nunique") > 1][["run_id", "rank", "host"]]
    if where.empty:
        return pd.DataFrame(columns=HOSTS)
    timed = ["step_s", "fwd_s", "bwd_s", "opt_s", "comm_s", "comm_exposed_s", "data_s"]
    rows = measured(steps, ["run_id", "rank", *timed])
    rows = rows[rows["run_id"].isin(set(where["run_id"]))]
    # the step rows keep their categorical run_id (as text per row it costs more than the rest); the
    # per-host table takes text and text order at the end
    if isinstance(rows["run_id"].dtype, pd.CategoricalDtype):
        where = where.assign(run_id=where["run_id"].astype(rows["run_id"].dtype))
    else:
        rows = rows.assign(run_id=rows["run_id"].astype(str))
    rows = rows.merge(where, on=["run_id", "rank"])
    exposed = rows["comm_exposed_s"].fillna(0.0) if "comm_exposed_s" in rows else 0.0
    phases = rows[["fwd_s", "bwd_s", "opt_s"]].sum(axis=1, min_count=1)
    rows = rows.assign(compute_s=phases - exposed)
    grouped = rows.groupby(["run_id", "host"], sort=True, observed=True)
    out = grouped.agg(
        num_ranks=("rank", "nunique"),
        step_ms_mean=("step_s", "mean"),
        step_ms_p95=("step_s", lambda x: x.quantile(0.95)),
        compute_ms_mean=("compute_s", "mean"),
        fwd_ms_mean=("fwd_s", "mean"),
        comm_ms_mean=("comm_s", "mean"),
        comm_exposed_ms_mean=("comm_exposed_s", "mean"),
        data_ms_mean=("data_s", "mean"),
    )
    for column in HOSTS[4:11]:  # step_ms_mean .. data_ms_mean: seconds to ms
        out[column] *= 1e3
    out["ranks"] = grouped["rank"].agg(lambda r: _rank_ranges(r.unique().tolist()))
    out = out.reset_index()
    out = out.assign(run_id=out["run_id"].astype(str)).sort_values(["run_id", "host"], kind="stable")
    median = out.groupby("run_id")["compute_ms_mean"].transform("median")
    out["compute_slowdown_pct"] = 100 * (out["compute_ms_mean"] / median - 1)
    out["straggler"] = (out["compute_slowdown_pct"] > threshold_pct) & (out["compute_ms_mean"] - median > min_gap_ms)
    return out[HOSTS].reset_index(drop=True)


def slow_hosts(hosts: pd.DataFrame) -> pd.DataFrame:
    """host_times' stragglers, slowest first: run_id, host, ranks, compute_ms_mean, compute_slowdown_pct."""
    slow = hosts[hosts["straggler"].astype(bool)] if not hosts.empty else hosts
    return slow.sort_values("compute_slowdown_pct", ascending=False)[
        ["run_id", "host", "ranks", "compute_ms_mean", "compute_slowdown_pct"]
    ].reset_index(drop=True)


# the host figure's parts, left to right in each bar: (legend name, column of host_times)
HOST_PARTS = [("data", "data_ms_mean"), ("compute", "compute_ms_mean")]
SLOW_HOST_COLOR = "#D55E00"


@paper_style
def host_bars(hosts: pd.DataFrame, *, run_ids: list[str]) -> Figure:
    """Per run (one panel each), a bar per host of its ranks' mean step: data, compute and the rest of the
    step (waiting in collectives, other), in ms; the median host's compute dotted, slow hosts' names in the
    straggler colour."""
    fig, axes = panels(max(1, len(run_ids)), ncols=1, row_height_in=1.8, width_in=FULL_WIDTH_IN)
    for ax, run_id in zip(axes, run_ids):
        rows = hosts[hosts["run_id"] == run_id].reset_index(drop=True)
        x = np.arange(len(rows))
        bottom = np.zeros(len(rows))
        for label, column in HOST_PARTS:
            values = rows[column].fillna(0).to_numpy(float)
            ax.bar(x, values, 0.7, bottom=bottom, color=BREAKDOWN_COLORS[label], label=label, linewidth=0)
            bottom += values
        rest = np.maximum(rows["step_ms_mean"].to_numpy(float) - bottom, 0)
        ax.bar(x, rest, 0.7, bottom=bottom, color=BREAKDOWN_COLORS["other"], label="rest of the step (waiting, other)")
        ax.axhline(
            float(rows["compute_ms_mean"].median()) + float(rows["data_ms_mean"].fillna(0).median()),
            color=IDEAL_COLOR,
            linestyle=":",
            linewidth=0.8,
            label="median host (data + compute)",
        )
        ax.set_xticks(x, [f"{h}\n{r}" for h, r in zip(rows["host"], rows["ranks"])], fontsize=6)
        for tick, slow in zip(ax.get_xticklabels(), rows["straggler"].astype(bool)):
            if slow:
                tick.set_color(SLOW_HOST_COLOR)
                tick.set_fontweight("bold")
        ax.set_ylabel("ms per step")
        ax.grid(axis="x", visible=False)
        ax.set_title(str(run_id), fontsize=7)
    return finish(fig, axes, title="Per-host step time (slow hosts named in bold)", xlabel_in=0.6)


HOSTS_SHOWN_ROWS = 48  # host rows a report lists: the runs with a slow host first, then the others while room is left


def hosts_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Per-host step, compute and collective times of the runs on 2+ hosts, naming the slow hosts."""
    counted = set(analysis.counted()["run_id"].astype(str))
    ranks = analysis.campaign.ranks
    hosts = host_times(analysis.campaign.steps, ranks[ranks["run_id"].astype(str).isin(counted)])
    if hosts.empty:
        return
    slow = slow_hosts(hosts)
    blocks.append(Block("heading", "Hosts"))
    note = (
        "Per host of each run on more than one host (the host each rank log's header names), over its ranks' "
        "measured steps: step_ms (mean, p95), compute_ms (fwd + bwd + opt less the exposed collective time "
        "where it is timed), comm_ms (collectives, overlapped or not) and comm_exposed_ms (empty where not "
        "timed), data_ms. A host is slow (straggler) when its compute is more than "
        f"{STRAGGLER_PCT:g}% and {STRAGGLER_MIN_MS:g} ms per step slower than the run's median "
        "host's (compute_slowdown_pct). Compute, not step time: in synchronous training every rank's step "
        "lasts as long as the slowest one's, the others wait in the collectives. Without a collective "
        "timer (framework.comm_timer=auto is off on GPUs) that wait falls inside the others' bwd and "
        "evens their compute out with the slow host's: look at fwd_ms then (no collective in DDP's "
        "forward), and time collectives (framework.comm_timer=on) in a run meant to find a slow node."
    )
    if slow.empty:
        blocks.append(Block("text", f"No slow host in the {hosts['run_id'].nunique()} run(s) on several hosts."))
    else:
        named = [
            f"{r.host} (ranks {r.ranks}) in {r.run_id}: compute {r.compute_ms_mean:.1f} ms per step, "
            f"{r.compute_slowdown_pct:+.1f}% against the median host"
            for r in slow.itertuples(index=False)
        ]
        blocks.append(Block("text", "Slow hosts: " + "; ".join(named) + "."))
    order = [
        *dict.fromkeys(slow["run_id"]),
        *(r for r in dict.fromkeys(hosts["run_id"]) if r not in set(slow["run_id"])),
    ]
    chosen, size = [], 0
    for run_id in order:
        count = int((hosts["run_id"] == run_id).sum())
        if chosen and size + count > HOSTS_SHOWN_ROWS:
            break
        chosen.append(run_id)
        size += count
    shown = hosts[hosts["run_id"].isin(chosen)].copy()
    shown["run_id"] = pd.Categorical(shown["run_id"], categories=chosen, ordered=True)
    shown = shown.sort_values(["run_id", "host"]).assign(
        run_id=lambda d: d["run_id"].astype(str), straggler=lambda d: d["straggler"].map({True: "slow", False: ""})
    )
    shown = shown[[c for c in shown if shown[c].notna().any()]]
    left = hosts["run_id"].nunique() - len(chosen)
    if left:
        blocks.append(Block("text", f"{left} more run(s) on several hosts, without a slow host, are not listed."))
    blocks.append(
        Block("table", shown.reset_index(drop=True).round(2), note=note, key=("compute_slowdown_pct", "straggler"))
    )
    add_figure(
        blocks,
        figures,
        "hosts",
        lambda: host_bars(hosts, run_ids=(list(dict.fromkeys(slow["run_id"])) or chosen)[:4]),
        "Per-host mean step time of "
        + ("the runs with a slow host" if not slow.empty else "runs on several hosts")
        + " (up to 4): data, compute and the rest of the step (waiting in collectives, other) per host, its "
        "ranks under its name; dotted: the median host's data + compute; a slow host's name in bold.",
    )


def draw(report: Report) -> None:
    if report.measured:
        hosts_section(report.blocks, report.figures, report.analysis)
