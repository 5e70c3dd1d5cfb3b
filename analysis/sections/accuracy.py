"""Validation accuracy: the last evaluation per cell, time to accuracy, top-1 over training and against the
global batch, training loss and learning rate."""

from __future__ import annotations

from analysis import metrics, plots
from analysis.campaign_analysis import CampaignAnalysis
from analysis.sections.base import Block, Report, add_figure, columns_shown


def accuracy_section(blocks: list[Block], figures: dict, analysis: CampaignAnalysis) -> None:
    """Validation accuracy (runs with data.val_path or data.val_split): the last evaluation per cell with
    its schedule and global batch; time to accuracy where runs had run.target_top1; and the figures the
    runs have data for: top-1 over training (per schedule and global batch in a study, else per run),
    final top-1 against the global batch, training loss and lr against the step."""
    accuracy = analysis.accuracy()
    if accuracy.empty:
        return
    blocks.append(Block("heading", "Validation accuracy"))
    note = (
        "The last evaluation of each run on its held-out set (data.val_path, or the data.val_split share of "
        "data.path), every rank its shard, summed over ranks; mean over the num_repeats runs. schedule: "
        "optim.schedule.name; global_batch: per-GPU batch x GPUs; epochs: the training epochs done at "
        "that evaluation (empty for eval.jsonl files that predate it; a run that reached its run.target_top1 "
        "stopped there, so its last evaluation is that one). eval_s: the evaluations' seconds, in no "
        "training step (throughput leaves them out). chance_pct: the top-1 of a guess, 100 / the data "
        "set's classes (model.num_classes where the run did not count them): a top-1 near it has "
        "learned nothing yet."
    )
    accuracy = accuracy.assign(chance_pct=metrics.chance_pct(accuracy, analysis.counted()))
    columns = [*metrics.CELL, "variant", *metrics.STUDY, "num_repeats", *metrics.ACCURACY]
    columns.insert(columns.index("top1_pct") + 1, "chance_pct")
    if not accuracy["schedule"].astype(bool).any():
        columns.remove("schedule")  # runs from before schedules
    if accuracy["epochs"].isna().all():
        columns.remove("epochs")
    if accuracy["chance_pct"].isna().all():
        columns.remove("chance_pct")  # runs whose classes no file says
    blocks.append(Block("table", columns_shown(accuracy, columns).round(3), note=note, key=("top1_pct", "chance_pct")))
    target = analysis.time_to_accuracy()
    if not target.empty:
        blocks.append(Block("heading", "Time to accuracy (run.target_top1)", 3))
        shown = target.assign(
            reached=[f"{int(k)} of {int(n)}" for k, n in zip(target["num_reached"], target["num_repeats"])]
        )
        blocks.append(
            Block(
                "table",
                columns_shown(
                    shown,
                    [
                        *metrics.CELL,
                        "variant",
                        *metrics.STUDY,
                        "target_top1_pct",
                        "reached",
                        "time_to_target_s",
                        "samples_to_target",
                        "steps_to_target",
                    ],
                ).round(1),
                note=(
                    "A run stops at the first evaluation whose top-1 reaches the target. reached: of the cell's "
                    "repeats, how many did; time_to_target_s (seconds since the first training step, evaluations "
                    "included: MLPerf's clock), samples_to_target (global training samples) and steps_to_target: "
                    "the mean over the repeats that reached it (empty where none did)."
                ),
                key=("time_to_target_s", "reached", "target_top1_pct"),
            )
        )
    curves = analysis.accuracy_curves()
    study = accuracy["schedule"].nunique() > 1 or accuracy["global_batch"].nunique() > 1
    over = "epochs" if curves["epochs"].notna().all() else "optimizer step"
    if study and curves["step"].nunique() > 1:
        add_figure(
            blocks,
            figures,
            "accuracy_by_schedule",
            lambda: plots.accuracy_by_schedule(curves),
            f"Validation top-1 against the {over} (eval.jsonl), one panel per global batch, one line per cell "
            "coloured by schedule (mean over repeats; band: min-max).",
        )
    elif curves["step"].nunique() > 1:
        evals = analysis.evals()
        add_figure(
            blocks,
            figures,
            "accuracy_vs_step",
            lambda: plots.accuracy_curves(evals),
            "Validation top-1 against the optimizer step, one curve per run.",
        )
    if accuracy["global_batch"].nunique() > 1:
        add_figure(
            blocks,
            figures,
            "top1_vs_global_batch",
            lambda: plots.top1_vs_global_batch(accuracy),
            "Final validation top-1 (the table above) against the global batch (log scale; k = 1024), one line per "
            "schedule and configuration.",
        )
    training = analysis.training_curves()
    if not training.empty and training["lr"].notna().any():
        add_figure(
            blocks,
            figures,
            "loss_and_lr",
            lambda: plots.loss_and_lr(training),
            "Training loss (mean over ranks) and learning rate against the optimizer step, from the rank logs "
            f"(warm-up included; mean over repeats, at most {metrics.TRAINING_POINTS} points per line), a row per "
            "global batch.",
        )


def draw(report: Report) -> None:
    if report.measured:
        accuracy_section(report.blocks, report.figures, report.analysis)
