"""The report's blocks (analysis/report_blocks.py Block) rendered as markdown and as one static HTML page, and the
tables in them: numbers as a reader wants them, headers with their units, long variants as labels. Shared
by `ddlbench report` (analysis/report.py) and `ddlbench paper` (analysis/papers/build.py).
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.report_blocks import Block


def _fmt(value: object) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return ""
    if isinstance(value, (float, np.floating)):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 1 else f"{value:,.1f}"
    return str(value)


def markdown_table(frame: pd.DataFrame, *, labels: dict[str, str] | None = None) -> str:
    """A GitHub-markdown table (no tabulate dependency); long variants as labels (variant_labels: `labels`,
    or numbered here), spelled out under the table."""
    if frame.empty:
        return "_none_"
    labels = variant_labels([frame]) if labels is None else labels
    named = _named(frame, labels)
    if named:
        frame = frame.assign(variant=frame["variant"].map(lambda v: named.get(_fmt(v), "")))
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "| " + " | ".join("---:" if pd.api.types.is_numeric_dtype(frame[c]) else "---" for c in frame.columns) + " |"
    body = [
        "| " + " | ".join(_fmt(v).replace("|", "\\|").replace("\n", " ") for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    legend = [f"{VARIANT_LEGEND}:", *(f"- {label}: {text}" for text, label in named.items())] if named else []
    return "\n".join([head, rule, *body]) + ("\n\n" + "\n".join(legend) if legend else "")


VARIANT_CHARS = 40  # a longer variant (several swept settings) would make every table it is in wide: a label
VARIANT_LEGEND = "variant: the settings that tell apart cells that look alike"


def variant_labels(frames: list[pd.DataFrame]) -> dict[str, str]:
    """{variant: v1, v2, ...} over the tables' distinct variants in the order they first appear, when one of
    them is longer than VARIANT_CHARS; {} when each is short enough to read in its column."""
    texts = dict.fromkeys(v for frame in frames if "variant" in frame for v in frame["variant"].map(_fmt) if v)
    if not any(len(v) > VARIANT_CHARS for v in texts):
        return {}
    return {v: f"v{i}" for i, v in enumerate(texts, 1)}


def _named(frame: pd.DataFrame, labels: dict[str, str]) -> dict[str, str]:
    """{variant: its label} of the variants this table shows, where they are labelled."""
    if not labels or "variant" not in frame:
        return {}
    return {v: labels[v] for v in frame["variant"].map(_fmt) if v in labels}


# how a column name reads as a header (the markdown keeps the names): rates anywhere, units at the end
_HEADER_RATES = (("_img_s", "_img/s"), ("_seq_s", "_seq/s"), ("_gb_s", "_GB/s"))
_HEADER_UNITS = (("_ms", " ms"), ("_s", " s"))  # only as the last word: `_s` inside a name is no unit
_HEADER_WORDS = {
    "gpu": "GPU",
    "gpus": "GPUs",
    "cpus": "CPUs",
    "cpu": "CPU",
    "ci": "CI",
    "h2d": "H2D",
    "pcie": "PCIe",
    "pct": "%",
    "gib": "GiB",
    "pp": "pp",
    "ref": "(reference)",
    "here": "(here)",
    "mean": "(mean)",
    "num": "number of",
}


def header(column: object) -> str:
    """A column name as a table header: per_gpu_img_s -> 'per GPU img/s', allreduce_pct_ref -> 'allreduce %
    (reference)', cpu_pct_mean -> 'CPU % (mean)'."""
    text, unit = str(column), ""
    for rate, shown in _HEADER_RATES:
        text = text.replace(rate, shown)
    for suffix, shown in _HEADER_UNITS:
        if text.endswith(suffix) and len(text) > len(suffix):
            text, unit = text[: -len(suffix)], shown
            break
    return " ".join(_HEADER_WORDS.get(w, w) for w in text.split("_")) + unit


