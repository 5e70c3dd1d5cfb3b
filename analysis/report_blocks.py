"""What every section of the report shares: the Block it adds, the Report it reads (the campaign, its
analysis and the tables several sections use, each computed once) and the small helpers that put a table
or a figure in. An analysis module (analysis/<analysis>.py) has one `draw(report)` (or several);
`SECTIONS` in analysis/report.py lists them in the report's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import pandas as pd

from analysis.cells import MEMORY, peak_memory, rate_suffix, with_sample_unit
from analysis.device import RankWords, rank_words, with_device
from analysis.load import Campaign

if TYPE_CHECKING:
    from analysis.campaign_analysis import CampaignAnalysis


@dataclass(slots=True)
class Block:
    """One piece of the report: a heading, a paragraph, a table or a figure. A table may carry `note`, how
    its figures are computed (paragraphs apart by a blank line: folded under the table in HTML, under it
    in markdown), and `key`, the columns the HTML shows first: the figures a reader came for."""

    kind: str  # heading | text | table | figure
    content: object
    level: int = 2
    note: str = ""
    key: tuple[str, ...] = ()


def table_if_rows(
    blocks: list[Block], table: pd.DataFrame, note: str, *, title: str = "", key: tuple[str, ...] = ()
) -> None:
    """When the table has rows: its title (a third-level heading), then the table (rounded to 0.1) with
    the note that explains it."""
    if not table.empty:
        if title:
            blocks.append(Block("heading", title, 3))
        blocks.append(Block("table", table.round(1), note=note, key=key))


def add_figure(blocks: list[Block], figures: dict, name: str, draw, caption: str) -> None:
    """Register a figure: `draw` is called later (maybe in a worker process) and returns the Figure."""
    figures[name] = draw
    blocks.append(Block("figure", (name, caption)))


def percent(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    frame = frame.copy()
    for column in columns:
        if column in frame:
            frame[column] = (100 * frame[column].astype("float64")).round(1)
    return frame


def with_memory(cells: pd.DataFrame, counted: pd.DataFrame) -> pd.DataFrame:
    """cells with each cell's peak GPU memory in GiB (cells.peak_memory); '-' where none was measured (CPU)."""
    if "cell_hash" not in cells:
        return cells
    out = cells.merge(peak_memory(counted), on="cell_hash", how="left")
    for column in MEMORY:
        out[column] = out[column].astype(object).where(out[column].notna(), "-")
    return out


def in_unit(frame: pd.DataFrame, unit: str) -> pd.DataFrame:
    """A table of one sample unit with its throughput columns named in it: *_img_s become *_seq_s for
    sequences (cells.rate_suffix); the metrics keep the _img_s names whatever the unit."""
    suffix = rate_suffix(unit)
    return frame.rename(columns={c: c.replace("_img_s", suffix) for c in frame.columns if "_img_s" in c})


def columns_shown(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """The columns a table shows; `variant` only where some cell has one; `campaign` first where the rows
    come from several campaigns (each row is one campaign's cell: the campaign is in the cell hash)."""
    keep = [c for c in columns if c in frame and (c != "variant" or frame[c].astype(bool).any())]
    if "campaign" in frame and "campaign" not in keep and frame["campaign"].nunique() > 1:
        keep.insert(0, "campaign")
    return frame[keep]


class Report:
    """A report under way: what its sections read (the campaign, its analysis, the reference and the scaling
    asked for) and what they add (blocks, and the figures' draw callables by name)."""

    def __init__(
        self,
        campaign: Campaign,
        analysis: CampaignAnalysis,
        *,
        reference: pd.DataFrame | None = None,
        reference_name: str | None = None,
        scaling: str = "weak",
    ) -> None:
        self.campaign, self.analysis = campaign, analysis
        self.reference, self.reference_name, self.scaling = reference, reference_name, scaling
        self.blocks: list[Block] = []
        self.figures: dict = {}

    @cached_property
    def counted(self) -> pd.DataFrame:
        return self.analysis.counted()

    @cached_property
    def measured(self) -> bool:
        """Whether any counted run has measured steps: the throughput and time sections need them."""
        return not self.analysis.run_throughput().empty

    @cached_property
    def cells(self) -> pd.DataFrame:
        """The cells with their sample unit and device (analysis.device: what their ranks ran on)."""
        return with_device(with_sample_unit(self.analysis.cells(), self.counted), self.counted)

    @cached_property
    def words(self) -> RankWords:
        """How the report names its ranks: GPUs, or ranks (CPU) (analysis.device.rank_words of its cells)."""
        return rank_words(self.cells)

    @cached_property
    def shares(self) -> pd.DataFrame:
        return self.analysis.breakdown()
