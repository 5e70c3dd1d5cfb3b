"""What a paper is made of: a Study (its exhibits, the experiments that make its cells) and an Exhibit
(one figure or table of the study and the section of `ddlbench paper` that draws it, or why none can).

Every exhibit's section says where each value comes from, in the words the report uses everywhere:
measured (this campaign's runs), predicted (`ddlbench predict`), published (the study's own numbers,
analysis/reference/).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd

from analysis.campaign_analysis import CampaignAnalysis
from analysis.report_blocks import Block

SOURCES = ("measured", "predicted", "published")


@dataclass(slots=True)
class Section:
    """What one exhibit adds to the paper report: its blocks, the figures they name (name -> draw), and
    the cells the runs lack with the commands that make them."""

    blocks: list[Block] = field(default_factory=list)
    figures: dict[str, Callable] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    cells: pd.Series | None = None  # the cell hashes its measured values are of (None: all the study's runs)
    partial: list[str] = field(default_factory=list)  # what of the study's content it draws without
    only_text: str = ""  # why no run of this suite gives the claim: the section is its quote alone

    def drawn_without(self, what: str) -> None:
        """Say what of the study's exhibit this section, though drawn, does not show (its state: drawn in part)."""
        self.partial.append(what)

    def text_only(self, why: str) -> None:
        """A claim of the study's text that no run of this suite can give: the section is its quote (and the
        published numbers), and its state says why ('text only: why')."""
        self.only_text = why

    def state(self) -> str:
        """drawn; drawn in part (what is missing); lacks (the cells and the commands that make them); text
        only (why no run gives it)."""
        missing = [*self.missing, *self.partial]
        if self.only_text and not missing:
            return f"text only: {self.only_text}"
        if not missing:
            return "drawn"
        if any(b.kind == "figure" for b in self.blocks) or not self.missing:
            return "drawn in part: without " + "; ".join(missing)
        return "lacks " + "; ".join(self.missing) + " (make them with: " + " ; ".join(self.commands) + ")"

    def text(self, words: str) -> None:
        self.blocks.append(Block("text", words))

    def table(self, frame: pd.DataFrame) -> None:
        if not frame.empty:
            self.blocks.append(Block("table", frame))

    def figure(self, name: str, draw: Callable, caption: str) -> None:
        self.figures[name] = draw
        self.blocks.append(Block("figure", (name, caption)))

    def says(self, paper: PaperInput, *keys: str, lead: str = "The study") -> None:
        """The study's own words for these keys (claims.csv or findings.csv), each with its place, as one
        paragraph: every sentence a page prints about a study is its quote or marked as ours."""
        self.blocks.append(Block("text", f"{lead}: " + "; ".join(paper.quotes(*keys)) + "."))

    def ours(self, words: str) -> None:
        """Our words (a reading, a method, what the runs are), marked as such."""
        self.blocks.append(Block("text", f"Ours: {words}"))

    def published(self, paper: PaperInput, *keys: str) -> None:
        """The study's numbers for these keys (claims.csv) as a table: value, unit, place."""
        rows = paper.claims.set_index("key").loc[list(keys)].reset_index()
        self.table(rows[["key", "value", "unit", "place"]].rename(columns={"value": "value (published)"}))

    def lacks(self, cells: str, command: str) -> None:
        """Say which cells this exhibit needs and the runs lack, and the command that makes them."""
        self.missing.append(cells)
        if command not in self.commands:
            self.commands.append(command)


@dataclass(slots=True)
class PaperInput:
    """What an exhibit draws from: the study's runs (analysis), its published values (claims: the
    study's rows of analysis/reference/claims.csv) and the report's options."""

    analysis: CampaignAnalysis
    claims: pd.DataFrame
    baseline: dict[str, str] = field(default_factory=dict)  # --baseline key=value: the reference cells
    predicted: pd.DataFrame = field(default_factory=pd.DataFrame)  # common.load_predictions of the runs folder
    findings: pd.DataFrame = field(default_factory=pd.DataFrame)  # the study's rows of findings.csv: words, no number

    def quotes(self, *keys: str) -> list[str]:
        """Each key's quote as '"words" (place)', from claims.csv or findings.csv; one quote once (several
        numbers can share one sentence); a KeyError names a key the study lacks."""
        rows = pd.concat([self.claims, self.findings], ignore_index=True) if not self.findings.empty else self.claims
        out: list[str] = []
        for key in keys:
            found = rows[rows["key"] == key]
            if found.empty:
                raise KeyError(f"no quote {key!r}")
            words = re.sub(r"\\[()]|\$", "", found["quote"].iloc[0]).replace("\\%", "%")  # the copy's TeX marks
            text = f'"{words}" ({found["place"].iloc[0]})'
            if text not in out:
                out.append(text)
        return out

    def claim(self, key: str) -> float:
        """One published number by its key (claims.csv); a KeyError names a key the study lacks."""
        rows = self.claims[self.claims["key"] == key]
        if rows.empty:
            raise KeyError(f"no published value {key!r}")
        return float(rows["value"].iloc[0])


@dataclass(frozen=True, slots=True)
class Exhibit:
    """One figure or table of a study. `build` draws its section from the runs; None when no run of this
    suite can make it, and then `why_not` says why (a method diagram, hardware we cannot rent)."""

    id: str  # the study's own name for it: "Figure 11", "Table IV", "Breakdown table (a)"
    title: str
    sources: tuple[str, ...]  # what its section shows: measured, predicted, published
    build: Callable[[PaperInput], Section] | None = None
    why_not: str = ""
    from_text: bool = False  # numbers the study's text states outside its figures and tables

    def __post_init__(self) -> None:
        assert (self.build is None) == bool(self.why_not), f"{self.id}: a builder or a reason, not both"
        assert set(self.sources) <= set(SOURCES), self.sources


@dataclass(frozen=True, slots=True)
class Study:
    """One seed study: its name on the command line, how to cite it, which campaigns make its cells
    (run.campaign values of runs made before experiment.study existed), the commands that make them,
    and its exhibits in the study's order."""

    name: str
    title: str
    campaigns: tuple[str, ...]
    commands: tuple[str, ...]
    exhibits: tuple[Exhibit, ...]
