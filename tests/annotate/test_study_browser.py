"""A study on the labelling page in Debian's chromium (selenium, chromium-driver): the slips that changed
data unseen (a button keeping the focus, a double key press, a comment moving to the next item, a notice
out of sight on a phone), each first reproduced on the page as it was; invited annotators' tokens, the
admin view, the instructions, Markdown items rendered inert, the layout's side names, the focus ring and
the end page of a late annotator. One browser and one server per module (the module's tests run in order).

``EVALIGN_UPDATE_SCREENSHOTS=1`` also writes the docs' study screenshots (docs/img/annotate_study_*.png)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from annotate_helpers import fill, pair_store
from browser_helpers import (
    HAVE_BROWSER,
    Server,
    browser,
    key_shown,
    notice,
    open_page,
    press,
    progress,
    viewport,
    wait_progress,
    webdriver,
)
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from evalign.annotate.app import invite
from evalign.annotate.study import read_gold

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE_BROWSER, reason="needs Debian's chromium and chromium-driver (scripts/test.sh "
                                                "installs both)"),
]

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
ADMIN = "admin-token-of-the-study"
COMPLETION = "https://app.prolific.com/submissions/complete?cc=C1A2B3"
MIN_SECONDS = 1.0
CODE = "\n".join(f"    total += values[{i}] * weights[{i}]  # step {i} of the weighted sum, kept on one line" for i in range(60))
XSS = ("<script>window.__xss = 1</script> <img src=x onerror=\"window.__xss = 2\"> "
       "[click me](javascript:window.__xss=3) <a href=\"javascript:window.__xss=4\" id=\"xss\">raw link</a>")


def _items(path: Path, n: int) -> None:
    rows = []
    for i in range(n):
        rows.append({
            "id": f"fn-{i}",
            "instruction": f"**Question {i}**: which function computes the weighted sum? {XSS}",
            "response_a": f"Version A:\n\n```python\ndef weighted(values, weights):\n    total = 0\n{CODE}\n    return total\n```",
            "response_b": "Version B, *shorter*:\n\n```python\ndef weighted(v, w):\n    return sum(x * y for x, y in zip(v, w))\n```\n\n"
                          "مرحبا: هذه الدالة أقصر",
            "system_a": "model-x", "system_b": "model-y"})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The study's server (12 long code items, 2 labels each, instructions, a completion link, two invited
    annotators, the admin token) and a second one whose one item is full (the late annotator)."""
    root = tmp_path_factory.mktemp("study")
    _items(root / "items.jsonl", 12)
    (root / "guide.md").write_text("# How to label\n\nPick the **better** function; press `?` when unsure.\n")
    links = dict(invite(root / "labels.sqlite", ["alice", "bob"]))
    server = Server(root, ["items.jsonl", "--db", "labels.sqlite", "--per-item", "2", "--instructions", "guide.md",
                           "--completion-url", COMPLETION, "--admin-token", ADMIN])
    server.start()
    small = root / "small"
    small.mkdir()
    _items(small / "items.jsonl", 1)
    late = Server(small, ["items.jsonl", "--db", "one.sqlite", "--per-item", "1", "--min-seconds", "0",
                          "--completion-url", COMPLETION])
    late.start()
    driver = browser()
    try:
        yield {"server": server, "late": late, "driver": driver, "db": root / "labels.sqlite",
               "tokens": {n: link.split("token=")[1] for n, link in links.items()}}
    finally:
        driver.quit()
        server.stop()
        late.stop()


