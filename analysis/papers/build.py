"""Write `ddlbench paper`'s report: one section per exhibit of the study, in the study's order, after a
contents table that says for each whether the runs drew it, which cells it lacks, or why no run can."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd

from analysis.campaign_analysis import CampaignAnalysis
from analysis.caveats import notes, short
from analysis.device import rank_columns, rank_words, run_devices
from analysis.load import Campaign, load_campaign
from analysis.papers import study as find_study
from analysis.papers import study_of
from analysis.papers.base import PaperInput, Section, Study
from analysis.papers.common import load_predictions, stand_ins_table, what_runs_are
from analysis.report import fresh_dir, save_figures
from analysis.report_blocks import Block
from analysis.report_render import render_html, render_markdown
from benchmarks.errors import ConfigError

REFERENCE_DIR = Path(__file__).resolve().parents[1] / "reference"


def load_claims(name: str) -> pd.DataFrame:
    """The study's published numbers (analysis/reference/claims.csv), values as printed (text)."""
    claims = pd.read_csv(REFERENCE_DIR / "claims.csv", dtype=str, keep_default_na=False)
    return claims[claims["study"] == name].reset_index(drop=True)


def load_findings(name: str) -> pd.DataFrame:
    """The study's findings without a number (analysis/reference/findings.csv): its words and their place."""
    findings = pd.read_csv(REFERENCE_DIR / "findings.csv", dtype=str, keep_default_na=False)
    return findings[findings["study"] == name].reset_index(drop=True)


def only(campaign: Campaign, run_ids: set[str]) -> Campaign:
    """The campaign's tables restricted to some runs (every table keyed by run_id)."""
    changes = {}
    for f in dataclasses.fields(campaign):
        table = getattr(campaign, f.name)
        if isinstance(table, pd.DataFrame) and "run_id" in table:
            changes[f.name] = table[table["run_id"].astype(str).isin(run_ids)].reset_index(drop=True)
    return dataclasses.replace(campaign, **changes)


def parse_baseline(items: list[str]) -> dict[str, str]:
    """--baseline key=value (system=<profile>): which cells the relative figures are against."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key != "system" or not value or not re.fullmatch(r"[A-Za-z0-9_.\-]+", value):
            raise ConfigError(f"--baseline {item}: give the baseline system profile, e.g. --baseline system=h200")
        out[key] = value
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def select_runs(study: Study, campaign: Campaign, runs_dir: Path) -> tuple[Campaign, int]:
    """The study's runs of the folder, and how many other runs it also holds; a one-line error
    when it holds none of the study's (naming the study the runs belong to, or the command that makes them)."""
    owners = study_of(campaign.runs) if not campaign.runs.empty else pd.Series(dtype=str)
    mine = set(campaign.runs.loc[owners == study.name, "run_id"].astype(str)) if len(owners) else set()
    if not mine:
        others = sorted(set(owners) - {"", study.name})
        if others:
            raise ConfigError(
                f"{runs_dir} holds runs of {', '.join(others)}, none of {study.name}; "
                f"draw them with: ddlbench paper {others[0]} {runs_dir} --out <new folder>"
            )
        raise ConfigError(
            f"{runs_dir} holds no run of {study.name} ({len(campaign.runs)} run directories of other campaigns); "
            f"make them with: {study.commands[0]}"
            + next((f"; on this machine: {c}" for c in study.commands if " campaign run " in c), "")
        )
    return only(campaign, mine), int((owners != study.name).sum())


def marked_cells(analysis: CampaignAnalysis) -> list[Block]:
    """The study's cells whose figures must be read with a caveat (analysis/caveats.py: shared host, GPU shared,
    throttled, oversubscribed, diverged, mixed images or code), each with its marks and a line per mark saying
    what it means and how to avoid it; nothing where every cell is clean. Every exhibit built from these cells
    carries them."""
    marks = analysis.marks()
    marked = marks[marks.astype(str) != ""]
    if marked.empty:
        return []
    cells = analysis.counted().drop_duplicates("cell_hash").set_index("cell_hash")
    names = [c for c in ("framework", "loader", "model", "precision", "world_size", "num_nodes") if c in cells]
    table = cells.loc[marked.index, names].reset_index(drop=True)
    table["marks"] = [short(text) for text in marked]
    return [
        Block("heading", "Cells to read with care"),
        Block(
            "text",
            f"{len(marked)} of {len(marks)} cells carry a mark; every figure and table below that uses them stands "
            "on runs made so.",
        ),
        Block("table", table),
        Block("text", "\n\n".join(notes(marked))),
    ]


