"""Seed study A's learning-rate annealing study: final validation top-1 per schedule and global batch, and
the best schedule at each batch beside the study's finding."""

from __future__ import annotations

from analysis.accuracy import top1_vs_global_batch
from analysis.papers.base import PaperInput, Section
from analysis.papers.common import guesses_table

LR = "ddlbench campaign submit experiment=aach2023_lr system=<your site> system.account=<project>"
CPU_LR = "ddlbench campaign run experiment=aach2023_lr_cpu data.path=<images> (the CPU miniature)"


def lr_study(paper: PaperInput) -> Section:
    section = Section()
    cells = paper.analysis.accuracy()
    section.says(paper, "lr_study_batch_size_min", "lr_schedule_finding")
    section.ours("the study's top-1 values are not in its text.")
    section.text("Measured: final validation top-1 per schedule and global batch, and the best schedule at each batch.")
    if cells.empty:
        section.lacks("learning-rate study: runs with evaluations (optim.schedule.name x GPUs)", LR)
        section.commands.append(CPU_LR)
        return section
    best = (
        cells.dropna(subset=["top1_pct"])
        .sort_values("top1_pct", ascending=False)
        .drop_duplicates("global_batch")
        .sort_values("global_batch")[["global_batch", "schedule", "top1_pct"]]
        .rename(columns={"schedule": "best schedule (measured)"})
    )
    low, high = paper.claim("lr_study_batch_size_min"), paper.claim("lr_study_batch_size_max")
    best["best schedule (published)"] = [
        "exponential" if b >= high else "cosine" if b >= low else f"(below the study's {low:,.0f})"
        for b in best["global_batch"]
    ]
    section.table(
        cells[["global_batch", "schedule", "world_size", "top1_pct", "epochs"]]
        .sort_values(["global_batch", "schedule"])
        .round(2)
    )
    section.table(best.round(2))
    section.figure(
        "top1",
        lambda: top1_vs_global_batch(cells),
        "Final top-1 vs global batch per schedule (measured; the study's top-1 values are not in its text).",
    )
    section.cells = cells["cell_hash"]
    guesses = guesses_table(paper.analysis, cells["cell_hash"])
    if not guesses.empty:
        section.text("Where the experiment had to guess (experiment.guesses: what the study does not state):")
        section.table(guesses)
    return section
