"""Open the HTML report in a real headless Chromium (Debian's ``chromium`` through Playwright):
no console errors, no request beyond the file itself, every figure decoded and drawn."""

from __future__ import annotations

import io
import os
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


@pytest.fixture(scope="module")
def pandalm_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``evalign report --dataset pandalm`` with two metrics and the two upstream judges."""
    from typer.testing import CliRunner

    from evalign.cli import app

    out = tmp_path_factory.mktemp("pandalm") / "report.html"
    res = CliRunner().invoke(app, ["report", "--dataset", "pandalm", "-m", "rouge_l", "-m", "chrf",
                                   "-j", "judge:gpt-3.5-turbo", "-j", "judge:pandalm-7b", "--bootstrap", "100",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _shown(page, k: int) -> list[str]:
    return page.eval_on_selector_all(
        "#evalign-explorer tbody tr:not(.ex-hidden)", f"rs => rs.map(r => r.cells[{k}].getAttribute('data-v'))")


def test_report_explorer_and_figures_in_chromium(pandalm_report: Path, tmp_path: Path) -> None:
    """The real report: the pair explorer sorts and filters; every figure is screenshot (kept in
    $EVALIGN_SCREENSHOTS when set) and is not blank."""
    from playwright.sync_api import sync_playwright

    from evalign.datasets import load_dataset

    pairs = load_dataset("pandalm").pairs
    shots = Path(os.environ.get("EVALIGN_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    url = pandalm_report.resolve().as_uri()
    errors: list[str] = []
    requests: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.route(lambda u: not u.startswith(("file:", "data:")), lambda route: route.abort())
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url, wait_until="load")
            figures = page.locator("figure.plot")
            assert figures.count() >= 3
            for k in range(figures.count()):
                fig = figures.nth(k)
                fig.scroll_into_view_if_needed()
                name = fig.get_attribute("id")
                png = fig.screenshot(path=str(shots / f"{name}.png"))
                pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)
                assert pixels.var() > 0 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10, name
                assert (shots / f"{name}.png").stat().st_size > 1000
            ex = page.locator("#evalign-explorer")
            count = ex.locator(".ex-count")
            assert count.inner_text() == f"{len(pairs)} of {len(pairs)} rows"
            heads = page.eval_on_selector_all("#evalign-explorer th", "hs => hs.map(h => h.getAttribute('title'))")
            for c in ("response_a", "response_b", "human (A-B)", "rouge_l (A-B)", "chrf (A-B)",
                      "judge:gpt-3.5-turbo", "judge:pandalm-7b"):
                assert c in heads, (c, heads)
            # default order: largest disagreement first
            dis = [float(v) for v in _shown(page, 0) if v]
            assert dis == sorted(dis, reverse=True)
            from evalign.report.explorer import PAIR_HUMAN, disagreement, pair_explorer

            spec = pair_explorer(pairs, None, pref_columns=["pref_1", "pref_2", "pref_3"], metrics=[],
                                 judges=["judge:gpt-3.5-turbo", "judge:pandalm-7b"])
            judges_only = disagreement(spec.items, PAIR_HUMAN, list(spec.judges))["disagreement"].max()
            assert dis[0] >= judges_only > 0.5  # the metrics only add candidates
            # sort by rouge_l's difference (numbers, largest first, then the other way)
            k = heads.index("rouge_l (A-B)")
            ex.locator("th").nth(k).locator("button").click()
            got = [float(v) for v in _shown(page, k) if v]
            assert got == sorted(got, reverse=True) and len(got) > 900
            ex.locator("th").nth(k).locator("button").click()
            got = [float(v) for v in _shown(page, k) if v]
            assert got == sorted(got)
            # filter by task words: the count matches the pair table
            task = str(pairs["task"].value_counts().index[0])
            ex.locator(".ex-filter").fill(task.lower())
            want = pairs.apply(lambda r: task.lower() in " ".join(map(str, r.to_numpy())).lower(), axis=1).sum()
            n = int(count.inner_text().split()[0])
            assert 0 < n <= len(pairs) and n >= int((pairs["task"] == task).sum()), (n, want)
            shown_tasks = _shown(page, heads.index("task"))
            assert len(shown_tasks) == n
            ex.scroll_into_view_if_needed()
            png = ex.screenshot(path=str(shots / "explorer.png"))
            pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)
            assert pixels.var() > 0
        finally:
            browser.close()
    assert errors == []
    assert all(r == url or r.startswith("data:") for r in requests), requests


def test_pair_explorer_shows_the_responses_at_laptop_width(tmp_path: Path) -> None:
    """The PandaLM pair explorer (every column the demo shows) at 1280 px: the first row is at most
    about 8 lines tall and both responses start inside the visible part of the table, beside the
    disagreement (they were pushed past 1,500 px by the id, task, system, instruction and input columns)."""
    from playwright.sync_api import sync_playwright

    from evalign.datasets import load_dataset
    from evalign.report.explorer import pair_explorer

    ds = load_dataset("pandalm")
    pairs = ds.pairs.head(60).copy()
    metrics = ["bleu", "chrf", "rouge_l", "exact_match"]
    for k, m in enumerate(metrics):
        pairs[f"{m}_a"] = np.arange(len(pairs), dtype=float) * (k + 1)
        pairs[f"{m}_b"] = 0.5
    spec = pair_explorer(pairs, None, pref_columns=ds.pref_columns, metrics=metrics, judges=ds.judge_columns)
    page_file = tmp_path / "explorer.html"
    page_file.write_text("<!doctype html><html><head><meta charset='utf-8'><title>x</title></head>"
                         f"<body style='margin:2em'>{spec.html()}</body></html>", encoding="utf-8")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            m = page.evaluate("""() => {
              const s = document.querySelector('section.evalign-explorer');
              const sc = s.querySelector('.ex-scroll').getBoundingClientRect();
              const heads = [...s.querySelectorAll('th')].map(t => t.textContent.trim());
              const row = s.querySelector('tbody tr');
              const cells = [...row.querySelectorAll('td')];
              const at = name => { const r = cells[heads.indexOf(name)].getBoundingClientRect();
                                   return [r.left - sc.left, r.right - sc.left]; };
              const fs = parseFloat(getComputedStyle(row).fontSize);
              return {visible: sc.width, row: row.getBoundingClientRect().height, font: fs,
                      a: at('response_a'), b: at('response_b'), first: heads.slice(0, 4)};
            }""")
        finally:
            browser.close()
    assert m["first"] == ["disagreement", "vs", "response_a", "response_b"]
    assert m["row"] <= 9 * m["font"] * 1.4  # at most about 8 lines of 1.4 line height
    assert m["visible"] > 1000
    assert m["a"][0] < 400 and m["b"][1] < m["visible"], m  # both responses in view, whole


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """The demo's report (issue 32 looked at it in a browser at 1280 px), with few resamples."""
    from evalign.demo import run_demo, write_demo

    result = run_demo(n_resamples=50, seed=0)
    out = tmp_path_factory.mktemp("demo")
    write_demo(result, out)
    return out / "report.html", result