def _count(db: Path, who: str) -> list[tuple[str, str | None]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        return con.execute("SELECT i.key, l.comment FROM labels l JOIN items i ON i.idx = l.idx WHERE annotator = ? "
                           "ORDER BY l.id", (who,)).fetchall()


def _wait_done(d: webdriver.Chrome, n: int) -> None:
    """Until the page counts ``n`` labels (the total shrinks as other annotators fill items up)."""
    WebDriverWait(d, 20).until(lambda x: progress(x).startswith(f"{n} of "))


def _start(d: webdriver.Chrome, url: str) -> None:
    """Open an annotator's page and leave the instructions (shown before the first item)."""
    open_page(d, url)
    WebDriverWait(d, 20).until(lambda x: x.find_element(By.ID, "instructions-panel").is_displayed())
    d.find_element(By.ID, "close-instructions").click()
    WebDriverWait(d, 20).until(lambda x: x.find_element(By.ID, "task-area").is_displayed())


def _wait_seen(seconds: float = MIN_SECONDS + 0.1) -> None:
    time.sleep(seconds)  # the item on screen long enough to count


def _inert(d: webdriver.Chrome) -> None:
    assert d.execute_script("return window.__xss === undefined")
    assert d.find_elements(By.CSS_SELECTOR, "#task-area img, #task-area script, #xss") == []
    hrefs = [a.get_attribute("href") for a in d.find_elements(By.CSS_SELECTOR, "#task-area a")]
    assert all(h is None or h.startswith(("http:", "https:", "mailto:")) for h in hrefs), hrefs
    assert "<script>window.__xss = 1</script>" in d.find_element(By.ID, "instruction").text  # as text


def test_tokens_roles_and_the_admin_view(study: dict) -> None:
    d, base, tokens = study["driver"], study["server"].base, study["tokens"]
    d.delete_all_cookies()
    d.get(f"{base}/annotate/alice?token={tokens['bob']}")  # bob's link on alice's page
    assert "403" in d.find_element(By.TAG_NAME, "body").text and d.find_elements(By.ID, "choices") == []
    d.get(f"{base}/annotate/alice?token={tokens['alice']}")
    WebDriverWait(d, 20).until(lambda x: " of " in progress(x))
    for path in ("/admin", "/agreement", "/api/admin"):  # alice (her cookie now) cannot open the admin view
        d.get(f"{base}{path}")
        assert "403" in d.find_element(By.TAG_NAME, "body").text, path
    d.get(f"{base}/annotate/bob")  # nor bob's page
    assert "403" in d.find_element(By.TAG_NAME, "body").text
    d.get(f"{base}/admin?token={ADMIN}")
    table = d.find_element(By.TAG_NAME, "table").text
    assert "alice" in table and "bob" in table and "gold accuracy" in table
    d.delete_all_cookies()


def test_instructions_first_markdown_inert_monospace_code(study: dict) -> None:
    d, base = study["driver"], study["server"].base
    viewport(d, 1280, 800)
    open_page(d, f"{base}/annotate/ivy")
    panel = d.find_element(By.ID, "instructions-panel")
    WebDriverWait(d, 20).until(lambda x: panel.is_displayed())
    assert not d.find_element(By.ID, "task-area").is_displayed()
    assert d.find_element(By.CSS_SELECTOR, "#instructions h1").text == "How to label"
    press(d, "a")  # the instructions first: no label
    assert _count(study["db"], "ivy") == []
    d.find_element(By.ID, "close-instructions").click()
    _inert(d)
    pre = d.find_element(By.CSS_SELECTOR, "#response-left pre, #response-right pre")
    assert "monospace" in pre.value_of_css_property("font-family")
    assert pre.value_of_css_property("white-space") == "pre-wrap"
    assert "\n" in pre.text  # the code keeps its line breaks
    assert d.find_element(By.CSS_SELECTOR, "#instruction strong").text.startswith("Question")  # Markdown rendered
    rtl = [p for p in d.find_elements(By.CSS_SELECTOR, "#responses p") if "مرحبا" in p.text]
    assert rtl and rtl[0].get_attribute("dir") == "auto"
    assert d.find_element(By.ID, "instruction").get_attribute("dir") == "auto"
    link = d.find_element(By.ID, "show-instructions")  # linked on every item
    assert link.is_displayed()
    link.click()
    assert d.find_element(By.ID, "instructions-panel").is_displayed()
    press(d, "\ue00c")  # Esc: back to the item
    assert d.find_element(By.ID, "task-area").is_displayed()


def test_buttons_never_keep_the_focus(study: dict) -> None:
    """Slip 1: after a click on Undo (or Skip) a Space or Enter repeated it: an older label undone, an
    item skipped unseen."""
    d, base, db = study["driver"], study["server"].base, study["db"]
    _start(d, f"{base}/annotate/una")
    for n in (1, 2):
        _wait_seen()
        press(d, "a")
        wait_progress(d, f"{n} of 12")
    second = _count(db, "una")[1][0]
    d.find_element(By.ID, "undo").click()
    wait_progress(d, "1 of 12")
    assert key_shown(d) == second
    text = notice(d)
    for key in (" ", "\ue007"):  # Space, Enter: nothing more is undone
        press(d, key)
    time.sleep(0.8)
    assert len(_count(db, "una")) == 1 and progress(d) == "1 of 12"
    assert second in text and "Left is better" in text  # which item and which answer were removed
    assert d.switch_to.active_element.tag_name == "body"
    d.find_element(By.ID, "skip").click()
    WebDriverWait(d, 20).until(lambda x: key_shown(x) != second)
    shown = key_shown(d)
    for key in (" ", "\ue007"):
        press(d, key)
    time.sleep(0.8)
    assert key_shown(d) == shown  # not skipped unseen
    assert d.switch_to.active_element.tag_name == "body"


def test_double_press_labels_once(study: dict) -> None:
    """Slip 2: a double key press (30 or 150 ms apart) labelled the next item after 0.05 s on screen."""
    d, base, db = study["driver"], study["server"].base, study["db"]
    _start(d, f"{base}/annotate/dora")
    for gap, second_key, n in ((0.03, "a", 1), (0.15, "a", 2), (0.15, "b", 3)):
        _wait_seen()
        ActionChains(d).send_keys("a").pause(gap).send_keys(second_key).perform()
        time.sleep(1.2)
        assert len(_count(db, "dora")) == n, (gap, second_key)  # one label per double press
        assert progress(d).startswith(f"{n} of ")
        hint = d.find_element(By.ID, "notice")
        assert hint.is_displayed() and ("0.3 s" in hint.text or "Too quick" in hint.text), hint.text


def test_comment_belongs_to_its_item(study: dict) -> None:
    """Slip 3: a comment typed on one item stayed in the box after a skip and was stored on the next."""
    d, base, db = study["driver"], study["server"].base, study["db"]
    _start(d, f"{base}/annotate/cleo")
    first = key_shown(d)
    box = d.find_element(By.ID, "comment")
    box.click()
    box.send_keys("the code of A is cut off")
    d.find_element(By.CSS_SELECTOR, "#task-area h2").click()
    d.find_element(By.ID, "skip").click()
    WebDriverWait(d, 20).until(lambda x: key_shown(x) != first)
    assert box.get_attribute("value") == ""
    second = key_shown(d)
    box.click()
    box.send_keys("B is right")
    d.find_element(By.CSS_SELECTOR, "#task-area h2").click()
    press(d, "?")  # unsure of this one: the flag goes with its label
    assert d.find_element(By.ID, "unsure").get_attribute("aria-pressed") == "true"
    _wait_seen()
    press(d, "b")
    _wait_done(d, 1)
    assert d.find_element(By.ID, "unsure").get_attribute("aria-pressed") == "false"  # the next item: afresh
    _wait_seen()
    press(d, "a")
    _wait_done(d, 2)
    got = _count(db, "cleo")
    assert got[0] == (second, "B is right") and got[1][1] is None  # on its own item, and only there
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        assert con.execute("SELECT unsure, broken FROM labels WHERE annotator = 'cleo' ORDER BY id").fetchall() == \
            [(1, 0), (0, 0)]


def test_phone_long_code_item_label_bar_and_notices_in_view(study: dict) -> None:
    """Slip 4 and the layout: on a 390 px phone a long code item keeps the label bar and every notice in
    view (the "Not saved" notice was 2,000 px above); the stacked responses are Top and Bottom."""
    d, base = study["driver"], study["server"].base
    viewport(d, 390, 844, True)
    _start(d, f"{base}/annotate/pia")
    height = d.execute_script("return document.documentElement.scrollHeight")
    assert height > 2500, height  # a long item
    assert d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")

    def in_view(element_id: str) -> bool:
        return d.execute_script(
            "const r = document.getElementById(arguments[0]).getBoundingClientRect();"
            "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;", element_id)

    d.execute_script("window.scrollTo(0, document.documentElement.scrollHeight / 2)")
    assert in_view("labelbar") and in_view("choices")
    press(d, "a")  # too quick: said where the annotator looks
    WebDriverWait(d, 5).until(lambda x: "Too quick" in notice(x))
    assert in_view("notice")
    _wait_seen()
    d.execute_cdp_cmd("Network.enable", {})
    d.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                           "uploadThroughput": -1})
    try:
        d.execute_script("window.scrollTo(0, document.documentElement.scrollHeight / 2)")
        press(d, "b")
        WebDriverWait(d, 20).until(lambda x: "Not saved" in notice(x))
        assert in_view("notice") and in_view("labelbar")
        if os.environ.get("EVALIGN_UPDATE_SCREENSHOTS"):
            d.save_screenshot(str(study["db"].parent / "annotate_study_phone.png"))
    finally:
        d.execute_cdp_cmd("Network.emulateNetworkConditions", {"offline": False, "latency": 0,
                                                               "downloadThroughput": -1, "uploadThroughput": -1})
    press(d, "b")  # back online: the same key stores the label
    _wait_done(d, 1)
    viewport(d, 1280, 800)


