"""The HTML report in a real browser (Debian's chromium, headless, driven by playwright; `make browser`
installs both): at 1280 x 900 the page does not scroll sideways, every wide table scrolls inside its own
box, every figure loads, headers read as words, text sits left and numbers right."""

from __future__ import annotations

import warnings

import pytest

from ddlbench.cli import main
from tests.analysis.conftest import CAMPAIGN

MEASURE = """() => {
  const width = window.innerWidth;
  const boxes = [...document.querySelectorAll('table')].map(t => {
    const box = t.closest('.scroll');
    return {inBox: box !== null, boxRight: box ? box.getBoundingClientRect().right : t.getBoundingClientRect().right,
            wider: t.scrollWidth > (box ? box.clientWidth : width)};
  });
  const cell = sel => { const c = document.querySelector(sel); return c ? getComputedStyle(c).textAlign : null; };
  return {
    width, pageWidth: document.documentElement.scrollWidth,
    tables: boxes.length, outside: boxes.filter(b => !b.inBox || b.boxRight > width + 1).length,
    scrolling: boxes.filter(b => b.wider).length,
    images: document.images.length,
    broken: [...document.images].filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    snakeHeaders: [...document.querySelectorAll('th')].map(t => t.textContent).filter(t => /[a-z]_[a-z]/.test(t)),
    text: cell('td.txt'), number: cell('td.num'),
  };
}"""


def test_the_report_reads_well_in_a_browser(tmp_path, chromium):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (make browser)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["report", str(CAMPAIGN), "--out", str(tmp_path / "rep"), "--formats", "png"]) == 0
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((tmp_path / "rep" / "report.html").as_uri())
            page.wait_for_load_state("load")
            seen = page.evaluate(MEASURE)
        finally:
            browser.close()
    assert seen["pageWidth"] <= seen["width"], seen  # no sideways scrolling of the page
    assert seen["tables"] > 5 and seen["outside"] == 0, seen
    assert seen["scrolling"] >= 1, seen  # the wide ones scroll in their box
    assert seen["images"] >= 5 and seen["broken"] == [], seen
    assert seen["snakeHeaders"] == [], seen
    assert (seen["text"], seen["number"]) == ("left", "right"), seen
