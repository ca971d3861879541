"""Open the HTML report in a real headless Chromium (Debian's ``chromium`` through Playwright):
no console errors, no request beyond the file itself, every figure decoded and drawn."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str:
    path = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if not path:
        pytest.fail(
            "chromium is not installed: the HTML report test needs a real browser "
            "(as root: apt-get update && apt-get install -y chromium)"
        )
    return path


def test_report_opens_in_headless_chromium(written: dict[str, Path]) -> None:
    from playwright.sync_api import sync_playwright

    url = written["html"].resolve().as_uri()
    console_errors: list[str] = []
    page_errors: list[str] = []
    requests: list[str] = []
    failed: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            # nothing may leave the machine: any request other than the file is aborted (and recorded)
            page.route(lambda u: not u.startswith(("file:", "data:")), lambda route: route.abort())
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.on("requestfailed", lambda r: failed.append(f"{r.url} {r.failure}"))
            page.goto(url, wait_until="load")
            page.wait_for_load_state("networkidle")
            assert page.title() == "Test report <&>"
            figures = page.locator("figure.plot")
            n = figures.count()
            assert n == 7
            sizes = page.eval_on_selector_all(
                "figure.plot img", "imgs => imgs.map(i => [i.complete, i.naturalWidth, i.naturalHeight])"
            )
            assert len(sizes) == n
            for complete, w, h in sizes:
                assert complete and w > 200 and h > 100
            for k in range(n):
                fig = figures.nth(k)
                fig.scroll_into_view_if_needed()
                shot = Image.open(io.BytesIO(fig.screenshot())).convert("RGB")
                pixels = np.asarray(shot, dtype=float)
                assert pixels.var() > 0, f"figure {fig.get_attribute('id')} is blank"
                assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10, fig.get_attribute("id")
            tables = page.locator("table.tbl")
            assert tables.count() == 4
            assert "0.457 [0.401, 0.512]" in page.locator("#correlations").inner_text()
        finally:
            browser.close()
    assert console_errors == [] and page_errors == []
    assert failed == []
    # the page itself, and the inline images at most (Chromium may report data: URLs): nothing else
    assert url in requests
    assert all(r == url or r.startswith("data:") for r in requests), requests
