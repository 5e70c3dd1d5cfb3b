"""`ddlbench predict`'s tables as text: the prediction, the study's rows beside it, the validation, and
where the data time comes from."""

from __future__ import annotations

import math

import pandas as pd

from analysis.device import GPU, WORDS, RankWords
from analysis.predict.interval import rounded
from analysis.predict.model import Parts
from analysis.predict.simulation import summary_line


def format_prediction(
    table: pd.DataFrame,
    *,
    unit: str,
    simulated: bool = False,
    words: RankWords = WORDS[GPU],
    halfwidth: float = 0.0,
    interval_note: str = "",
) -> str:
    """The prediction per size, its counts and rates named for the target's ranks (analysis.device: gpus and
    img/s/GPU, or ranks and img/s/rank); with a relative halfwidth (analysis.predict.interval) the rates carry
    +- and are rounded to what it supports."""
    per = "img/s" if unit == "images" else "seq/s"
    column, one = f"{words.column}s", words.per
    eff = f"eff/1{one}"
    lines = [
        f"{column:>6} {'nodes':>5} {'step ms':>9} {per:>12} {'+-':>10} {per + '/' + one:>10} {eff:>9} "
        f"{'allreduce%':>10} {'sync ms':>8} {'data%':>6} {'compute%':>8} {'other%':>6}"
    ]
    for _, r in table.iterrows():
        pm = halfwidth * r["throughput"]
        lines.append(
            f"{int(r['gpus']):>6d} {int(r['nodes']):>5d} {rounded(1e3 * r['step_s'], 1e3 * halfwidth * r['step_s']):>9} "
            f"{rounded(r['throughput'], pm):>12} {rounded(pm, pm) if pm else '':>10} "
            f"{rounded(r['per_gpu'], halfwidth * r['per_gpu']):>10} {r['efficiency']:>9.2f} {r['allreduce_pct']:>10.1f} "
            f"{1e3 * r['sync_s']:>8.2f} {r['data_pct']:>6.1f} {r['compute_pct']:>8.1f} {r['other_pct']:>6.1f}"
        )
    if interval_note:
        lines.append(f"# {interval_note}")
    first = int(table["gpus"].iloc[0]) if len(table) else 1
    lines.append(
        f"# {eff}: {per}/{one} over the predicted {per}/{one} at 1 {one} (weak scaling: the per-{one} batch "
        "fixed), both from this model; not against a measurement"
        + ("" if first == 1 else f" (1 {one} is predicted for it, not shown)")
    )
    how = (
        "simulated: each rank's loader makes batches at its measured intervals, compute jitter normal"
        if simulated
        else "its compute and data-time spread x the expected maximum of n normals"
    )
    lines.append(
        f"# allreduce% holds sync: every collective waits for the slowest rank ({how}), which a trace shows as "
        "collective time, as study A's table counts it"
    )
    bound = table[table["loader_wait_s"] > 0]
    if len(bound):
        asked, delivered = bound["demand_node_img_s"].max(), bound["loader_node_img_s"].iloc[-1]
        why = (
            f"the GPUs of a node ask {asked:,.0f} img/s at most, its loaders deliver {delivered:,.0f}"
            if asked > delivered
            else f"its loaders deliver {delivered:,.0f} img/s per node on average, more than the GPUs ask "
            f"({asked:,.0f} at most), but their batches come unevenly"
        )
        lines.append(f"# data% waits for the loader at {', '.join(str(int(g)) for g in bound['gpus'])} GPUs: {why}")
    return "\n".join(lines)


