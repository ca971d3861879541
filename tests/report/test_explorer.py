"""The item explorer: disagreement ordering, escaping, and sorting / filtering in a real headless
Chromium (Debian's ``chromium`` through Playwright), with a screenshot."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from PIL import Image
from scipy.stats import rankdata

from evalign.report.explorer import disagreement, explorer_html, rank_normalise

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def items() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    rows = []
    for s in ("alpha", "beta", "gamma"):
        for i in range(12):
            grade = float(rng.integers(1, 6))
            rows.append({
                "id": f"q{i}",
                "system": s,
                "instruction": f"Question {i}: name a colour",
                "response": f"{s} answers {['red', 'blue', 'green'][i % 3]} " + "word " * int(rng.integers(1, 40)),
                "reference": "red",
                "human": grade,
                "rouge_l": float(np.clip(0.15 * grade + rng.normal(0, 0.2), 0, 1)),
                "ter": float(rng.random()),  # lower is better
                "judge": float(rng.integers(1, 6)),
                "judge.feedback": f"Feedback for {s}/{i}",
            })
    df = pd.DataFrame(rows)
    df.loc[0, "response"] = '<script>alert("x")</script> & <b>bold</b>'
    df.loc[1, "rouge_l"] = np.nan
    df.loc[2, "human"] = np.nan
    return df


def test_rank_normalise_matches_scipy_ranks() -> None:
    v = np.array([3.0, 1.0, np.nan, 3.0, 7.0])
    got = rank_normalise(v)
    ok = np.isfinite(v)
    np.testing.assert_allclose(got[ok], (rankdata(v[ok]) - 1) / 3)
    assert np.isnan(got[2])
    np.testing.assert_allclose(rank_normalise(v, higher_is_better=False)[ok], 1 - got[ok])
    assert rank_normalise([2.0, 2.0]).tolist() == [0.5, 0.5] and rank_normalise([4.0]).tolist() == [0.5]


def test_disagreement_is_the_largest_rank_difference(items: pd.DataFrame) -> None:
    d = disagreement(items, "human", ["rouge_l", "ter", "judge"], lower_is_better=["ter"])
    h = rank_normalise(items["human"])
    per = {
        "rouge_l": np.abs(rank_normalise(items["rouge_l"]) - h),
        "ter": np.abs(rank_normalise(items["ter"], higher_is_better=False) - h),
        "judge": np.abs(rank_normalise(items["judge"]) - h),
    }
    table = pd.DataFrame(per)
    np.testing.assert_allclose(d["disagreement"], table.max(axis=1, skipna=True).where(np.isfinite(h)))
    i = int(d["disagreement"].idxmax())
    assert d.loc[i, "disagreement_with"] == table.loc[i].idxmax()
    assert np.isnan(d.loc[2, "disagreement"]) and pd.isna(d.loc[2, "disagreement_with"])  # no human value
    assert d.loc[1, "disagreement_with"] in ("ter", "judge")  # rouge_l missing there


def test_fragment_is_escaped_and_ordered(items: pd.DataFrame) -> None:
    frag = explorer_html(items, human=["human"], metrics=["rouge_l", "ter"], judges=["judge"],
                         feedback=["judge.feedback"], lower_is_better=["ter"])
    assert '<script>alert("x")' not in frag
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in frag
    assert frag.count("<tr data-system=") == len(items)
    assert "http://" not in frag and "https://" not in frag and " src=" not in frag  # nothing to fetch
    d = disagreement(items, "human", ["rouge_l", "ter", "judge"], lower_is_better=["ter"])
    first = d["disagreement"].idxmax()
    body = frag.split("<tbody>", 1)[1]
    assert body.index(f"Feedback for {items.loc[first, 'system']}/{first % 12}<") < body.index("</tr>")
    small = explorer_html(items, human=["human"], metrics=["rouge_l"], max_rows=5)
    assert small.count("<tr data-system=") == 5 and "Showing the 5 rows with the largest disagreement of 36." in small
    with pytest.raises(ValueError, match="no column"):
        explorer_html(items, human=["human"], metrics=["nope"])


def _chromium() -> str:
    path = CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")
    if not path:
        pytest.fail("chromium is not installed (as root: apt-get update && apt-get install -y chromium)")
    return path


def _column(page, k: int) -> list[str]:
    return page.eval_on_selector_all(
        "#ex tbody tr:not(.ex-hidden)", f"rs => rs.map(r => r.cells[{k}].getAttribute('data-v'))")


def test_explorer_sorts_and_filters_in_chromium(items: pd.DataFrame, tmp_path: Path) -> None:
    from playwright.sync_api import sync_playwright

    frag = explorer_html(items, human=["human"], metrics=["rouge_l", "ter"], judges=["judge"],
                         feedback=["judge.feedback"], lower_is_better=["ter"], element_id="ex")
    page_path = tmp_path / "explorer.html"
    page_path.write_text(f"<!doctype html><html><head><meta charset='utf-8'><title>x</title></head>"
                         f"<body>{frag}</body></html>", encoding="utf-8")
    url = page_path.as_uri()
    errors: list[str] = []
    requests: list[str] = []
    shot_dir = Path(os.environ.get("EVALIGN_SCREENSHOTS", tmp_path))
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.route(lambda u: not u.startswith(("file:", "data:")), lambda route: route.abort())
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url, wait_until="load")
            count = page.locator("#ex .ex-count")
            assert count.inner_text() == "36 of 36 rows"
            # default order: disagreement, largest first, undefined last
            dis = _column(page, 0)
            vals = [float(v) for v in dis if v]
            assert vals == sorted(vals, reverse=True) and dis[-1] == "" and len(vals) == 35

            cols = page.eval_on_selector_all("#ex th", "hs => hs.map(h => h.getAttribute('title'))")
            k_rouge = cols.index("rouge_l")
            page.locator("#ex th").nth(k_rouge).locator("button").click()
            got = _column(page, k_rouge)
            nums = [float(v) for v in got if v]
            assert nums == sorted(nums, reverse=True) and got[-1] == ""  # missing value last
            assert page.locator("#ex th").nth(k_rouge).get_attribute("aria-sort") == "descending"
            page.locator("#ex th").nth(k_rouge).locator("button").click()
            nums = [float(v) for v in _column(page, k_rouge) if v]
            assert nums == sorted(nums)
            k_sys = cols.index("system")
            page.locator("#ex th").nth(k_sys).locator("button").click()
            assert _column(page, k_sys) == sorted(items["system"].tolist())

            page.locator("#ex .ex-filter").fill("green BETA")
            want = items[(items["system"] == "beta") & items["response"].str.contains("green")]
            assert count.inner_text() == f"{len(want)} of 36 rows" and len(want) > 0
            shown = page.eval_on_selector_all("#ex tbody tr:not(.ex-hidden)", "rs => rs.map(r => r.textContent)")
            assert len(shown) == len(want) and all("green" in t and "beta" in t for t in shown)
            page.locator("#ex .ex-filter").fill("")
            page.locator("#ex .ex-system").select_option("gamma")
            assert count.inner_text() == "12 of 36 rows"
            page.locator("#ex .ex-system").select_option("")
            page.locator("#ex th").nth(0).locator("button").click()  # numbers sort largest first on a first click
            assert page.locator("#ex th").nth(0).get_attribute("aria-sort") == "descending"
            png = page.locator("#ex").screenshot(path=str(shot_dir / "explorer.png"))
            pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=float)
            assert pixels.var() > 0 and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 10
            # the script text is never rendered as page text
            assert "alert(" in page.locator("#ex tbody").inner_text()
            assert page.evaluate("() => typeof window.alert === 'function'")
        finally:
            browser.close()
    assert errors == []
    assert all(r == url for r in requests), requests