#: per table: [its section, its (or, for the explorer, its scroll box's) right edge, the page's width, its
#: width, its box's width]
_TABLE_FIT = """() => [...document.querySelectorAll('table')].filter(t => t.offsetParent !== null).map(t => {
    const box = t.closest('.tblwrap, .ex-scroll') || t.parentElement;
    const grid = t.classList.contains('ex-table');
    return [t.closest('section').id, Math.round((grid ? box : t).getBoundingClientRect().right),
            document.documentElement.clientWidth, grid ? box.clientWidth : t.scrollWidth, box.clientWidth];
})"""
#: per interval cell ("value [low, high]"): the number of lines its text takes
_INTERVAL_LINES = """() => [...document.querySelectorAll('td.iv')].filter(td => td.offsetParent !== null).map(td => {
    const r = document.createRange(); r.selectNodeContents(td);
    return new Set([...r.getClientRects()].map(x => Math.round(x.top))).size;
})"""


def test_demo_report_fits_1280_px(demo_report: tuple[Path, object]) -> None:
    """Issue 32: no horizontal overflow of any table at 1280 px (the trust tables show fewer columns, the
    interval on one line, the rest behind a toggle); the leaderboard heads its columns as the result does;
    the preference-accuracy forest plot is one panel per table."""
    from playwright.sync_api import sync_playwright

    path, result = demo_report
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.route(lambda u: not u.startswith(("file:", "data:")), lambda route: route.abort())
            page.goto(path.resolve().as_uri(), wait_until="load")
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            fits = page.evaluate(_TABLE_FIT)
            assert len(fits) >= 6
            for section, right, width, table_w, box_w in fits:  # the item explorer, a sortable grid of every
                assert table_w <= box_w, (section, table_w, box_w)  # item, scrolls in its own box (sticky
                assert right <= width, (section, right, width)  # headers); every other table fits as it is
            lines = page.evaluate(_INTERVAL_LINES)
            assert lines and set(lines) == {1}, lines
            toggles = page.locator("input.allcols")
            assert toggles.count() == 2  # the correlation table and the preference-accuracy table
            for k in range(toggles.count()):
                toggles.nth(k).check()
            assert page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth")
            shown = page.eval_on_selector_all("#pair_accuracy table th", "ths => ths.filter(t => t.offsetParent "
                                              "!== null).map(t => t.innerText)")
            assert "accuracy_mean" in shown and "epsilon" in shown  # the rest of the columns, behind the toggle
            heads = page.eval_on_selector_all("#leaderboard table th", "ths => ths.map(t => t.innerText)")
            titles = page.eval_on_selector_all("#pair_accuracy figure.plot", "fs => fs.map(f => f.id)")
        finally:
            browser.close()
    labels = [c for c in result.system_result.systems.columns if "(" in c]  # the result's own headers
    assert labels == ["bleu (corpus)", "chrf (corpus)"] and set(labels) <= set(heads), heads
    assert not any("mean of items" in h for h in heads)
    assert titles == ["fig-pair_accuracy_intervals_pairs__pandalm__preference_accuracy__wit",
                      "fig-pair_accuracy_intervals_pairs__llmbar__preference_accuracy__with"], titles
