"""The GPU suite: every README headline that a lent H200 re-measures, planned here, run by perf/gpu_suite.sh.

One GPU (nvidia-h200), two measuring calls of at most 600 s: call 1 (DALI, DeepSpeed; Horovod built while the
JPEGs are written) and call 2 (transformers). Two GPUs (nvidia-h200-x2, when lent): call x2a and x2b. Each step
runs its commands once, one after the other, and turns their outputs into figures (ratios, img/s, busbw); a
step is skipped, and says so, where its estimate no longer fits the call's budget.

    python perf/gpu_suite.py plan [--call 1]                # the steps, their commands and estimates
    python perf/gpu_suite.py run --call 1 --out $OUT         # on the device (perf/gpu_suite.sh calls it)
    python perf/gpu_suite.py report A.json [B.json ...] --out docs/results/<date>-<device>.md
                                                             # the results file and the README rows that change

The commands are the maintained scripts' (perf/README.md says whose): harness_overhead.py, bare_bert_qa.py,
dali_gpu.py's data, loaders_hw_gpu.sh's 200-step loader runs, trace_gpu.sh's window against none,
references_gpu.sh's modes, maxbatch_search_gpu.sh's searches, horovod_gpu.sh's cells, deepspeed_gpu.sh's and
breakdown_gpu.sh's 2-GPU cells and commbench. tests/unit/test_gpu_suite_plan.py composes every step's
overrides on a CPU (`make test-fast`), so the plan cannot rot between lent devices.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CALL_LIMIT_S = 600  # one device call
BUDGET_S = 560  # no step starts whose estimate would end past this (the rest: writing, packing, margin)
# what a call does before its first step (perf/gpu_suite.sh: installs; in call 1 Horovod's build beside DALI's unpacking
# and the loaders' JPEGs, CPU work that runs together before anything is timed; nccl-tests' build in x2a)
SETUP_S = {"1": 120, "2": 20, "x2a": 130, "x2b": 20}
CALLS = {"1": "nvidia-h200", "2": "nvidia-h200", "x2a": "nvidia-h200-x2", "x2b": "nvidia-h200-x2"}
DATA = "/tmp/ddl_jpeg"  # 4,096 JPEGs of 500x375 at quality 94, as perf/loaders_gpu.sh writes them
STAGE = "/tmp/stage"  # the carried sets, copied there by `gpu_suite.sh stage` (they survive while the machine is warm)

# each ddlbench run's shared settings (ResNet-50 bf16, batch 256, as the headline table)
R50 = (
    "system=h200",
    "precision=amp_bf16",
    "model=resnet",
    "model.depth=50",
    "run.per_gpu_batch=256",
    "run.log_every=0",
)
R50_STEPS = ("run.warmup_steps=20", "run.steps=60")
BERT = (
    "system=h200",
    "precision=amp_bf16",
    "loader=synthetic",
    "model=bert",
    "model.size=large",
    "optim.name=adamw",
    "optim.lr=3e-5",
    "optim.weight_decay=0.01",
    "run.log_every=0",
)
BERT_RUN = (*BERT, "run.per_gpu_batch=32", "run.warmup_steps=10", "run.steps=30", "run.trace=off")


@dataclass(frozen=True, slots=True)
class Run:
    """One command of a step. `command` is a ddlbench subcommand (run, maxbatch, commbench, predict) taking
    `overrides`, or "" for another program (`argv`). {py}, {root}, {stage}, {data} are filled in at run time.
    `parse`: a regex whose first group is the run's value (else a run's summary.json, or an extractor)."""

    label: str
    command: str = "run"
    overrides: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    parse: str = ""
    extract: str = ""  # commbench, nccl_tests: a named reader of the run's output file
    cap_s: int = 150

    def config(self, *, root: Path) -> list[str]:
        """The overrides ddlbench composes for this command (none for another program)."""
        filled = [o.format(root=root) for o in self.overrides]
        return [*filled, f"run.dir={root}/{self.label}"] if self.command == "run" else filled

    def args(self, *, py: str, root: Path) -> list[str]:
        fill = {"py": py, "root": str(root), "stage": STAGE, "data": DATA}
        if self.command:
            return [
                py,
                "-m",
                "ddlbench.cli",
                self.command,
                *self.config(root=root),
                *(a.format(**fill) for a in self.argv),
            ]
        return [a.format(**fill) for a in self.argv]


@dataclass(frozen=True, slots=True)
class Figure:
    """A number the step reports: `of`'s value (a run label), over `over`'s when given (a ratio)."""

    name: str
    of: str
    over: str = ""
    field: str = "throughput_img_s"  # summary.json's; "value" for a parsed run; an extractor's key
    unit: str = "ratio"  # ratio, ratio4 (4 decimals), pct (a ratio as %), img/s, seq/s, GB/s, batch


@dataclass(frozen=True, slots=True)
class Step:
    name: str
    call: str
    what: str
    estimate_s: int  # from the maintained scripts' logs (docs/results), start to end on the H200
    runs: tuple[Run, ...]
    figures: tuple[Figure, ...]
    needs: tuple[str, ...] = ()  # deepspeed, transformers, dali, horovod, nccl-tests: installed by gpu_suite.sh


def merged(base: tuple[str, ...], *overrides: str) -> tuple[str, ...]:
    """base with overrides, each key once (Hydra refuses a key given twice): an override replaces base's."""
    keys = {o.partition("=")[0] for o in overrides}
    return (*(o for o in base if o.partition("=")[0] not in keys), *overrides)


