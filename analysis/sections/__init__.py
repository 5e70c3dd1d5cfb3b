"""The report's sections, one module per analysis, each with its `draw(report)` (analysis/sections/base.py
Report): what it adds to the report, when the campaign has the data for it. SECTIONS is the report's order;
`analysis.report.assemble` draws them in turn. Adding an analysis is a module here and its place below."""

from __future__ import annotations

from collections.abc import Callable

from analysis.sections import (
    accuracy,
    commbench,
    excluded,
    hosts,
    interconnect,
    modes,
    overview,
    reference,
    stability,
    stash,
    telemetry,
    throughput,
    time_shares,
    trace,
    utilisation,
)
from analysis.sections.base import Report

SECTIONS: tuple[Callable[[Report], None], ...] = (
    overview.draw,
    throughput.draw,
    modes.draw,
    time_shares.draw,
    accuracy.draw,
    trace.draw,
    stability.draw,
    hosts.draw,
    stability.draw_loader_stalls,
    stability.draw_timeline,
    time_shares.draw_bars,
    reference.draw,
    stash.draw,
    utilisation.draw,
    telemetry.draw,
    commbench.draw,
    interconnect.draw,
    excluded.draw,
)
