"""Opening a run report in a real headless Chromium (Debian's, driven by Playwright): its charts rendered, its
moves table filters, no console errors, how long it took to load; a screenshot is kept under .state/test-output/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers import REPO
from tools.browser import chromium_path

SCREENSHOTS = REPO / ".state" / "test-output"


def check_report_in_browser(report: Path, name: str) -> dict[str, Any]:
    """What the page showed: charts drawn, moves rows before/after filtering, console errors, screenshot."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    assert executable, "Chromium is not installed: `python -m tools.browser ensure` (make test does it)"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(report.resolve().as_uri(), wait_until="load")
            load_ms = page.evaluate("() => performance.getEntriesByType('navigation')[0].loadEventEnd")
            placeholders = page.eval_on_selector_all("div.chart", "els => els.length")
            # A chart is drawn when it nears the window: pass each one through it.
            for chart in page.query_selector_all("div.chart"):
                chart.scroll_into_view_if_needed()
                page.wait_for_timeout(50)
            page.wait_for_timeout(500)
            charts = page.eval_on_selector_all(
                ".js-plotly-plot", "els => els.map(e => { const r = e.getBoundingClientRect(); "
                "return {w: r.width, h: r.height, marks: e.querySelectorAll('svg path, svg rect').length}; })")
            visible_rows = "() => [...document.querySelectorAll('#moves tbody tr')]" \
                           ".filter(r => r.offsetParent !== null).length"
            rows_before = page.evaluate(visible_rows)
            first_topic = page.evaluate("() => document.querySelector('#moves tbody tr td')?.textContent ?? ''")
            filtered = None
            if rows_before:
                page.fill("#moves-filter", first_topic)
                page.wait_for_timeout(300)
                filtered = page.evaluate(visible_rows)
                page.fill("#moves-filter", "no-such-topic-anywhere")
                page.wait_for_timeout(300)
                nothing = page.evaluate(visible_rows)
                assert nothing == 0, f"filtering for a missing topic left {nothing} rows"
                page.fill("#moves-filter", "")
            screenshot = SCREENSHOTS / f"{name}.png"
            # A very long page (thousands of table rows) is shot at its top only: a full shot of it takes minutes.
            page.evaluate("() => window.scrollTo(0, 0)")
            tall = page.evaluate("() => document.documentElement.scrollHeight") > 20_000
            page.screenshot(path=str(screenshot), full_page=not tall)
        finally:
            browser.close()
    return {"charts": charts, "rows": rows_before, "filtered_rows": filtered, "first_topic": first_topic,
            "errors": errors, "screenshot": screenshot, "load_ms": load_ms, "placeholders": placeholders}


def every_chart_drawn(shown: dict[str, Any]) -> bool:
    """Every chart's place got a drawn chart with a size and marks."""
    charts = shown["charts"]
    return bool(charts) and len(charts) == shown["placeholders"] and all(
        c["w"] > 0 and c["h"] > 0 and c["marks"] > 0 for c in charts)


def open_airflow_link_logged_in(url: str, user: str, password: str, expected: list[str], name: str,
                                timeout_ms: float = 60_000) -> dict[str, Any]:
    """Open a link into Airflow's UI in Chromium as a person would from a message: the UI sends a browser without
    a session to its login page; log in there, land on the link, and wait until each of `expected` shows. Returns
    the page's final URL and text, the console errors and the screenshot's path."""
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    assert executable, "Chromium is not installed: `python -m tools.browser ensure` (make test does it)"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    screenshot = SCREENSHOTS / f"{name}.png"
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.set_default_timeout(timeout_ms)
            page.goto(url)
            page.fill("input[name=username]", user)
            page.fill("input[name=password]", password)
            page.click("button[type=submit]")
            try:
                for text in expected:
                    page.get_by_text(text).first.wait_for(state="visible")
            finally:
                page.screenshot(path=str(screenshot))
            return {"url": page.url, "text": page.inner_text("body"), "errors": errors, "screenshot": screenshot}
        finally:
            browser.close()
