"""The report's tables as a reader meets them, without a browser (test_report_browser.py measures the
page in one): the figures a reader came for in the first columns, identity next, `variant` last and,
where long, a label spelled out on hover and under the table; the definitions folded under the table
("How this is computed") in HTML, a paragraph under it in markdown."""

from __future__ import annotations

import shutil
import warnings
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import yaml

from analysis.device import GPU, WORDS
from analysis.report_blocks import Block
from analysis.report_render import html_table, markdown_table, render_html, render_markdown
from analysis.words import column_word
from ddlbench.cli import main
from tests.analysis.conftest import CAMPAIGN

# two sweeps of five settings each: the variant that made the throughput table ~2,400 px wide
SWEEPS = {
    "a": {"framework": {"bucket_cap_mb": 100, "static_graph": False}, "loader": {"num_threads": 8}},
    "b": {"framework": {"bucket_cap_mb": 200, "static_graph": True}, "loader": {"num_threads": 2}},
}


def sweep_of(campaign: Path, out: Path) -> Path:
    """A copy of `campaign` whose DDP-DALI runs are there twice more, with the settings of SWEEPS: cells
    that only a long `variant` tells apart."""
    shutil.copytree(campaign, out)
    for run in sorted((out / "small").glob("ddp-dali-*")):
        for name, settings in SWEEPS.items():
            twin = run.with_name(f"{run.name}-{name}")
            shutil.copytree(run, twin)
            config = yaml.safe_load((twin / "config.yaml").read_text())
            for group, values in settings.items():
                config[group].update(values)
            (twin / "config.yaml").write_text(yaml.safe_dump(config))
    return out


