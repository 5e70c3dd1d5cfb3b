"""What `ddlbench predict` reads of a calibration run: one rank's Parts from its measured steps, the loader's
pace where the run waited for it, loaderbench's rows (--loader-capacity), and the calibration runs of --from,
each checked against the configuration predicted (cell.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from analysis.predict.cell import config_of, measured_cell, other_device, run_system, unmeasured
from analysis.predict.model import Parts
from benchmarks.errors import ConfigError
from benchmarks.loaders.configs import batch_makers, queue_depth, worker_count


def spread(values: pd.Series, rows: pd.DataFrame) -> float:
    """The standard deviation that makes ranks wait for each other: between the ranks at the same step where
    the rows hold several ranks (a slowdown of every rank at once, from the machine, makes nobody wait), over
    the steps where they hold one (an upper bound: it holds the machine's common noise too)."""
    rank = rows["rank"] if "rank" in rows else pd.Series(0, index=rows.index)
    if rank.nunique() > 1 and "step" in rows:
        by_step = values.groupby(rows["step"])
        deviation = values - by_step.transform("mean")
        dof = (by_step.transform("size") - 1).groupby(rows["step"]).first().sum()
        return math.sqrt(float((deviation**2).sum()) / dof) if dof > 0 else 0.0
    return float(values.std(ddof=1)) if len(values) > 1 else 0.0


def measured_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """A run's measured step rows: neither warm-up nor profiled (the trace window's steps run slower)."""
    rows = steps[~steps["warmup"].astype(bool)]
    return rows[~rows["profiled"].fillna(False).astype(bool)] if "profiled" in rows else rows


def parts_from_steps(
    steps: pd.DataFrame, *, per_gpu_batch: int, source: str, sample_unit: str = "images", loader: str = ""
) -> Parts:
    """Parts of one run from its measured step rows (every rank's). Its loader delivered a batch at least
    every mean step: that is taken as its capacity, with no separate handover, so that the model gives the
    measured data time back on the run's own size and less where the rest of the step grows (the loader
    works on while the rank computes and communicates). loader=synthetic has no capacity: its data time
    is the handover it measured, at every size."""
    rows = measured_steps(steps)
    if rows.empty:
        raise ConfigError(f"{source}: no measured step to calibrate from; pass a completed run (--from RUN_DIR)")

    def col(name: str) -> pd.Series:
        return rows[name].astype(float).fillna(0.0) if name in rows else pd.Series(0.0, index=rows.index)

    exposed = col("comm_exposed_s")
    bwd = col("bwd_s")
    # the exposed wait sits in backward (DDP waits for its last bucket there) or, where backward is
    # shorter than it, in the optimizer step (Horovod's synchronize)
    in_bwd = np.minimum(exposed, bwd)
    bwd_compute, opt_compute = bwd - in_bwd, col("opt_s") - (exposed - in_bwd)
    other = (col("step_s") - col("data_s") - col("fwd_s") - bwd - col("opt_s")).clip(lower=0.0)
    step_s = float(col("step_s").mean())
    # the synthetic loader makes its batches on the device: no capacity, only the handover it measured
    unbounded = loader == "synthetic" or step_s <= 0
    return Parts(
        fwd_s=float(col("fwd_s").mean()),
        bwd_s=float(bwd_compute.mean()),
        opt_s=float(opt_compute.clip(lower=0.0).mean()),
        data_s=float(col("data_s").mean()) if unbounded else 0.0,
        other_s=float(other.mean()),
        jitter_s=spread(col("step_s") - exposed - col("data_s"), rows),
        per_gpu_batch=per_gpu_batch,
        source=source,
        sample_unit=sample_unit,
        loader_img_s=math.inf if unbounded else per_gpu_batch / step_s,
        data_jitter_s=spread(col("data_s"), rows),
        loader=loader,
        data_source=source,
        num_steps=int(rows["step"].nunique()) if "step" in rows else len(rows),
    )


# a calibration run waited for its loader where its mean data time is at least this share of its mean step: its
# batches' arrivals then show the loader's own pace (LOADER_BOUND_SHARE x the step is far above a handover)
LOADER_BOUND_SHARE = 0.05


def arrival_intervals(steps: pd.DataFrame) -> tuple[float, ...]:
    """The seconds between the batches a run's loader delivered, as its ranks received them: batch k arrived
    data_s_k after step k began, so between consecutive steps k-1, k of one rank it is step_s_(k-1) -
    data_s_(k-1) + data_s_k. Only a run that waited for its loader (loader_bound) shows the loader's pace this
    way; in one that did not, a batch was there before the rank asked, and these are the steps' times.
    steps: a run's measured rows (rank, step, step_s, data_s)."""
    out: list[float] = []
    rank = steps["rank"] if "rank" in steps else pd.Series(0, index=steps.index)
    for _, rows in steps.groupby(rank):
        rows = rows.sort_values("step")
        step, data = rows["step_s"].to_numpy(float), rows["data_s"].fillna(0.0).to_numpy(float)
        follows = np.diff(rows["step"].to_numpy()) == 1  # warm-up and profiled steps leave gaps
        out += [float(v) for v in (step[:-1] - data[:-1] + data[1:])[follows] if v > 0]
    return tuple(out)


def loader_bound(steps: pd.DataFrame) -> bool:
    """The run waited for its loader: mean data time >= LOADER_BOUND_SHARE of the mean step."""
    step = float(steps["step_s"].mean()) if "step_s" in steps else 0.0
    return step > 0 and float(steps["data_s"].fillna(0.0).mean()) >= LOADER_BOUND_SHARE * step


def loader_capacity(measurements: pd.DataFrame, *, case: str, workers: int, source: str) -> pd.Series:
    """One rank's loader alone: `ddlbench loaderbench`'s row of this case at this worker (or thread) count,
    the fastest where there are several. measurements: loaderbench.json's (case, workers, img_s,
    batch_intervals_s)."""
    rows = measurements[measurements["case"] == case]
    if rows.empty:
        cases = sorted(set(measurements["case"][measurements["workers"].notna()].astype(str)))
        raise ConfigError(
            f"--loader-capacity {source}: no {case} row (it has {', '.join(cases) or 'none'}); run 'ddlbench "
            f"loaderbench ... --loaders {case}' on the machine predicted"
        )
    at = rows[rows["workers"] == workers]
    if at.empty:
        counts = ", ".join(str(int(w)) for w in sorted(rows["workers"].dropna()))
        raise ConfigError(
            f"--loader-capacity {source}: no {case} row at {workers} workers/threads, the prediction's (it has "
            f"{counts}); run 'ddlbench loaderbench ... --loaders {case} --workers {workers}' on the machine predicted"
        )
    return at.loc[at["img_s"].idxmax()]


def load_folders(paths: Sequence[str], *, what: str):
    from analysis.load import load_campaign

    campaigns = []
    for text in paths:
        path = Path(text)
        if not path.exists():
            raise ConfigError(f"{what} {text}: no such file or directory; give a run directory or a runs folder")
        campaigns.append(load_campaign(path if path.is_dir() else path.parent))
    return campaigns


class Calibration:
    """The calibration runs: their Parts, and which one predicts a held-out run. A calibration run's label is
    the name of the folder it lies in; a held-out run in a folder of the same name, of the same size, takes
    it (perf/predict_cpu.py measures each calibration just before the runs it calibrates, so that both see
    the machine alike); else one of its size; else the smallest."""

    def __init__(
        self,
        paths: Sequence[str],
        *,
        cell: dict[str, Any],
        scale: float,
        loader_modelled: bool = False,
        system: Mapping[str, Any] | None = None,
        compute: Parts | None = None,
        what: str = "--from",
    ) -> None:
        """system: the system predicted ({name, device}); a run that computed elsewhere is refused unless its
        compute is scaled (scale, given) or replaced (compute: Parts.with_compute)."""
        self.parts: dict[int, Parts] = {}
        self.labelled: dict[tuple[str, int], Parts] = {}
        self.run_dirs: set[str] = set()
        self.systems: dict[int, dict[str, Any]] = {}  # where the run of each size computed (cell.run_system)
        for campaign, text in zip(load_folders(paths, what=what), paths):
            runs = campaign.counted
            if runs.empty:
                raise ConfigError(f"{what} {text}: no completed run there; pass the directory of a completed run")
            for _, row in runs.iterrows():
                refused = unmeasured(Path(row["run_dir"]).name, measured_cell(row), cell)
                if refused and not (refused.startswith("loader=") and loader_modelled):
                    raise ConfigError(refused)
                ran = {**run_system(Path(row["run_dir"])), "run": Path(row["run_dir"]).name}
                elsewhere = other_device(Path(row["run_dir"]).name, ran, system) if system else None
                if elsewhere and what == "--compute-from":
                    raise ConfigError(
                        f"--compute-from {text}: the run {elsewhere.partition(' ')[2]}; give a run made on "
                        f"system={system['name']}"
                    )
                if elsewhere and compute is None and scale is None:
                    raise ConfigError(
                        f"system={system['name']}: the calibration run {elsewhere}; pass --compute-scale F (its "
                        "compute time over the calibration's), or --compute-from RUN_DIR (a run of this "
                        f"configuration on system={system['name']})"
                    )
                steps = campaign.steps[campaign.steps["run_id"].astype(str) == str(row["run_id"])]
                parts = parts_from_steps(
                    steps,
                    per_gpu_batch=int(row["per_gpu_batch"]),
                    source=f"{Path(row['run_dir']).name}",
                    # runs from before summary.json said (NaN in the runs table) counted images
                    sample_unit=str(row["sample_unit"]) if pd.notna(row.get("sample_unit")) else "images",
                    loader=measured_cell(row)["loader"],
                )
                parts = _loader_from_run(parts, steps, row) if not loader_modelled else parts
                parts = parts.scaled(scale) if scale not in (None, 1.0) else parts
                parts = parts.with_compute(compute) if compute is not None else parts
                world = int(row["world_size"])
                self.parts.setdefault(world, parts)
                self.systems.setdefault(world, ran)
                self.labelled[(Path(row["run_dir"]).resolve().parent.name, world)] = parts
                self.run_dirs.add(str(Path(row["run_dir"]).resolve()))

    def for_world(self, world: int, *, label: str | None = None) -> Parts:
        """The run of the same label and size, else of the same size, else the smallest."""
        return self.labelled.get((label, world)) or self.parts.get(world) or self.parts[min(self.parts)]

    def system_for(self, world: int) -> dict[str, Any]:
        """Where for_world(world)'s run of that size (else the smallest) computed: cell.run_system."""
        return self.systems.get(world) or self.systems[min(self.systems)]


def _loader_from_run(parts: Parts, steps: pd.DataFrame, row: Any) -> Parts:
    """A calibration run that waited for its loader (loader_bound): the loader's pace as its batches arrived
    (arrival_intervals) with the run's own workers and queue, simulated as loaderbench's would be; any other
    run keeps the closed form (its loader's capacity: at least a batch per mean step)."""
    measured = measured_steps(steps)
    if math.isinf(parts.loader_img_s) or measured.empty or not loader_bound(measured):
        return parts
    loader = {"name": row.get("loader"), **config_of(row.to_dict(), "loader")}
    workers = worker_count(loader)
    intervals = arrival_intervals(measured)
    if not intervals:
        return parts
    return parts.with_loader(
        loader=parts.loader,
        img_s=parts.per_gpu_batch / float(np.mean(intervals)),
        source=f"the arrivals of {parts.source}'s batches: it waited for its loader",
        intervals_s=intervals,
        makers=batch_makers(loader, workers=workers),
        queue=queue_depth(loader, workers=workers),
    )


class LoaderBench:
    """`ddlbench loaderbench`'s JSON (--loader-capacity): one rank's loader alone on the machine predicted, checked
    against the configuration predicted (its loader case, per-GPU batch and image size)."""

    def __init__(self, path: str, cell: dict[str, Any], *, image_size: int) -> None:
        self.path = path
        file = Path(path)
        if not file.is_file():
            raise ConfigError(
                f"--loader-capacity {path}: no such file; give the loaderbench.json of 'ddlbench loaderbench --out DIR'"
            )
        try:
            bench = json.loads(file.read_text())
            self.measurements = pd.DataFrame(bench["measurements"])
        except (ValueError, KeyError, TypeError):
            raise ConfigError(
                f"--loader-capacity {path}: not a loaderbench.json (no 'measurements'); give the file 'ddlbench "
                "loaderbench --out DIR' writes"
            ) from None
        if cell["loader"] == "synthetic":
            raise ConfigError(
                f"--loader-capacity {path}: loader=synthetic reads nothing; predict another loader, or drop the option"
            )
        for key, asked in (("per_gpu_batch", cell["per_gpu_batch"]), ("image_size", image_size)):
            if bench.get(key) != asked:
                timed = (
                    f"timed {key} {bench[key]}" if key in bench else f"records no {key} (loaderbench before 2026-12-04)"
                )
                override = "run.per_gpu_batch" if key == "per_gpu_batch" else "model.image_size"
                raise ConfigError(
                    f"--loader-capacity {path}: the file {timed}, the prediction's is {asked}; run 'ddlbench "
                    f"loaderbench {override}={asked} ...' on the machine predicted"
                )

    def loader(self, case: str, loader: dict[str, Any]) -> dict[str, Any]:
        """Parts.with_loader's arguments for this loader at its own worker (or thread) count: its img/s, the
        seconds between its batches, the batches it makes at once and prepares ahead."""
        workers = worker_count(loader)
        row = loader_capacity(self.measurements, case=case, workers=workers, source=self.path)
        intervals = row.get("batch_intervals_s")
        if not isinstance(intervals, list) or not intervals:
            raise ConfigError(
                f"--loader-capacity {self.path}: its {case} row has no batch intervals, so the loader's spread is "
                "unknown; run 'ddlbench loaderbench' again (it records them since 2026-12-04)"
            )
        return {
            "loader": case,
            "img_s": float(row["img_s"]),
            "intervals_s": intervals,
            "makers": batch_makers(loader, workers=workers),
            "queue": queue_depth(loader, workers=workers),
            "source": f"--loader-capacity {self.path}",
        }
