"""The GPU suite's plan: what each device call runs (its steps: the commands, their estimates and the figures
made of their outputs), the budget each call keeps to, and the README headline rows the figures re-measure.
Standard library only: perf/gpu_suite.py runs it on the device and reports; tests/unit/test_gpu_suite_plan.py
composes every step's overrides on a CPU.
"""

from __future__ import annotations

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