def format_reference(table: pd.DataFrame, name: str, *, fitted: bool) -> str:
    how = (
        "* = the point the prediction was fitted to, the rest held out"
        if fitted
        else "the study's rows beside the prediction: none of them feeds it"
    )
    lines = [
        f"# against --reference {name} (percent of the step; {how})",
        f"{'gpus':>6} {'allreduce ref':>13} {'pred':>6} {'err pp':>7} {'data ref':>9} {'pred':>6} "
        f"{'compute ref':>11} {'pred':>6}",
    ]
    for _, r in table.iterrows():
        mark = " " if r["held_out"] else "*"
        lines.append(
            f"{int(r['gpus']):>5d}{mark} {r['allreduce_pct_ref']:>13.1f} {r['allreduce_pct_pred']:>6.1f} "
            f"{r['allreduce_err_pp']:>+7.1f} {r['data_pct_ref']:>9.1f} {r['data_pct_pred']:>6.1f} "
            f"{r['compute_pct_ref']:>11.1f} {r['compute_pct_pred']:>6.1f}"
        )
    held = table[table["held_out"]]
    if len(held):
        lines.append(
            f"# held out: allreduce share mean |error| {held['allreduce_err_pp'].abs().mean():.1f} pp, "
            f"max {held['allreduce_err_pp'].abs().max():.1f} pp; rises with the GPU count: "
            f"{'yes' if held['allreduce_pct_pred'].is_monotonic_increasing else 'no'} "
            f"(reference: {'yes' if table['allreduce_pct_ref'].is_monotonic_increasing else 'no'})"
        )
    return "\n".join(lines)


def format_validation(
    table: pd.DataFrame, skipped: list[str], *, goal_pct: float, words: RankWords = WORDS[GPU]
) -> str:
    column = f"{words.column}s"
    lines = [
        "# validation: held-out measured runs (never a calibration run)",
        f"{'where':<16} {column:>4} {'nodes':>5} {'measured':>10} {'predicted':>10} {'error%':>7} "
        f"{'allreduce% meas':>15} {'pred':>6}  run",
    ]
    for _, r in table.iterrows():
        lines.append(
            f"{r['label']:<16} {int(r['gpus']):>4d} {int(r['nodes']):>5d} {r['measured']:>10,.1f} {r['predicted']:>10,.1f} "
            f"{r['error_pct']:>+7.1f} {r['allreduce_pct_measured']:>15.1f} {r['allreduce_pct_predicted']:>6.1f}  "
            f"{r['run_id']}"
        )
    if len(table):
        lines.append("# " + summary_line(table, goal_pct=goal_pct))
    else:
        lines.append("# no held-out run of this configuration was found")
    lines += [f"# skipped {s}" for s in skipped]
    return "\n".join(lines)


def data_path_line(parts: Parts, *, gpus_per_node: int) -> str:
    """Where the data time comes from: the loader's capacity per rank and node, its source, its spread."""
    if math.isinf(parts.loader_img_s):
        return (
            f"data: loader={parts.loader or '?'} {1e3 * parts.data_s:.2f} ms per step at every GPU count "
            f"({parts.data_source or parts.source})"
        )
    node = f"{gpus_per_node * parts.loader_img_s:,.0f} per node of {gpus_per_node} ({parts.data_source})"
    if parts.loader_intervals_s:  # loaderbench: its rate, and its spread from the intervals between batches
        intervals = pd.Series(parts.loader_intervals_s)
        return (
            f"data: loader={parts.loader} delivers {parts.loader_img_s:,.0f} img/s per rank, {node}; a batch "
            f"every {1e3 * intervals.mean():.2f} ms ({len(intervals)} measured), {parts.loader_makers} made at "
            f"once in {1e3 * parts.maker_batch_s().mean():.1f} ms (spread {1e3 * parts.maker_batch_s().std():.1f} "
            f"ms), {parts.loader_queue} batches ahead"
        )
    # a run's loader delivered a batch per mean step at least (a lower bound)
    return (
        f"data: loader={parts.loader} delivers at least {parts.loader_img_s:,.0f} img/s per rank, {node}; "
        f"data-time spread {1e3 * parts.data_jitter_s:.2f} ms per rank ({parts.source})"
    )