def _luminance(rgb: list[float]) -> float:
    c = [x / 255 for x in rgb[:3]]
    c = [x / 12.92 if x <= 0.03928 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
    return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]


def _contrast(a: list[float], b: list[float]) -> float:
    la, lb = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


def test_focus_ring_contrast(study: dict) -> None:
    d, base = study["driver"], study["server"].base
    viewport(d, 1280, 800)
    _start(d, f"{base}/annotate/fay")
    parse = "const p = (s) => s.match(/[\\d.]+/g).map(Number);"
    for selector in ("#choices button", "#undo"):  # a dark button and a light one, focused from the keyboard
        d.execute_script("document.querySelector(arguments[0]).focus({focusVisible: true})", selector)
        style = d.execute_script(parse + "const s = getComputedStyle(document.activeElement);"
                                 "return [s.outlineStyle, parseFloat(s.outlineWidth), p(s.outlineColor),"
                                 " p(s.backgroundColor), p(getComputedStyle(document.body).backgroundColor),"
                                 " document.activeElement.matches(':focus-visible')]")
        kind, width, ring, button, page, visible = style
        assert visible and kind == "solid" and width >= 3, style
        assert _contrast(ring, button) >= 3 and _contrast(ring, page) >= 3, style
    d.execute_script("document.activeElement.blur()")


