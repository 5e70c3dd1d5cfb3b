"""The HTML report in a real browser (Debian's chromium, headless, driven by playwright; `make browser`
installs both), on the golden campaign with a sweep of long variants (test_report_html.sweep_of): at
1280 x 900 the page does not scroll sideways, every table sits in its own scrolling box, the figure a
reader came for (img/s, the shares, GPU utilisation: each table's key columns) is on screen without
scrolling sideways, the definitions are folded under their table, every figure loads, headers read as
words, text sits left and numbers right; at 800 px the wide tables scroll in their box, their key
figures still in view."""

from __future__ import annotations

import warnings

import pytest

from ddlbench.cli import main
from tests.analysis.conftest import CAMPAIGN
from tests.analysis.test_report_html import sweep_of

MEASURE = """() => {
  const width = window.innerWidth;
  const boxes = [...document.querySelectorAll('table')].map(t => {
    const box = t.closest('.scroll');
    const edge = box ? box.getBoundingClientRect() : {left: 0, right: width};
    const right = Math.min(edge.right, width) + 0.5, left = edge.left - 0.5;
    const hidden = [...t.querySelectorAll('th.key')].filter(th => {
      const r = th.getBoundingClientRect(); return r.left < left || r.right > right;
    }).map(th => th.title);
    return {inBox: box !== null, boxRight: edge.right, wider: t.scrollWidth > (box ? box.clientWidth : width),
            width: t.scrollWidth, keys: t.querySelectorAll('th.key').length, hidden};
  });
  const cell = sel => { const c = document.querySelector(sel); return c ? getComputedStyle(c).textAlign : null; };
  const first = document.querySelector('th[title="img/s"]');
  const box = first.getBoundingClientRect();
  const details = [...document.querySelectorAll('details')];
  return {
    width, pageWidth: document.documentElement.scrollWidth,
    tables: boxes.length, outside: boxes.filter(b => !b.inBox || b.boxRight > width + 1).length,
    scrolling: boxes.filter(b => b.wider).length, widest: Math.max(...boxes.map(b => b.width)),
    keyTables: boxes.filter(b => b.keys > 0).length, hiddenKeys: boxes.flatMap(b => b.hidden),
    throughput: {left: box.left, right: box.right, first: first === first.parentElement.firstElementChild},
    folds: details.length, open: details.filter(d => d.open).length,
    foldsUnderTables: details.filter(d => d.previousElementSibling?.classList.contains('scroll')).length,
    definitionsOutside: [...document.querySelectorAll('p')].filter(p => !p.closest('details'))
      .filter(p => /efficiency_pct:|Shares of step time|From the telemetry samples/.test(p.textContent)).length,
    labels: [...document.querySelectorAll('td.variant')].map(td => [td.textContent, td.title.length]),
    images: document.images.length,
    broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    snakeHeaders: [...document.querySelectorAll('th')].map(t => t.textContent).filter(t => /[a-z]_[a-z]/.test(t)),
    text: cell('td.txt'), number: cell('td.num'),
  };
}"""


def test_the_report_reads_well_in_a_browser(tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (make browser)")
    runs = sweep_of(CAMPAIGN, tmp_path / "runs")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(runs), "--out", str(tmp_path / "rep"), "--formats", "png"]) == 0
    seen = {}
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            for width in (1280, 800):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.goto((tmp_path / "rep" / "report.html").as_uri())
                page.wait_for_load_state("load")
                seen[width] = page.evaluate(MEASURE)
        finally:
            browser.close()
    wide, narrow = seen[1280], seen[800]
    assert wide["pageWidth"] <= wide["width"], wide  # no sideways scrolling of the page
    assert wide["tables"] > 5 and wide["outside"] == 0, wide
    # the first table's key figure is on screen without scrolling, and so is every table's
    assert wide["throughput"]["first"] and 0 <= wide["throughput"]["left"] < wide["throughput"]["right"] <= 1280, wide
    assert wide["keyTables"] >= 5 and wide["hiddenKeys"] == [], wide
    # the definitions are folded (closed) right under their table
    assert wide["folds"] >= 5 and wide["foldsUnderTables"] == wide["folds"] and wide["open"] == 0, wide
    assert wide["definitionsOutside"] == 0, wide
    # the swept settings are a label, spelled out on hover
    assert wide["labels"] and {t for t, _ in wide["labels"]} == {"v1", "v2"}, wide
    assert all(n > 40 for _, n in wide["labels"]), wide
    assert wide["images"] >= 5 and wide["broken"] == [], wide
    assert wide["snakeHeaders"] == [], wide
    assert (wide["text"], wide["number"]) == ("left", "right"), wide
    # a narrow window: the page still does not scroll, the wide tables do in their box, key figures in view
    assert narrow["pageWidth"] <= narrow["width"] and narrow["outside"] == 0, narrow
    assert narrow["scrolling"] >= 1 and narrow["throughput"]["right"] <= 800, narrow