def r50(label: str, *overrides: str) -> Run:
    return Run(label, overrides=merged((*R50, "loader=synthetic", "run.trace=off", *R50_STEPS), *overrides))


def scaling(framework: str, *overrides: str) -> tuple[Run, Run]:
    """The same cell on 1 and 2 GPUs (weak scaling: the per-GPU batch stays)."""
    return tuple(r50(f"{framework}-g{g}", *overrides, f"system.ranks_per_node={g}") for g in (1, 2))


def efficiency(framework: str, name: str) -> Figure:
    return Figure(
        f"{name} per-GPU efficiency, 2 vs 1 GPU", f"{framework}-g2", f"{framework}-g1", "per_gpu_img_s", "pct"
    )


HARNESS = ("{py}", "perf/harness_overhead.py", "--depth", "50", "--batch", "256", "--precision", "amp_bf16")
HARNESS_RESULT = r"median ratio ddlbench/bare = ([\d.]+)"
MAXBATCH_RESULT = r"largest per-GPU batch that fits: (\d+)"
LOADER = ("run.warmup_steps=45", "run.steps=200", f"data.path={DATA}")  # loaders_hw_gpu.sh's 200-step runs

STEPS: tuple[Step, ...] = (
    Step(
        "loaders",
        "1",
        "training fed by DALI, native_gpu and native (the rank's CPUs less one) against synthetic, 200 steps",
        160,
        tuple(
            Run(f"loader-{name}", overrides=merged(R50, f"loader={name}", *LOADER))
            for name in ("synthetic", "dali", "native_gpu", "native")
        ),
        tuple(
            Figure(f"{name} / synthetic", f"loader-{name}", "loader-synthetic")
            for name in ("dali", "native_gpu", "native")
        ),
        ("dali",),
    ),
    Step(
        "trace_telemetry",
        "1",
        "the sampled trace window (run.trace=auto) and telemetry at 10 Hz against neither, ResNet-50 DDP",
        96,
        (r50("r50-ddp"), r50("r50-window", "run.trace=auto"), r50("r50-telemetry", "run.telemetry_hz=10")),
        (
            Figure("trace window / none", "r50-window", "r50-ddp", unit="ratio4"),
            Figure("telemetry 10 Hz / none", "r50-telemetry", "r50-ddp", unit="ratio4"),
            Figure("ResNet-50 DDP", "r50-ddp", unit="img/s"),
        ),
    ),
    Step(
        "modes_r50",
        "1",
        "ResNet-50 under DeepSpeed ZeRO-1, ZeRO-2 and FSDP2 (shard_unit children) against DDP (trace_telemetry's r50-ddp)",
        96,
        (
            r50("r50-zero1", "framework=deepspeed", "framework.zero_stage=1"),
            r50("r50-zero2", "framework=deepspeed", "framework.zero_stage=2"),
            r50("r50-fsdp", "framework=fsdp"),
        ),
        (
            Figure("ZeRO-1 / DDP, ResNet-50", "r50-zero1", "r50-ddp"),
            Figure("ZeRO-2 / DDP, ResNet-50", "r50-zero2", "r50-ddp"),
            Figure("FSDP2 / DDP, ResNet-50", "r50-fsdp", "r50-ddp"),
        ),
        ("deepspeed",),
    ),
    Step(
        "maxbatch_r50",
        "1",
        "`ddlbench maxbatch`, ResNet-50 DDP bf16 (maxbatch_search_gpu.sh's first search)",
        80,
        (
            Run(
                "maxbatch-r50",
                "maxbatch",
                overrides=("system=h200", "framework=ddp", "precision=amp_bf16", "model=resnet", "model.depth=50")
                + ("run.root={root}/maxbatch",),
                argv=("--campaign", "resnet"),
                parse=MAXBATCH_RESULT,
                cap_s=170,
            ),
        ),
        (Figure("largest batch, ResNet-50", "maxbatch-r50", field="value", unit="batch"),),
    ),
    Step(
        "harness",
        "2",
        "ddlbench's loop against a bare loop in one process (ResNet-50 bf16 b256), eager and torch.compile'd",
        135,
        (
            Run("harness-eager", "", argv=(*HARNESS, "--rounds", "1"), parse=HARNESS_RESULT),
            Run("harness-compiled", "", argv=(*HARNESS, "--rounds", "1", "--compile"), parse=HARNESS_RESULT, cap_s=240),
        ),
        (
            Figure("ddlbench / bare, eager", "harness-eager", field="value", unit="ratio4"),
            Figure("ddlbench / bare, compiled", "harness-compiled", field="value", unit="ratio4"),
        ),
    ),
    Step(
        "bert",
        "2",
        "BERT-large QA (batch 32, seq 384, AdamW): the bare HF loop, DDP, ZeRO-1, ZeRO-2, FSDP2",
        205,
        (
            Run(
                "bert-bare",
                "",
                argv=("{py}", "perf/bare_bert_qa.py", "--size", "large", "--batch", "32", "--seq-len", "384")
                + ("--warmup", "10", "--steps", "30", "--json", "{root}/bert-bare.json"),
                parse=r"RESULT bare_bert_qa \S+ \S+ \S+: ([\d,.]+) seq/s",
            ),
            Run("bert-ddp", overrides=BERT_RUN),
            Run("bert-zero1", overrides=merged(BERT_RUN, "framework=deepspeed", "framework.zero_stage=1")),
            Run("bert-zero2", overrides=merged(BERT_RUN, "framework=deepspeed", "framework.zero_stage=2")),
            Run("bert-fsdp", overrides=merged(BERT_RUN, "framework=fsdp")),
        ),
        (
            Figure("DDP / bare, BERT-large", "bert-ddp", "bert-bare"),
            Figure("BERT-large DDP", "bert-ddp", unit="seq/s"),
            Figure("BERT-large ZeRO-1", "bert-zero1", unit="seq/s"),
            Figure("BERT-large ZeRO-2", "bert-zero2", unit="seq/s"),
            Figure("BERT-large FSDP2", "bert-fsdp", unit="seq/s"),
            Figure("FSDP2 / DDP, BERT-large", "bert-fsdp", "bert-ddp"),
        ),
        ("deepspeed", "transformers"),
    ),
    Step(
        "horovod",
        "2",
        "Horovod (built in call 1) against DDP (r50-ddp, call 1) at bf16, and against its own "
        "pytorch_synthetic_benchmark.py at fp32 (its precision)",
        100,
        (
            r50("r50-horovod", "framework=horovod"),
            r50("r50-horovod-fp32", "framework=horovod", "precision=fp32"),
            Run(
                "horovod-synthetic",
                "",
                argv=(
                    "{py}",
                    "{stage}/horovod/pytorch_synthetic_benchmark.py",
                    "--batch-size",
                    "256",
                    "--num-iters",
                    "5",
                ),
                parse=r"Img/sec per GPU: ([\d.]+)",
            ),
        ),
        (
            Figure("Horovod / DDP", "r50-horovod", "r50-ddp"),
            Figure("ddlbench Horovod / Horovod's synthetic benchmark, fp32", "r50-horovod-fp32", "horovod-synthetic"),
        ),
        ("horovod",),
    ),
    Step(
        "maxbatch_bert",
        "2",
        "`ddlbench maxbatch`, BERT-large DDP bf16 (maxbatch_search_gpu.sh's second search)",
        75,
        (
            Run(
                "maxbatch-bert",
                "maxbatch",
                overrides=merged(BERT, "framework=ddp", "run.root={root}/maxbatch"),
                argv=("--campaign", "bert"),
                parse=MAXBATCH_RESULT,
                cap_s=170,
            ),
        ),
        (Figure("largest batch, BERT-large", "maxbatch-bert", field="value", unit="batch"),),
        ("transformers",),
    ),
    Step(
        "scaling",
        "x2a",
        "weak scaling on 2 GPUs of one host: DDP, Horovod, FSDP2, and DataParallel (one process) beside DDP",
        230,
        (
            *scaling("ddp"),
            *scaling("horovod", "framework=horovod"),
            *scaling("fsdp", "framework=fsdp"),
            r50("dp-g2", "framework=dp", "system.ranks_per_node=2"),
        ),
        (
            efficiency("ddp", "DDP"),
            efficiency("horovod", "Horovod"),
            efficiency("fsdp", "FSDP2"),
            Figure("DataParallel / DDP, 2 GPUs", "dp-g2", "ddp-g2"),
        ),
        ("horovod",),
    ),
    Step(
        "commbench",
        "x2a",
        "ddlbench commbench on 2 GPUs beside nccl-tests' all_reduce_perf (built there from NVIDIA/nccl-tests)",
        90,
        (
            Run(
                "commbench-g2",
                "commbench",
                argv=("--nproc", "2", "--max-bytes", "4294967296", "--out", "{root}/commbench-g2.json"),
                extract="commbench",
                cap_s=150,
            ),
            Run(
                "nccl-tests-g2",
                "",
                argv=("/tmp/nccl-tests/build/all_reduce_perf", "-b", "1M", "-e", "4G", "-f", "2", "-g", "2"),
                extract="nccl_tests",
                cap_s=120,
            ),
        ),
        (
            Figure("commbench all_reduce busbw, 1 GiB", "commbench-g2", field="busbw_1GiB", unit="GB/s"),
            Figure("commbench all_reduce busbw, 4 GiB", "commbench-g2", field="busbw_4GiB", unit="GB/s"),
            Figure("commbench P2P copy, 256 MiB", "commbench-g2", field="p2p_copy", unit="GB/s"),
            Figure("nccl-tests all_reduce busbw, 1 GiB", "nccl-tests-g2", field="busbw_1GiB", unit="GB/s"),
            Figure("nccl-tests all_reduce busbw, 4 GiB", "nccl-tests-g2", field="busbw_4GiB", unit="GB/s"),
            Figure("commbench / nccl-tests, 1 GiB", "commbench-g2", "nccl-tests-g2", field="busbw_1GiB"),
        ),
        ("nccl-tests",),
    ),
    Step(
        "predict_x2",
        "x2a",
        "the predictor's first held-out GPU point: the 2-GPU DDP run predicted from the 1-GPU one and commbench",
        15,
        (
            Run(
                "predict-g2",
                "predict",
                overrides=merged(R50, "loader=synthetic", "framework=ddp"),
                # every other completed ResNet-50 run of the call is held out (DDP, Horovod, FSDP2 on 1 and 2
                # GPUs; a mode the model does not cover is listed as skipped), its network the commbench file
                # beside the runs
                argv=("--from", "{root}/ddp-g1", "--validate", "{root}", "--gpus", "1,2", "--out", "{root}/predicted"),
                parse=r"mean \|error\| ([\d.]+)%",
                cap_s=60,
            ),
        ),
        (Figure("predict, 2-GPU DDP held out: mean |error| %", "predict-g2", field="value", unit="%"),),
    ),
    Step(
        "scaling_deepspeed",
        "x2b",
        "DeepSpeed ZeRO-0, 1, 2 on 1 and 2 GPUs (deepspeed_gpu.sh's cells) against DDP (scaling's ddp-g1)",
        210,
        tuple(
            run for z in (0, 1, 2) for run in scaling(f"zero{z}", "framework=deepspeed", f"framework.zero_stage={z}")
        ),
        tuple(Figure(f"ZeRO-{z} / DDP, 1 GPU", f"zero{z}-g1", "ddp-g1", "per_gpu_img_s") for z in (0, 1, 2))
        + tuple(efficiency(f"zero{z}", f"ZeRO-{z}") for z in (0, 1, 2)),
        ("deepspeed",),
    ),
)