def test_late_annotator_end_page_and_completion_link(study: dict) -> None:
    d, late = study["driver"], study["late"]
    open_page(d, f"{late.base}/annotate/first")
    press(d, "a")
    wait_progress(d, "1 of 1")
    done = d.find_element(By.ID, "done")
    assert "All done" in done.text
    assert d.find_element(By.CSS_SELECTOR, "#done a.completion").get_attribute("href") == COMPLETION
    open_page(d, f"{late.base}/annotate/second")  # every item has its one label already
    done = d.find_element(By.ID, "done")
    assert "Nothing left to label" in done.text and "already has its 1 labels" in done.text
    assert d.find_elements(By.CSS_SELECTOR, "#done a.completion") == []
    assert not d.find_element(By.ID, "task-area").is_displayed()


def test_screenshots_for_the_docs(study: dict) -> None:
    """The study page at desktop width (an item with its code), and the admin view of a study three
    annotators have labelled 40 items in, with gold items; copied into docs/img with
    EVALIGN_UPDATE_SCREENSHOTS=1."""
    d, base = study["driver"], study["server"].base
    out = study["db"].parent
    viewport(d, 1280, 800)
    _start(d, f"{base}/annotate/zoe")
    d.execute_script("document.getElementById('notice').hidden = true")
    assert d.save_screenshot(str(out / "annotate_study_page.png"))
    root = out / "admin"
    root.mkdir()
    store, truth, _ = pair_store(root, 40)
    fill(store, {"ana": 0.85, "ben": 0.8, "chen": 0.7}, truth)
    store.undo("chen")
    rows = [{"id": f"check{i}", "instruction": f"Attention check {i}: pick the answer that says 'blue'.",
             "response_a": "blue" if i % 2 else "red", "response_b": "red" if i % 2 else "blue",
             "gold": "A" if i % 2 else "B"} for i in range(4)]
    (root / "gold.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    gold = read_gold(root / "gold.jsonl", "pairwise")
    store.set_gold(gold)
    for name, right in (("ana", 4), ("ben", 3), ("chen", 2)):
        for i, (key, _, answer) in enumerate(gold):
            store.add_gold_label(name, key, answer if i < right else -answer, shown="ab", seconds=4.0)
    store.close()
    with sqlite3.connect(root / "labels.sqlite") as con:
        con.execute("UPDATE labels SET unsure = 1 WHERE annotator = 'chen' AND idx < 6")
        con.execute("UPDATE labels SET broken = 1 WHERE idx = 17")
    server = Server(root, ["pairs.jsonl", "--db", "labels.sqlite", "--admin-token", ADMIN])
    server.start()
    try:
        d.get(f"{server.base}/admin?token={ADMIN}")
        table = d.find_element(By.TAG_NAME, "table").text
        assert "ana" in table and "1.000 (4/4)" in table and "0.500 (2/4)" in table, table
        assert d.save_screenshot(str(out / "annotate_admin.png"))
    finally:
        server.stop()
    d.delete_all_cookies()
    for f in out.glob("annotate_*.png"):
        assert f.stat().st_size > 10_000
        if os.environ.get("EVALIGN_UPDATE_SCREENSHOTS"):
            DOCS_IMG.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, DOCS_IMG / f.name)
