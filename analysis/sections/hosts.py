"""Per-host step, compute and collective times of the runs on several hosts, naming the slow hosts."""

from __future__ import annotations

import pandas as pd

from analysis import metrics, plots
from analysis.campaign_analysis import CampaignAnalysis
from analysis.sections.base import Block, Report, add_figure

HOSTS_SHOWN_ROWS = 48  # host rows a report lists: the runs with a slow host first, then the others while room is left


def hosts_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Per-host step, compute and collective times of the runs on 2+ hosts, naming the slow hosts."""
    counted = set(analysis.counted()["run_id"].astype(str))
    ranks = analysis.campaign.ranks
    hosts = metrics.host_times(analysis.campaign.steps, ranks[ranks["run_id"].astype(str).isin(counted)])
    if hosts.empty:
        return
    slow = metrics.slow_hosts(hosts)
    blocks.append(Block("heading", "Hosts"))
    note = (
        "Per host of each run on more than one host (the host each rank log's header names), over its ranks' "
        "measured steps: step_ms (mean, p95), compute_ms (fwd + bwd + opt less the exposed collective time "
        "where it is timed), comm_ms (collectives, overlapped or not) and comm_exposed_ms (empty where not "
        "timed), data_ms. A host is slow (straggler) when its compute is more than "
        f"{metrics.STRAGGLER_PCT:g}% and {metrics.STRAGGLER_MIN_MS:g} ms per step slower than the run's median "
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
        lambda: plots.host_bars(hosts, run_ids=(list(dict.fromkeys(slow["run_id"])) or chosen)[:4]),
        "Per-host mean step time of "
        + ("the runs with a slow host" if not slow.empty else "runs on several hosts")
        + " (up to 4): data, compute and the rest of the step (waiting in collectives, other) per host, its "
        "ranks under its name; dotted: the median host's data + compute; a slow host's name in bold.",
    )


def draw(report: Report) -> None:
    if report.measured:
        hosts_section(report.blocks, report.figures, report.analysis)