# README "Headline figures": the claim's first words -> the figures the suite makes for it (by name), in the
# order the row's figure lists them; rows not here are made by a script outside the suite (the README says which)
HEADLINES: dict[str, tuple[str, ...]] = {
    "ddlbench's loop / a bare training loop": ("ddlbench / bare, eager",),
    "DDP per-GPU efficiency": ("DDP per-GPU efficiency, 2 vs 1 GPU",),
    "Horovod / DDP, 1 GPU": ("Horovod / DDP",),
    "DeepSpeed / DDP, 1 GPU": tuple(f"ZeRO-{z} / DDP, 1 GPU" for z in (0, 1, 2)),
    "DeepSpeed per-GPU efficiency": tuple(f"ZeRO-{z} per-GPU efficiency, 2 vs 1 GPU" for z in (0, 1, 2)),
    "training fed by DALI / native_gpu / native": ("dali / synthetic", "native_gpu / synthetic", "native / synthetic"),
    "BERT-large QA (seq/s, batch 32)": tuple(f"BERT-large {m}" for m in ("DDP", "FSDP2", "ZeRO-1", "ZeRO-2")),
    "`ddlbench run` DDP / a bare loop": ("DDP / bare, BERT-large", "ddlbench / bare, eager"),
    "FSDP2 / DDP, 1 GPU": ("FSDP2 / DDP, BERT-large", "FSDP2 / DDP, ResNet-50"),
    "`ddlbench maxbatch`, 1 GPU": ("largest batch, ResNet-50", "largest batch, BERT-large"),
    "phase timers vs a profiler trace": ("trace window / none",),
    "NCCL all-reduce busbw": (
        "commbench all_reduce busbw, 1 GiB",
        "commbench all_reduce busbw, 4 GiB",
        "commbench P2P copy, 256 MiB",
    ),
}


