"""The report's last section: the runs no table counts, and why."""

from __future__ import annotations

from analysis.report_blocks import Block, Report


def draw(report: Report) -> None:
    excluded = report.analysis.excluded()
    report.blocks.append(Block("heading", "Excluded runs (not counted)"))
    report.blocks.append(Block("table", excluded[["run_id", "status", "reason"]].reset_index(drop=True)))
    if not report.campaign.problems.empty:
        report.blocks.append(Block("heading", "Skipped lines and files"))
        report.blocks.append(Block("table", report.campaign.problems))