def html_table(
    frame: pd.DataFrame, *, key: tuple[str, ...] = (), note: str = "", labels: dict[str, str] | None = None
) -> str:
    """A table that scrolls inside its own box when it is wider than the page; numbers right, text left.
    The `key` columns come first, so that the figure a reader came for is on screen without scrolling
    sideways; then the others in the frame's order, and `variant` last: where long, a label (variant_labels:
    `labels`, or numbered here) with its settings on hover. What each label stands for and `note`, how the
    figures are computed, fold under the table ("How this is computed")."""
    first = [c for c in key if c in frame]
    variant = ["variant"] if "variant" in frame else []
    frame = frame[[*first, *(c for c in frame if c not in first and c not in variant), *variant]]
    named = _named(frame, variant_labels([frame]) if labels is None else labels)
    fold = [f"<p>{html.escape(p)}</p>" for p in note.split("\n\n") if p.strip()]
    if named:
        fold.insert(
            0,
            f"<p>{VARIANT_LEGEND} (a label shows them on hover):</p><ul>"
            + "".join(f"<li>{label}: {html.escape(text)}</li>" for text, label in named.items())
            + "</ul>",
        )
    summary = "How this is computed" if note.strip() else "The variants' settings"
    if note.strip() and named:
        summary += ", and the variants' settings"
    details = f"<details><summary>{summary}</summary>{''.join(fold)}</details>" if fold else ""
    if frame.empty:
        return "<p><em>none</em></p>" + details
    numeric = [
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c]) for c in frame.columns
    ]
    # the key columns' class, the last of them ruled off from the rest
    key_class = [
        ("key key-end" if i == len(first) - 1 else "key") if i < len(first) else "" for i in range(len(numeric))
    ]
    head = "".join(
        "<th" + (f' class="{k}"' if k else "") + f' title="{html.escape(str(c))}">{html.escape(header(c))}</th>'
        for c, k in zip(frame.columns, key_class)
    )

    def cell(value: object, column: object, number: bool, k: str) -> str:
        text = _fmt(value)
        if column == "variant" and text in named:
            return f'<td class="txt variant" title="{html.escape(text)}">{named[text]}</td>'
        return f'<td class="{" ".join(filter(None, ["num" if number else "txt", k]))}">{html.escape(text)}</td>'

    rows = "".join(
        "<tr>" + "".join(cell(*x) for x in zip(row, frame.columns, numeric, key_class)) + "</tr>"
        for row in frame.itertuples(index=False)
    )
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>' + details


def render_markdown(blocks: list[Block], figure_files: dict[str, list[str]]) -> str:
    """The report as markdown; long variants have one label (v1, v2, ...) in every table of it."""
    labels = variant_labels([b.content for b in blocks if b.kind == "table"])
    out = []
    for block in blocks:
        if block.kind == "heading":
            out.append("#" * block.level + " " + str(block.content))
        elif block.kind == "text":
            out.append(str(block.content))
        elif block.kind == "table":
            out.append(markdown_table(block.content, labels=labels))
            if block.note:
                out.append(block.note)
        elif block.kind == "figure":
            name, caption = block.content
            files = figure_files[name]
            links = " ".join(f"[{Path(f).suffix[1:]}]({f})" for f in files[1:])
            out.append(f"![{caption}]({files[0]})\n\n_{caption}_ {links}")
    return "\n\n".join(out) + "\n"


def render_html(blocks: list[Block], figure_files: dict[str, list[str]], title: str) -> str:
    """The report as one static page; long variants have one label (v1, v2, ...) in every table of it."""
    labels = variant_labels([b.content for b in blocks if b.kind == "table"])
    body = []
    for block in blocks:
        if block.kind == "heading":
            body.append(f"<h{block.level}>{html.escape(str(block.content))}</h{block.level}>")
        elif block.kind == "text":
            body.append(f"<p>{html.escape(str(block.content))}</p>")
        elif block.kind == "table":
            body.append(html_table(block.content, key=block.key, note=block.note, labels=labels))
        elif block.kind == "figure":
            name, caption = block.content
            files = figure_files[name]
            links = " ".join(f'<a href="{html.escape(f)}">{Path(f).suffix[1:]}</a>' for f in files[1:])
            body.append(
                f'<figure><img src="{html.escape(files[0])}" alt="{html.escape(caption)}">'
                f"<figcaption>{html.escape(caption)} {links}</figcaption></figure>"
            )
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
        ".scroll{max-width:100%;overflow-x:auto;margin:1em 0}"
        "table{border-collapse:collapse;font-size:12px}"
        "td,th{border:1px solid #ccc;padding:2px 6px;white-space:nowrap}"
        # a header wraps between its words: the column is as wide as its figures, not its name
        "th{background:#f3f3f3;text-align:center;position:sticky;top:0;white-space:normal;vertical-align:bottom}"
        "td.num{text-align:right;font-variant-numeric:tabular-nums}td.txt{text-align:left}"
        "th.key{background:#e4ecf5}.key-end{border-right:2px solid #888}"
        "td.variant{text-decoration:underline dotted;cursor:help}"
        "details{font-size:13px;color:#444;margin:-0.5em 0 1em}summary{cursor:pointer;color:#555}"
        "img{max-width:100%}figcaption{font-size:12px;color:#555}"
    )
    return (
        f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n"
    )