def steps_of(call: str | None = None) -> list[Step]:
    return [s for s in STEPS if call in (None, s.call)]


def figure_names() -> set[str]:
    return {f.name for s in STEPS for f in s.figures}


def estimate_s(call: str) -> int:
    """The call's planned seconds: its setup and every step's estimate."""
    return SETUP_S[call] + sum(s.estimate_s for s in steps_of(call))


# --- on the device ----------------------------------------------------------------------------------------


def _summary(root: Path, label: str) -> dict:
    path = root / label / "summary.json"
    return json.loads(path.read_text()) if path.exists() else {"status": "no summary"}


def _extract(kind: str, root: Path, run: Run, log: str) -> dict[str, float]:
    if kind == "commbench":
        rows = json.loads((root / "commbench-g2.json").read_text())
        values = {}
        for row in rows:
            if row["op"] == "all_reduce" and row["size_bytes"] in (2**30, 2**32):
                values[f"busbw_{row['size_bytes'] // 2**30}GiB"] = row["busbw_gb_s"]
            if row["op"] == "p2p_copy":
                values["p2p_copy"] = max(values.get("p2p_copy", 0.0), row["algbw_gb_s"])
        return values
    if kind == "nccl_tests":  # size count type redop root time algbw busbw #wrong (out of place) ...
        values = {}
        for line in log.splitlines():
            cols = line.split()
            if len(cols) > 8 and cols[0] in (str(2**30), str(2**32)):
                values[f"busbw_{int(cols[0]) // 2**30}GiB"] = float(cols[7])
        return values
    raise ValueError(f"no extractor {kind!r}")