def assemble(
    study: Study, paper: PaperInput, *, runs_dir: Path, num_other: int
) -> tuple[list[Block], dict, list[tuple[str, str, list[str]]]]:
    """(blocks, figures, lacking) of the paper report: title, contents, then one section per exhibit;
    lacking: (exhibit, the cells it lacks, the commands that make them) for the command line."""
    sections: list[tuple[object, Section | None]] = []
    figures: dict = {}
    for exhibit in study.exhibits:
        if exhibit.build is None:
            sections.append((exhibit, None))
            continue
        section = exhibit.build(paper)
        prefix = _slug(exhibit.id)
        renamed = []
        for block in section.blocks:
            if block.kind == "figure":
                name, caption = block.content
                block = Block("figure", (f"{prefix}_{name}", caption))
            renamed.append(block)
        section.blocks = renamed
        figures.update({f"{prefix}_{name}": draw for name, draw in section.figures.items()})
        sections.append((exhibit, section))

    counted = paper.analysis.counted()
    blocks = [Block("heading", f"{study.title}: its figures and tables from {runs_dir}", 1)]
    blocks.append(
        Block(
            "text",
            (
                f"ddlbench paper {study.name}: {len(paper.analysis.runs())} run directories of this study "
                f"({len(counted)} counted)"
                + (f"; {num_other} runs of other campaigns left out" if num_other else "")
                + ". Every value is labelled: measured (these runs), predicted (ddlbench predict), published (the "
                "study's own numbers, analysis/reference/claims.csv with the study's words for each). Where the "
                "runs lack a figure's cells the section names them and the command that makes them."
            ),
        )
    )
    blocks.append(Block("heading", "What these runs are"))
    blocks.append(
        Block(
            "text",
            "Read from the runs themselves (config.yaml, meta.json, summary.json), per campaign: what the ranks ran "
            "on, the models, image size, data, batch, precision and measured steps. Where they differ from the "
            "study's, the experiment's stand-ins (experiment.stand_ins) say what the study ran; they are printed "
            "again beside each figure they concern.",
        )
    )
    blocks.append(Block("table", what_runs_are(paper.analysis)))
    blocks.extend(marked_cells(paper.analysis))
    contents = []
    for exhibit, section in sections:
        state = f"cannot: {exhibit.why_not}" if section is None else section.state()
        contents.append(
            {"exhibit": exhibit.id, "title": exhibit.title, "shows": ", ".join(exhibit.sources) or "-", "state": state}
        )
    blocks.append(Block("heading", "Contents"))
    blocks.append(Block("table", pd.DataFrame(contents)))
    for exhibit, section in sections:
        blocks.append(Block("heading", f"{exhibit.id}: {exhibit.title}"))
        if section is None:
            blocks.append(Block("text", f"Not drawn: {exhibit.why_not}."))
            continue
        blocks.extend(section.blocks)
        if "measured" in exhibit.sources and any(b.kind == "figure" for b in section.blocks):
            stand_ins = stand_ins_table(paper.analysis, section.cells)
            if not stand_ins.empty:
                blocks.append(Block("text", "What these runs stand in for (experiment.stand_ins):"))
                blocks.append(Block("table", stand_ins))
        if section.only_text:
            blocks.append(Block("text", f"Text only: {section.only_text}."))
        if section.partial:
            blocks.append(Block("text", "Drawn in part, without: " + "; ".join(section.partial) + "."))
        if section.missing:
            blocks.append(
                Block(
                    "text",
                    "Missing cells: "
                    + "; ".join(section.missing)
                    + ". Make them with: "
                    + " ; ".join(section.commands),
                )
            )
    if not counted.empty:  # per_gpu_* and baseline_gpus named for the runs' device (CPU ranks: per_rank_*)
        words = rank_words(run_devices(counted))
        for block in blocks:
            if block.kind == "table" and isinstance(block.content, pd.DataFrame):
                named = rank_columns(block.content, words)
                renamed = dict(zip(block.content.columns, named.columns))
                block.content, block.key = named, tuple(renamed.get(c, c) for c in block.key)
    lacking = [(e.id, "; ".join(sec.missing), sec.commands) for e, sec in sections if sec is not None and sec.missing]
    return blocks, figures, lacking


def build_paper(
    name: str,
    runs_dir: Path,
    out: Path,
    *,
    baseline: dict[str, str] | None = None,
    formats: tuple[str, ...] = ("png",),
    jobs: int | None = None,
    draw: bool = True,
) -> dict[str, object]:
    """Check the input, then write out/paper.md, out/paper.html and out/figures/* (not the figures when
    not `draw`); returns counts and the exhibits' states. Nothing is written when the study is unknown or
    the folder holds none of its runs."""
    study = find_study(name)
    runs_dir = Path(runs_dir)
    if not runs_dir.is_dir():
        raise ConfigError(
            f"RUNS {runs_dir} is not a directory; pass the folder the study's runs were written to (run.root)"
        )
    campaign = load_campaign(runs_dir)
    mine, num_other = select_runs(study, campaign, runs_dir)
    out = fresh_dir(Path(out))
    paper = PaperInput(
        CampaignAnalysis(runs_dir, campaign=mine),
        load_claims(study.name),
        baseline or {},
        load_predictions(runs_dir),
        load_findings(study.name),
    )
    blocks, figures, lacking = assemble(study, paper, runs_dir=runs_dir, num_other=num_other)
    if draw:
        files = save_figures(figures, out, formats, jobs=jobs)
    else:  # the text alone (the gallery's check): the figures' names, not their pixels
        files = {name: [f"figures/{name}.{fmt}" for fmt in formats] for name in figures}
    title = f"ddlbench paper {study.name}: {runs_dir}"
    (out / "paper.md").write_text(render_markdown(blocks, files))
    (out / "paper.html").write_text(render_html(blocks, files, title))
    contents = next(b.content for b in blocks if b.kind == "table" and "exhibit" in b.content)
    return {"num_runs": len(mine.runs), "num_figures": len(figures), "contents": contents, "lacking": lacking}