class _Page(HTMLParser):
    """The tables of a page (header titles and classes, rows of (class, title, text)), the text of each
    <details> and each paragraph outside one."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self.details: list[str] = []
        self.paragraphs: list[str] = []
        self._cell: dict | None = None
        self._in_details = 0
        self._paragraph: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self.tables.append({"head": [], "rows": [], "details": None})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("th", "td"):
            self._cell = {"tag": tag, "class": a.get("class") or "", "title": a.get("title"), "text": ""}
        elif tag == "details":
            self._in_details += 1
            self.details.append("")
        elif tag == "p" and not self._in_details:
            self._paragraph = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("th", "td") and self._cell is not None:
            table = self.tables[-1]
            (table["head"] if tag == "th" else table["rows"][-1]).append(self._cell)
            self._cell = None
        elif tag == "tr" and self.tables and self.tables[-1]["rows"] == [[]]:
            self.tables[-1]["rows"].pop()  # the header row
        elif tag == "details":
            self._in_details -= 1
            if self.tables and self.tables[-1]["details"] is None:
                self.tables[-1]["details"] = self.details[-1]
        elif tag == "p" and self._paragraph is not None:
            self.paragraphs.append("".join(self._paragraph))
            self._paragraph = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] += data
        if self._in_details:
            self.details[-1] += data
        if self._paragraph is not None:
            self._paragraph.append(data)


def _cells(**columns) -> pd.DataFrame:
    base = {
        "framework": ["ddp", "ddp", "ddp"],
        "loader": ["dali"] * 3,
        "model": ["resnet50"] * 3,
        "world_size": [1, 2, 2],
        "variant": ["", "framework.bucket_cap_mb=100, framework.static_graph=False, loader.num_threads=8", ""],
        "num_repeats": [1, 1, 1],
        "throughput_img_s": [400.0, 800.0, 790.0],
        "per_gpu_img_s": [400.0, 400.0, 395.0],
        "efficiency_pct": [100.0, 100.0, 98.8],
    }
    return pd.DataFrame({**base, **columns})


def test_the_key_figures_lead_a_long_variant_is_a_label_and_the_definitions_fold():
    frame = _cells()
    out = html_table(frame, key=("throughput_img_s", "per_gpu_img_s", "efficiency_pct"), note="efficiency_pct: x")
    (table,) = (page := _Page(out)).tables
    titles = [th["title"] for th in table["head"]]
    assert titles == [
        "throughput_img_s",
        "per_gpu_img_s",
        "efficiency_pct",
        "framework",
        "loader",
        "model",
        "world_size",
        "num_repeats",
        "variant",
    ]
    assert [th["class"] for th in table["head"][:4]] == ["key", "key", "key key-end", ""]
    variants = [row[-1] for row in table["rows"]]
    assert [v["text"] for v in variants] == ["", "v1", ""]
    assert variants[1]["title"] == frame["variant"][1] and "variant" in variants[1]["class"]
    assert [row[0]["text"] for row in table["rows"]] == ["400.0", "800.0", "790.0"]
    # under the table, folded: what the label stands for, then the note
    assert out.index("</table>") < out.index("<details><summary>How this is computed, and the variants' settings")
    assert f"v1: {frame['variant'][1]}" in table["details"] and "efficiency_pct: x" in table["details"]
    assert page.paragraphs == []  # nothing outside the fold


def test_a_short_variant_stays_in_full_and_a_table_without_a_note_has_no_fold():
    frame = _cells(variant=["", "framework.zero_optimizer=True", ""])
    out = html_table(frame, key=("throughput_img_s",))
    (table,) = _Page(out).tables
    assert table["head"][-1]["title"] == "variant" and table["rows"][1][-1]["text"] == "framework.zero_optimizer=True"
    assert "<details>" not in out and "v1" not in out
    assert [th["title"] for th in table["head"]][:2] == ["throughput_img_s", "framework"]


def test_markdown_keeps_its_column_order_and_spells_a_label_out_under_the_table():
    frame = _cells()
    text = markdown_table(frame)
    head, _, *rows = text.split("\n\n")[0].splitlines()
    assert head.startswith("| framework | loader | model | world_size | variant | num_repeats | throughput_img_s")
    assert rows[1].startswith("| ddp | dali | resnet50 | 2 | v1 | 1 | 800.0 |")
    assert text.split("\n\n")[1].splitlines() == [
        "variant: the settings that tell apart cells that look alike:",
        f"- v1: {frame['variant'][1]}",
    ]


def test_blocks_render_alike_for_other_callers_and_a_label_means_one_variant_everywhere():
    """Block("text"/"heading"/"table"/"figure") as analysis/papers builds them still render; a table's note
    is a paragraph under it in markdown; a long variant has one label in every table of the page."""
    long = _cells()["variant"][1]
    other = long.replace("100", "200")
    blocks = [
        Block("heading", "Study", 1),
        Block("text", "A paragraph."),
        Block("table", _cells(variant=["", other, ""])),
        Block("table", _cells(), note="How it is computed.", key=("throughput_img_s",)),
        Block("figure", ("fig", "A caption.")),
    ]
    files = {"fig": ["figures/fig.png", "figures/fig.svg"]}
    page = render_html(blocks, files, "t")
    parsed = _Page(page)
    assert "<h1>Study</h1>" in page and "<p>A paragraph.</p>" in page and 'src="figures/fig.png"' in page
    assert [t["rows"][1][-1]["text"] for t in parsed.tables] == ["v1", "v2"]  # numbered in order, page-wide
    assert parsed.tables[1]["rows"][1][-1]["title"] == long
    text = render_markdown(blocks, files)
    assert "# Study\n\nA paragraph.\n\n| framework |" in text
    assert f"- v1: {other}" in text and f"- v2: {long}" in text
    assert text.index(f"- v2: {long}") < text.index("How it is computed.") < text.index("![A caption.]")


def test_every_report_table_leads_with_its_key_figures_and_folds_its_definitions(tmp_path):
    """The golden campaign with a sweep of long variants: in report.html every table of a cell's figures
    begins with them and ends with its variant label; no definition is left outside a fold."""
    runs = sweep_of(CAMPAIGN, tmp_path / "runs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(runs), "--out", str(tmp_path / "rep"), "--formats", "png"]) == 0
    page = _Page((tmp_path / "rep" / "report.html").read_text())
    firsts = {t["head"][0]["title"]: t for t in page.tables}
    leads = {
        "throughput_img_s": ["throughput_img_s", "per_gpu_img_s", "efficiency_pct", "framework"],
        "data_pct": ["data_pct", "compute_pct", "allreduce_pct", "allreduce_exposed_pct", "other_pct"],
        "step_ms_median": ["step_ms_median", "step_ms_p95", "step_ms_max", "slow_steps_pct", "slow_time_pct"],
        "gpu_util_pct_mean": ["gpu_util_pct_mean", "gpu_util_pct_p95", "cpu_pct_mean", "framework"],
    }
    leads = {column_word(k, WORDS[GPU]): [column_word(c, WORDS[GPU]) for c in v] for k, v in leads.items()}
    for first, lead in leads.items():
        table = firsts[first]
        assert [th["title"] for th in table["head"][: len(lead)]] == lead
        assert "How this is computed" in table["details"]
    scaling = firsts["img/s"]
    assert scaling["head"][-1]["title"] == "variant"
    labels = {row[-1]["text"]: row[-1]["title"] for row in scaling["rows"] if row[-1]["text"]}
    assert sorted(labels) == ["v1", "v2"] and all(len(t) > 40 for t in labels.values())
    # the definitions are folded, under their table
    for words in ("'efficiency %': weak-scaling efficiency", "Shares of step time", "From the telemetry samples"):
        assert not [p for p in page.paragraphs if words in p]
        assert any(words in d for d in page.details)
    # the markdown keeps them, under the table, and the variants spelled out
    text = (tmp_path / "rep" / "report.md").read_text()
    section = text.split("## Throughput and weak scaling", 1)[1]
    assert section.index("| framework | loader |") < section.index("- v1: ") < section.index("'efficiency %': weak")