def run_step(step: Step, *, py: str, root: Path, out: Path, deadline: float) -> dict:
    """Run a step's commands once each; its record: each run's command, wall time, status and values."""
    record = {"step": step.name, "call": step.call, "what": step.what, "runs": {}}
    if time.monotonic() + step.estimate_s > deadline:
        record["skipped"] = f"its estimate ({step.estimate_s} s) does not fit what is left of the call's {BUDGET_S} s"
        print(f"== {step.name}: skipped, {record['skipped']}", flush=True)
        return record
    for run in step.runs:
        argv = run.args(py=py, root=root)
        print(f"== {step.name} / {run.label}: {shlex.join(argv)}", flush=True)
        start = time.monotonic()
        try:
            done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=run.cap_s)
            log, code = done.stdout + done.stderr, done.returncode
        except subprocess.TimeoutExpired as timeout:
            log, code = f"{timeout.stdout or ''}{timeout.stderr or ''}\ntimed out after {run.cap_s} s", 124
        (out / "logs").mkdir(parents=True, exist_ok=True)
        (out / "logs" / f"{run.label}.log").write_text(log if isinstance(log, str) else log.decode(errors="replace"))
        entry = {"command": shlex.join(argv), "wall_s": round(time.monotonic() - start, 1), "rc": code, "values": {}}
        try:
            if run.parse:
                found = re.search(run.parse, log)
                entry["values"] = {"value": float(found.group(1).replace(",", ""))} if found else {}
            elif run.extract:
                entry["values"] = _extract(run.extract, root, run, log)
            elif run.command == "run":
                summary = _summary(root, run.label)
                entry["status"] = summary.get("status")
                if summary.get("status") == "completed":
                    entry["values"] = {k: summary[k] for k in ("throughput_img_s", "per_gpu_img_s", "last_loss")}
        except (OSError, ValueError, KeyError) as error:
            entry["error"] = f"{type(error).__name__}: {error}"
        print(f"   rc {code}, {entry['wall_s']} s, {entry['values'] or 'no value'}", flush=True)
        record["runs"][run.label] = entry
    return record


