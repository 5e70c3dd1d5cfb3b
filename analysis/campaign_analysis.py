"""One facade over a loaded campaign: every analysis as one documented method returning a DataFrame
(in the style of HTA's TraceAnalysis). `ddlbench results`, `report` and `compare` are built on it, so
they count the same runs and print the same figures for the same runs.

    from analysis.campaign_analysis import CampaignAnalysis
    ca = CampaignAnalysis("runs/")
    ca.scaling(mode="weak")      # one row per cell, with efficiency against its curve's baseline
    ca.breakdown()               # where the time goes, per cell (phase timers)
    ca.trace_breakdown()         # the same from the trace window, by kernel class (two denominators)
    ca.excluded()                # runs that do not count, and why

Columns carry units (_s, _ms, _img_s, _share, _pct). A cell is one configuration (`cell_hash`:
every setting + world size + nodes, benchmarks/rundir/); `variant` names the settings that tell
apart cells which look the same in a table. Results are computed once and cached.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from analysis import (
    accuracy,
    caveats,
    cells,
    compare,
    container_images,
    interconnect,
    scaling,
    stability,
    stash,
    time_shares,
    trace,
    utilisation,
)
from analysis.device import run_devices
from analysis.load import Campaign, load_campaign
from benchmarks.errors import ConfigError


class CampaignAnalysis:
    """The analyses of the run directories below `root` (any depth)."""

    def __init__(self, root: Path | str, *, campaign: Campaign | None = None) -> None:
        self.root = Path(root)
        self.campaign = campaign if campaign is not None else load_campaign(self.root)

    # --- what was read --------------------------------------------------------------------------

    def runs(self) -> pd.DataFrame:
        """Every run directory: run_id, status, reason, the summary's fields, config.* and meta.* columns."""
        return self.campaign.runs

    @functools.cache
    def counted(self) -> pd.DataFrame:
        """The runs every table counts: completed, identified, with measured steps in their rank logs."""
        runs = self.campaign.counted
        return runs[runs["run_id"].isin(set(self.run_throughput()["run_id"]))]

    @functools.cache
    def excluded(self) -> pd.DataFrame:
        """The runs no table counts, each with its reason (run_id, status, reason)."""
        runs = self.campaign.runs
        out = runs[~runs["run_id"].isin(set(self.counted()["run_id"]))][["run_id", "status", "reason"]].copy()
        out.loc[out["status"] == "completed", ["status", "reason"]] = [
            "incomplete",
            "no measured step in the rank logs",
        ]
        return out.reset_index(drop=True)

    def problems(self) -> pd.DataFrame:
        """Every skipped line or file: run_id, file, line, problem."""
        return self.campaign.problems

    @functools.cache
    def marks(self) -> pd.Series:
        """Per cell (cell_hash) what its figures must be read with (analysis.caveats: oversubscribed, diverged),
        as one text; '' for none."""
        return caveats.cell_marks(self.counted(), "cell_hash", self.problems())

    # --- accuracy -------------------------------------------------------------------------------

    @functools.cache
    def study_runs(self) -> pd.DataFrame:
        """run_throughput() with each run's schedule (optim.schedule.name) and global batch (accuracy.study_runs)."""
        return accuracy.study_runs(self.run_throughput(), self.counted())

    @functools.cache
    def accuracy_runs(self) -> pd.DataFrame:
        """Per counted run with evaluations: the last top-1 / top-5 (%), loss, epochs, evaluations, eval_s."""
        per_run = accuracy.accuracy_runs(self.campaign.evals)
        return per_run[per_run["run_id"].isin(set(self.run_throughput()["run_id"]))]

    @functools.cache
    def accuracy(self) -> pd.DataFrame:
        """Per cell with evaluations: the last top-1 / top-5 (%), validation loss, epochs, evaluations and
        their seconds (mean over repeats), num_repeats, schedule and global_batch (accuracy.accuracy_cells)."""
        per_run = self.accuracy_runs()
        if per_run.empty:
            return pd.DataFrame(columns=[*cells.CELL, *accuracy.STUDY, "num_repeats", *accuracy.ACCURACY])
        return accuracy.accuracy_cells(per_run, self.study_runs())

    def evals(self) -> pd.DataFrame:
        """Every evaluation of the counted runs: run_id, step, epoch, samples, top1, top5, loss, eval_s and,
        where eval.jsonl has them, train_samples, train_s, epochs."""
        evals = self.campaign.evals
        return evals[evals["run_id"].isin(set(self.counted()["run_id"]))]

    @functools.cache
    def accuracy_curves(self) -> pd.DataFrame:
        """Top-1 per cell and evaluation point, mean and min-max over repeats (accuracy.accuracy_curves)."""
        return accuracy.accuracy_curves(self.evals(), self.study_runs())

    @functools.cache
    def training_curves(self) -> pd.DataFrame:
        """Training loss and lr per cell with evaluations against the step, from the rank logs (accuracy.training_curves)."""
        evaluated = set(self.accuracy_runs()["run_id"])
        per_run = self.study_runs()
        return accuracy.training_curves(self.campaign.steps, per_run[per_run["run_id"].isin(evaluated)])

    @functools.cache
    def time_to_accuracy(self) -> pd.DataFrame:
        """Per cell with run.target_top1: the target, repeats that reached it, and mean time, samples and steps
        to it (accuracy.time_to_accuracy)."""
        return accuracy.time_to_accuracy(self.counted(), self.study_runs())

    # --- throughput and scaling -----------------------------------------------------------------

    @functools.cache
    def step_times(self) -> pd.DataFrame:
        """Per run and measured step: the slowest rank's step_s, global samples, ranks (cells.step_times);
        throughput, step stability and the step timeline read it."""
        return cells.step_times(self.campaign.steps)

    @functools.cache
    def run_throughput(self) -> pd.DataFrame:
        """One row per counted run: throughput_img_s, per_gpu_img_s, time_s, measured_steps and samples
        (the one definition: summary_schema.throughput), with the cell's columns and its variant."""
        if self.campaign.steps.empty:
            return pd.DataFrame(columns=["run_id", "throughput_img_s", "per_gpu_img_s", *cells.CARRIED])
        return cells.run_throughput(self.campaign.steps, self.campaign.counted, per_step=self.step_times())

    @functools.cache
    def cells(self) -> pd.DataFrame:
        """One row per cell: median throughput_img_s and per_gpu_img_s over its repeats, the 95% t-interval
        of the mean (throughput_img_s_ci_low/_ci_high) and num_repeats."""
        per_run = self.run_throughput()
        return cells.cells(per_run) if not per_run.empty else per_run

    @functools.cache
    def scaling(self, mode: str = "weak") -> pd.DataFrame:
        """cells() with speedup, efficiency and baseline_gpus (the smallest GPU count of the cell's
        curve; none, and no efficiency, for a curve of one GPU count). mode: weak | strong."""
        table = self.cells()
        return scaling.scaling(table, mode=mode) if not table.empty else table

    # --- where the time goes ----------------------------------------------------------------------

    @functools.cache
    def breakdown_runs(self) -> pd.DataFrame:
        """Per counted run: data, compute, exposed and total allreduce, other and host_data shares of step time."""
        return time_shares.breakdown(self.campaign.steps) if not self.campaign.steps.empty else pd.DataFrame()

    @functools.cache
    def breakdown(self) -> pd.DataFrame:
        """breakdown_runs() per cell (mean over repeats)."""
        per_run = self.run_throughput()
        return time_shares.breakdown_cells(self.breakdown_runs(), per_run) if not per_run.empty else pd.DataFrame()

    @functools.cache
    def trace_breakdown_runs(self) -> pd.DataFrame:
        """Per counted run with a trace window: shares by kernel class of the window's step time (*_pct)
        and of the run's runtime (*_runtime_pct), mean over ranks (trace.trace_breakdown_runs)."""
        counted = self.counted()
        traces = self.campaign.traces[self.campaign.traces["run_id"].isin(set(counted["run_id"]))]
        return trace.trace_breakdown_runs(traces, self.campaign.steps, counted)

    @functools.cache
    def trace_breakdown(self) -> pd.DataFrame:
        """trace_breakdown_runs() per cell (mean over repeats)."""
        per_run, traced = self.run_throughput(), self.trace_breakdown_runs()
        return trace.trace_breakdown_cells(traced, per_run) if not traced.empty else pd.DataFrame()

    @functools.cache
    def timers_vs_trace(self) -> pd.DataFrame:
        """Per counted run and rank with a trace window: timers against trace over the same steps, and the
        disagreement in percentage points (trace.timers_vs_trace)."""
        counted = set(self.counted()["run_id"])
        traces = self.campaign.traces[self.campaign.traces["run_id"].isin(counted)]
        return trace.timers_vs_trace(traces, self.campaign.steps)

    @functools.cache
    def step_stability_runs(self) -> pd.DataFrame:
        """Per run: step_ms_median, _p95, _max, slow_steps_pct and slow_time_pct (stability.step_stability_runs)."""
        return stability.step_stability_runs(self.campaign.steps, per_step=self.step_times())

    @functools.cache
    def step_stability(self) -> pd.DataFrame:
        """step_stability_runs() per cell."""
        return stability.step_stability(self.step_stability_runs(), self.run_throughput())

    def jittery_runs(self) -> pd.DataFrame:
        """Step times of the runs that lose the most time to slow steps (a timeline's data)."""
        return stability.jittery_runs(self.campaign.steps, self.step_stability_runs(), per_step=self.step_times())

    def rank_imbalance(self) -> pd.DataFrame:
        """Per run and phase, the slowest rank's median against the fastest's (gaps of 1 ms or more)."""
        return stability.rank_imbalance(self.campaign.steps)

    def loader_stalls(self) -> pd.DataFrame:
        """Runs whose host waited in the loader for at least 5% of their step time."""
        return stability.loader_stalls(self.campaign.steps)

    def stash_runs(self) -> pd.DataFrame:
        """The counted runs of a Stash study: those `ddlbench stash run` marked with their role (run.stash_role)."""
        runs = self.counted()
        return runs[runs["config.run.stash_role"].notna()] if "config.run.stash_role" in runs else runs.iloc[:0]

    def stash_stalls(self) -> pd.DataFrame:
        """Stash's interconnect, network, CPU and disk stalls from the paired runs of Stash studies
        (stash.stash_stalls over stash_runs): an ordinary campaign's native and synthetic runs are no pairs."""
        per_run = self.run_throughput()
        per_run = per_run[per_run["run_id"].isin(set(self.stash_runs()["run_id"]))]
        return stash.stash_stalls(per_run) if not per_run.empty else pd.DataFrame()

    # --- utilisation and the GPU interconnect ---------------------------------------------------

    @functools.cache
    def utilisation_runs(self) -> pd.DataFrame:
        """Per run with telemetry: GPU util mean/p95, GPU and host memory peaks, PCIe/NVLink and CPU means."""
        return utilisation.utilisation_runs(self.campaign.telemetry)

    @functools.cache
    def utilisation(self) -> pd.DataFrame:
        """utilisation_runs per cell (mean over the counted repeats with telemetry)."""
        return utilisation.utilisation_cells(self.utilisation_runs(), self.run_throughput())

    def p2p_matrix(self) -> pd.DataFrame:
        """commbench's P2P copy bandwidth and latency per GPU pair, per file and host."""
        return interconnect.p2p_matrix(self.campaign.commbench)

    def h2d_bandwidth(self) -> pd.DataFrame:
        """commbench's host-to-device bandwidth per GPU with every rank copying at once, per file."""
        return interconnect.h2d_bandwidth(self.campaign.commbench)

    # --- two campaigns ---------------------------------------------------------------------------

    def compare(
        self,
        candidate: CampaignAnalysis,
        *,
        threshold: float = 0.05,
        top1_drop_pp: float = compare.TOP1_DROP_PP,
        by: tuple[str, str, str] | None = None,
    ) -> pd.DataFrame:
        """Per cell, candidate B against this campaign A (compare.compare): throughput medians, delta,
        rel_delta, the repeats' confidence intervals, and flag (regression, improvement, ok, missing in
        B, incomplete in B, only in B). Cells pair on every setting both record but run.campaign
        (compare.match_keys); with `by` = (KEY, A, B), A's cells with KEY=A against B's with KEY=B, paired
        on every other setting (compare.by_keys; candidate may be self). Every cell of either side is one
        row. Where cells have evaluations or a target, their final top-1 and time to target too
        (compare.compare_accuracy): `regressed` names each metric that regressed. A side without a
        counted run is a ConfigError."""
        if by is None:
            key_a, key_b, _ = compare.match_keys(self.runs(), candidate.runs())
        else:
            key_a, key_b = compare.by_keys(self.runs(), candidate.runs(), by)
        for option, analysis, keys in (("A", self, key_a), ("B", candidate, key_b)):
            counted = set(analysis.run_throughput()["run_id"].astype(str))
            if not (analysis.runs()["run_id"].astype(str).isin(counted) & keys.notna().to_numpy()).any():
                side = f"{option}={analysis.root}"
                if by is not None:
                    side = f"--by {by[0]}={by[1]},{by[2]}: {by[0]}={by[1 if option == 'A' else 2]} in {analysis.root}"
                raise ConfigError(f"{side} holds no completed run; run `ddlbench results {analysis.root}` to see why")
        tables, accuracies = [], []
        for analysis, keys in ((self, key_a), (candidate, key_b)):
            key_of = pd.Series(keys.to_numpy(), index=analysis.runs()["run_id"].astype(str).to_numpy())
            per_run = analysis.run_throughput()
            per_run = per_run.assign(match_key=per_run["run_id"].astype(str).map(key_of))
            per_run = per_run[per_run["match_key"].notna()]  # runs of unknown size; with `by`, other values
            stats = cells.repeat_stats(per_run, by=["match_key"]) if not per_run.empty else pd.DataFrame()
            shown = per_run.groupby("match_key")[[c for c in [*cells.CELL, "variant"] if c in per_run]].first()
            counted = analysis.counted()
            counted_key = counted["run_id"].astype(str).map(key_of)
            devices = pd.Series(run_devices(counted).to_numpy(), index=counted_key.to_numpy())
            shown["device"] = devices[devices.index.notna()].groupby(level=0).first()  # what its ranks ran on
            shown["marks"] = caveats.cell_marks(counted, counted_key, analysis.problems())  # oversubscribed, diverged
            shown["image"] = container_images.cell_images(
                counted, counted_key
            )  # what its runs ran in (meta.json container)
            for figure in compare.EFFICIENCY_COMPARED:  # MFU, J/sample (analysis.efficiency): the runs' mean
                values = pd.to_numeric(
                    counted.get(figure, pd.Series(index=counted.index, dtype="float64")), errors="coerce"
                )
                shown[figure] = values.groupby(counted_key.to_numpy()).mean()
            tables.append(stats.merge(shown.reset_index(), on="match_key") if not stats.empty else stats)
            accuracies.append(compare.accuracy_by_key(analysis.accuracy_runs(), analysis.counted(), key_of))
        a_cells, b_cells = (t.rename(columns={"throughput_img_s_median": "throughput_img_s"}) for t in tables)
        counted_b = set(b_cells["match_key"]) if not b_cells.empty else set()
        incomplete = (
            set(key_b[~candidate.runs()["run_id"].isin(set(candidate.counted()["run_id"]))].dropna()) - counted_b
        )
        compared = compare.compare(a_cells, b_cells, threshold=threshold, incomplete_in_b=incomplete)
        if by is not None and by[0] in compared:  # a pair's row names both values of KEY
            both = compared["throughput_img_s_a"].notna() & compared["throughput_img_s_b"].notna()
            compared[by[0]] = compared[by[0]].astype("object").where(~both, f"{by[1]}->{by[2]}")
        return compare.compare_accuracy(compared, *accuracies, top1_drop_pp=top1_drop_pp, threshold=threshold)

    # --- export -----------------------------------------------------------------------------------

    def tables(self) -> dict[str, pd.DataFrame]:
        """The computed tables by name (what `results --csv/--parquet` writes; --parquet adds the raw rows)."""
        return {
            "throughput_runs": self.run_throughput(),
            "cells_weak": self.scaling("weak"),
            "cells_strong": self.scaling("strong"),
            "breakdown_cells": self.breakdown(),
            "step_stability_cells": self.step_stability(),
            "excluded_runs": self.excluded(),
        }
