"""The HTML report in a real headless Chromium (Debian's ``chromium`` + ``chromium-driver``):
highlights, filters, Chinese text, escaping, no console errors; a screenshot for humans."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from groundwatch.check.report import histogram_svg

from ..extras import require_system_tool
from .report_cases import all_grounded_baseline, build_report

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

from testkit.chromium import headless_flags  # noqa: E402

# Skipped on a developer machine without the browser; in CI (.ci/run installs it) a missing
# browser fails the test instead of hiding it.
CHROMIUM = require_system_tool(
    "chromium", "chromium-browser", package="chromium chromium-driver", module_level=True
)
CHROMEDRIVER = require_system_tool(
    "chromedriver", package="chromium chromium-driver", module_level=True
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    profile = tempfile.mkdtemp(prefix="gw-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in headless_flags(profile, "1200,1600"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager never goes looking for (or downloading) one.
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _visible_labels(driver: Any) -> list[str]:
    return [
        a.get_attribute("data-label")
        for a in driver.find_elements(By.CSS_SELECTOR, "article.case")
        if a.is_displayed()
    ]


def test_report_in_chromium(browser: Any, tmp_path: Path) -> None:
    report, summary, _ = build_report(tmp_path)
    browser.get(report.as_uri())

    # The inline script ran (CSP hash accepted) and nothing was blocked or failed.
    assert browser.find_element(By.ID, "shown").text == "6"
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == []
    # The hostile text did not run.
    assert browser.execute_script("return window.__pwned === undefined") is True
    hostile = browser.find_element(By.ID, "row-4")
    assert (
        "<script>window.__pwned = 1</script>" in hostile.find_element(By.CLASS_NAME, "answer").text
    )

    # Highlights: the right class on the right words, with a non-colour cue (icon + style).
    mixed = browser.find_element(By.ID, "row-1")
    marks = mixed.find_elements(By.CSS_SELECTOR, ".answer mark.claim")
    assert [(m.get_attribute("data-verdict"), m.text[:-1]) for m in marks] == [
        ("supported", "You can return an unused item within 30 days."),
        ("inferred", "Refunds arrive within a week."),
        ("contradicted", "Refunds are paid within 10 business days."),
        ("unsupported", "Shipping is free."),
    ]
    styles = browser.execute_script(
        "return Array.from(arguments[0]).map(m => getComputedStyle(m).textDecorationStyle)",
        marks,
    )
    assert styles == ["solid", "dashed", "wavy", "dotted"]
    assert [m.find_element(By.TAG_NAME, "sup").text for m in marks] == ["✓", "≈", "✗", "?"]

    # Chinese text is there, in a zh block, laid out with real glyph widths.
    zh = browser.find_element(By.ID, "row-3")
    assert zh.get_attribute("lang") == "zh"
    assert "公司2023年全年销售额为800万元。" in zh.find_element(By.CLASS_NAME, "answer").text
    contradicted = zh.find_element(By.CSS_SELECTOR, "mark.claim.v-contradicted")
    assert contradicted.size["width"] > 100

    # Evidence: the passage is collapsed, opens on click, and shows the quote highlighted.
    details = zh.find_element(By.TAG_NAME, "details")
    passage = details.find_element(By.CLASS_NAME, "passage")
    assert not passage.is_displayed()
    details.find_element(By.TAG_NAME, "summary").click()
    assert passage.is_displayed()
    assert passage.find_element(By.TAG_NAME, "mark").text == "全年销售额为500万元"

    # Filters: one label shows only that label; "all" brings everything back.
    browser.find_element(By.CSS_SELECTOR, 'button[data-filter="hallucinated"]').click()
    assert _visible_labels(browser) == ["hallucinated"] * 3
    assert browser.find_element(By.ID, "shown").text == "3"
    browser.find_element(By.CSS_SELECTOR, 'button[data-filter="invalid"]').click()
    assert _visible_labels(browser) == ["invalid"]
    browser.find_element(By.CSS_SELECTOR, 'button[data-filter="all"]').click()
    assert len(_visible_labels(browser)) == 6
    # Only the rows where groundwatch and the human label disagree.
    browser.find_element(By.ID, "only-mismatch").click()
    visible = [
        a.get_attribute("id")
        for a in browser.find_elements(By.CSS_SELECTOR, "article.case")
        if a.is_displayed()
    ]
    assert visible == ["row-4"]  # hostile: human says faithful, groundwatch says hallucinated
    browser.find_element(By.ID, "only-mismatch").click()

    # The hallucination rate's card: every valid row is labelled, so the labels' own rate
    # (2 of 5) with its interval, beside the judge's flag share.
    card = browser.find_element(By.CSS_SELECTOR, ".card.rate")
    rate = summary.rate
    assert card.is_displayed() and (rate.method, rate.estimate) == ("labels", 0.4)
    assert card.find_element(By.CLASS_NAME, "n").text == "40.0%"
    assert card.find_element(By.CLASS_NAME, "k").text == (
        f"hallucination rate (90% interval {rate.lower:.1%}–{rate.upper:.1%})"
    )
    assert card.find_element(By.CLASS_NAME, "why").text == (
        "5 audit labels of 5 judged answers; the audit labels alone; "
        "labels used: every row's label (the file is fully labelled)"
    )

    # The summary chart: one bar per bin, counts adding up to the scored answers.
    bars = browser.find_elements(By.CSS_SELECTOR, "svg.chart")[0].find_elements(
        By.CLASS_NAME, "bar"
    )
    assert len(bars) == 10
    assert sum(int(b.get_attribute("data-count")) for b in bars) == summary.scored

    shot = tmp_path / "report.png"
    browser.set_window_size(1200, 2000)
    assert browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 20_000
    # In the page as screenshotted, no chart label overlaps another.
    assert _overlapping_chart_labels(browser) == []


_OVERLAPS_JS = """
const found = [];
for (const [c, svg] of Array.from(document.querySelectorAll('svg.chart')).entries()) {
  const boxes = Array.from(svg.querySelectorAll('text')).map(t => [t.textContent,
    t.getBoundingClientRect()]);
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const [a, p] = boxes[i], [b, q] = boxes[j];
    if (p.left < q.right - 0.5 && q.left < p.right - 0.5 &&
        p.top < q.bottom - 0.5 && q.top < p.bottom - 0.5) found.push([c, a, b]);
  }
}
return found;
"""


def _overlapping_chart_labels(driver: Any) -> list[list[Any]]:
    return list(driver.execute_script(_OVERLAPS_JS))


@pytest.mark.parametrize(
    "bins",
    [
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 4],  # one tall bar: its count right under the title
        [98765, 87654, 99999, 45678, 100000, 12345, 99998, 88888, 77777, 100000],  # wide counts
    ],
)
def test_chart_labels_never_overlap(browser: Any, tmp_path: Path, bins: list[int]) -> None:
    page = tmp_path / "chart.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><style>svg text { font-size: 11px; '
        "font-family: system-ui, sans-serif; }</style></head><body>"
        + histogram_svg("groundedness", bins)
        + "</body></html>",
        encoding="utf-8",
    )
    browser.get(page.as_uri())
    assert _overlapping_chart_labels(browser) == []


def test_the_baseline_table_keeps_every_cell_under_its_header(browser: Any, tmp_path: Path) -> None:
    report, summary, _ = build_report(tmp_path, baseline=all_grounded_baseline(tmp_path))
    assert summary.baseline is not None and summary.baseline.counts["newly_failing"] > 0
    browser.get(report.as_uri())
    table = browser.find_element(By.ID, "baseline")
    # Each cell's box, as laid out: [left, right] of the headers, then of each row's cells.
    boxes = browser.execute_script(
        """
        const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.right]; };
        const rows = Array.from(arguments[0].rows);
        return rows.map(r => Array.from(r.cells).map(box));
        """,
        table,
    )
    header, *rows = boxes
    assert len(header) == 3 and rows
    failing = table.find_element(By.CSS_SELECTOR, "tr.fail")
    right = table.rect["x"] + table.rect["width"]
    for cells in rows:
        assert len(cells) == len(header)
        for (left, end), (h_left, h_end) in zip(cells, header, strict=True):
            # Under its own header, and inside the table (nothing pushed out of the grid).
            assert abs(left - h_left) < 1 and abs(end - h_end) < 1, (cells, header)
            assert end <= right + 1
    # A row's first cell starts where the table's first column does: no box in front of it.
    first_cell = failing.find_element(By.TAG_NAME, "td")
    assert abs(first_cell.rect["x"] - header[0][0]) < 1
    # The row is still marked, inside its first cell.
    marker = browser.execute_script(
        "return getComputedStyle(arguments[0], '::before').content", first_cell
    )
    assert "FAIL" in marker