def figures(records: list[dict]) -> dict[str, dict]:
    """Every step's figures from the runs' values (the runs of all records: a ratio may cross steps and calls)."""
    values = {label: r["values"] for rec in records for label, r in rec.get("runs", {}).items()}
    out = {}

    def pick(label: str, field: str) -> float | None:  # a parsed run (the bare loops, Horovod's own) has "value" only
        found = values.get(label, {})
        return found.get(field, found.get("value"))

    for step in STEPS:
        for fig in step.figures:
            of = pick(fig.of, fig.field)
            over = pick(fig.over, fig.field) if fig.over else 1.0
            value = of / over if of is not None and over else None
            out[fig.name] = {"step": step.name, "value": value, "unit": fig.unit, "of": fig.of, "over": fig.over}
    return out


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return {
        "ratio": f"{value:.3f}",
        "ratio4": f"{value:.4f}",  # the harness and the window: a fraction of a percent apart
        "pct": f"{value:.1%}",
        "batch": f"{value:.0f}",
        "%": f"{value:.1f}%",
    }.get(unit, f"{value:,.1f} {unit}")


def readme_rows(readme: Path = REPO / "README.md") -> dict[str, str]:
    """The Headline figures table: claim -> figure, as the README has them."""
    text = readme.read_text()
    section = text.split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] not in ("claim", "---"):
            rows[cells[0]] = cells[1]
    return rows


def headline_changes(found: dict[str, dict], readme: Path = REPO / "README.md") -> list[str]:
    """One line per README row the suite makes: the README's figure, the suite's, and whether they differ."""
    lines = []
    rows = readme_rows(readme)
    for start, names in HEADLINES.items():
        claim = next((c for c in rows if c.startswith(start)), None)
        if claim is None:
            lines.append(f"README has no row starting {start!r}: update HEADLINES in perf/gpu_suite.py")
            continue
        new = [fmt(found.get(n, {}).get("value"), found.get(n, {}).get("unit", "ratio")) for n in names]
        if all(v == "-" for v in new):
            lines.append(f"not measured: {claim[:70]} (README {rows[claim]})")
            continue
        old_numbers = re.findall(r"\d[\d,]*\.?\d*", rows[claim])
        same = all(  # the number alone: "344.6 seq/s" is the README's 344.6
            v.split()[0].rstrip("%").replace(",", "") in [o.replace(",", "") for o in old_numbers]
            for v in new
            if v != "-"
        )
        lines.append(
            f"{'same   ' if same else 'CHANGED'}: {claim[:70]}: README {rows[claim]} | suite {' / '.join(new)}"
        )
    return lines


def write_results(records: list[dict], machine: dict, path: Path) -> None:
    found = figures(records)
    lines = [
        f"# The GPU suite (perf/gpu_suite.sh) — {machine.get('date', '?')}, {machine.get('device', '?')}",
        "",
        f"Machine: {machine.get('gpus', '?')}; {machine.get('cpus', '?')} CPU cores. Commit {machine.get('commit', '?')}. "
        f"Versions: {machine.get('versions', '?')}. `NCCL_NVLS_ENABLE=0`. Each command ran once (no repeats): "
        "a ratio across steps or calls compares runs minutes apart on the same machine, and across calls "
        "on a fresh one where the machine went back between them.",
        "",
        "## Figures",
        "",
        "| step | figure | value | of / over |",
        "|---|---|---|---|",
    ]
    for name, f in found.items():
        lines.append(
            f"| {f['step']} | {name} | {fmt(f['value'], f['unit'])} | {f['of']}{' / ' + f['over'] if f['over'] else ''} |"
        )
    lines += ["", "## README headline rows", "", "```", *headline_changes(found), "```", "", "## Commands", ""]
    for rec in records:
        lines.append(f"### {rec['step']} (call {rec['call']}): {rec['what']}")
        lines.append("")
        if rec.get("skipped"):
            lines += [f"Skipped: {rec['skipped']}.", ""]
            continue
        for label, r in rec["runs"].items():
            status = r.get("status") or ("ok" if r["rc"] == 0 else f"rc {r['rc']}")
            lines.append(f"- `{label}` ({r['wall_s']} s, {status}): `{r['command']}`")
        lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def machine_facts(py: str, commit: str, device: str) -> dict:
    def out(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return "?"

    versions = out(
        [
            py,
            "-c",
            "import sys, importlib.metadata as m, torch\n"
            "names = ['torch', 'torchvision', 'hydra-core', 'deepspeed', 'horovod', 'nvidia-dali-cuda130', 'transformers']\n"
            "have = [f'{n} {m.version(n)}' for n in names if any(d.metadata['Name'] == n for d in m.distributions())]\n"
            "nccl = '.'.join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else '-'\n"
            "print(f'python {sys.version.split()[0]}, ' + ', '.join(have) + f', NCCL {nccl}')",
        ]
    )
    gpus = out(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    cpus = out(["nproc"])
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d")
    return {
        "date": date,
        "device": device,
        "commit": commit,
        "versions": versions,
        "gpus": gpus.replace("\n", "; "),
        "cpus": cpus,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    plan = sub.add_parser("plan", help="print the steps, their commands and estimates")
    plan.add_argument("--call", choices=CALLS)
    run = sub.add_parser("run", help="run one call's steps (on the device)")
    run.add_argument("--call", choices=CALLS, required=True)
    run.add_argument("--out", type=Path, required=True, help="$OUT: the records and the results file come back from it")
    run.add_argument(
        "--root", type=Path, default=Path("/tmp/gpu_suite"), help="the run directories (kept on the device)"
    )
    run.add_argument("--commit", default="unknown")
    run.add_argument("--steps", default="", help="comma list: only these steps")
    run.add_argument("--spent-s", type=float, default=None, help="seconds the call spent before (its setup)")
    report = sub.add_parser("report", help="the results file from calls' records (here or on the device)")
    report.add_argument("records", nargs="+", type=Path)
    report.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    if args.action == "plan":
        for call in [args.call] if args.call else list(CALLS):
            print(
                f"# call {call} ({CALLS[call]}): setup {SETUP_S[call]} s + steps = {estimate_s(call)} s of {BUDGET_S}"
            )
            for step in steps_of(call):
                print(f"## {step.name} ({step.estimate_s} s; needs {', '.join(step.needs) or '-'}): {step.what}")
                for r in step.runs:
                    print("   " + shlex.join(r.args(py="python3", root=Path("/tmp/gpu_suite"))))
        return 0
    if args.action == "report":
        records = [rec for path in args.records for rec in json.loads(path.read_text())["records"]]
        machine = json.loads(args.records[-1].read_text())["machine"]
        write_results(records, machine, args.out)
        print("\n".join(headline_changes(figures(records))))
        return 0

    spent = SETUP_S[args.call] if args.spent_s is None else args.spent_s  # the setup ran before this process
    deadline = time.monotonic() + BUDGET_S - spent
    args.root.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in steps_of(args.call) if not args.steps or s.name in args.steps.split(",")]
    records = [run_step(s, py=sys.executable, root=args.root, out=args.out, deadline=deadline) for s in chosen]
    machine = machine_facts(sys.executable, args.commit, CALLS[args.call])
    # the calls before this one on the same warm machine (their ratios' denominators), then this one
    persist = Path("/tmp/gpu_suite_records.json")
    earlier = json.loads(persist.read_text())["records"] if persist.exists() else []
    earlier = [r for r in earlier if r["call"] != args.call]
    persist.write_text(json.dumps({"machine": machine, "records": earlier + records}, indent=1))
    (args.out / f"suite_call{args.call}.json").write_text(
        json.dumps({"machine": machine, "records": records}, indent=1)
    )
    name = f"{machine['date']}-{CALLS[args.call].removeprefix('nvidia-')}-suite.md"
    write_results(earlier + records, machine, args.out / name)
    print(f"== results: $OUT/{name}; README headline rows:")
    print("\n".join(headline_changes(figures(earlier + records))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
