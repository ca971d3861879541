"""The labelling page in a real browser: Debian's chromium driven by selenium with Debian's
chromium-driver (no browser download). Labels with the keys, undo, skip, reload, the server killed
between labels and restarted, two annotators at once, the XSS items checked after every label, and
screenshots at 1280 x 800 and 390 x 844 in which nothing overflows.

``EVALIGN_UPDATE_SCREENSHOTS=1`` also writes the docs' screenshots (docs/img/annotate_*.png)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from annotate_helpers import XSS, fill, pair_store, write_pairs
from browser_helpers import HAVE_BROWSER, Server, webdriver
from browser_helpers import browser as _browser
from browser_helpers import key_shown as _key_shown
from browser_helpers import labels as _labels
from browser_helpers import open_page as _open
from browser_helpers import press as _press
from browser_helpers import progress as _progress
from browser_helpers import viewport as _viewport
from browser_helpers import wait_progress as _wait_progress
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
ADMIN = "admin-token-for-tests"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE_BROWSER, reason="needs Debian's chromium and chromium-driver (scripts/test.sh "
                                                "installs both)"),
]


@pytest.fixture
def browsers() -> Iterator[list[webdriver.Chrome]]:
    opened: list[webdriver.Chrome] = []
    yield opened
    for d in opened:
        d.quit()


def _check_nothing_ran(driver: webdriver.Chrome) -> None:
    """No script of the XSS items ran and none of their markup became elements."""
    assert driver.execute_script("return window.__xss === undefined")
    assert driver.find_elements(By.ID, "xss") == []
    assert driver.find_elements(By.CSS_SELECTOR, "#task-area img, #task-area script, #task-area b") == []


def _check_no_script_ran(driver: webdriver.Chrome) -> None:
    """The XSS items' markup is shown as text and ran nothing."""
    _check_nothing_ran(driver)
    shown = driver.find_element(By.ID, "task-area").text
    assert any(x in shown for x in XSS)  # the text is there, as text


def _no_overflow(driver: webdriver.Chrome) -> None:
    """Nothing wider than the window, once the layout has settled after a reload (up to 10 s on a busy machine)."""
    script = "return [document.documentElement.scrollWidth, window.innerWidth]"
    with contextlib.suppress(TimeoutException):
        WebDriverWait(driver, 10).until(lambda d: (lambda w: w[0] <= w[1])(d.execute_script(script)))
    width = driver.execute_script(script)
    assert width[0] <= width[1], width


def test_label_with_keys_undo_skip_reload_restart_two_annotators(tmp_path: Path, browsers: list) -> None:
    write_pairs(tmp_path / "pairs.jsonl", 6, xss=True)
    db = tmp_path / "labels.sqlite"
    server = Server(tmp_path, ["pairs.jsonl", "--db", "labels.sqlite", "--per-item", "2", "--min-seconds", "0"])
    server.start()
    try:
        alice = _browser()
        browsers.append(alice)
        _open(alice, f"{server.base}/annotate/alice")
        assert _progress(alice) == "0 of 6"
        assert alice.switch_to.active_element.tag_name != "textarea"  # the keys work at once
        # a button for each answer and action, with its key shown
        buttons = [(kbd.text, b.text.removeprefix(kbd.text).strip()) for b in alice.find_elements(
            By.CSS_SELECTOR, "#choices button, .actions button") for kbd in b.find_elements(By.TAG_NAME, "kbd")]
        assert buttons == [("a", "Left is better"), ("b", "Right is better"), ("t", "Tie"), ("u", "Undo last"),
                           ("s", "Skip")], buttons
        _check_no_script_ran(alice)
        first = _key_shown(alice)
        left = alice.find_element(By.ID, "response-left").text
        _press(alice, "a")  # the left response is better
        _wait_progress(alice, "1 of 6")
        _check_no_script_ran(alice)
        (who, key, value, shown), = _labels(db)
        assert (who, key) == ("alice", first)
        assert value == (1.0 if shown == "ab" else -1.0)  # stored in the items' frame
        assert ("Answer A" in left) == (shown == "ab")
        # undo: the label is gone and the item is shown again
        _press(alice, "u")
        _wait_progress(alice, "0 of 6")
        assert _key_shown(alice) == first and _labels(db) == []
        assert "removed" in alice.find_element(By.ID, "notice").text
        # skip: the item goes to the end of alice's queue
        _press(alice, "s")
        WebDriverWait(alice, 20).until(lambda d: _key_shown(d) != first)
        second = _key_shown(alice)
        # reload: the same item in the same left/right order
        left2 = alice.find_element(By.ID, "response-left").text
        alice.refresh()
        WebDriverWait(alice, 20).until(lambda d: " of " in _progress(d))
        assert _key_shown(alice) == second and alice.find_element(By.ID, "response-left").text == left2
        # the comment box: typing there labels nothing; its text goes with the next label
        box = alice.find_element(By.ID, "comment")
        box.click()
        box.send_keys("a b t 1 u s")
        assert _labels(db) == [] and _progress(alice) == "0 of 6"
        alice.find_element(By.CSS_SELECTOR, "#task-area h2").click()  # leave the box
        _press(alice, "t")
        _wait_progress(alice, "1 of 6")
        _check_no_script_ran(alice)
        assert _labels(db)[0][1:3] == (second, 0.0)
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
            assert con.execute("SELECT comment FROM labels").fetchone()[0] == "a b t 1 u s"
        # a second annotator at the same time
        bob = _browser()
        browsers.append(bob)
        _open(bob, f"{server.base}/annotate/bob")
        assert _progress(bob) == "0 of 6"
        for step, (key_a, key_b) in enumerate((("b", "a"), ("a", "t")), start=1):
            _press(alice, key_a)
            _press(bob, key_b)
            _wait_progress(alice, f"{1 + step} of 6")
            _wait_progress(bob, f"{step} of 6")
            for d in (alice, bob):
                _check_no_script_ran(d)
        assert _progress(alice) == "3 of 6" and _progress(bob) == "2 of 6"
        # the server killed between labels, then restarted: nothing lost, both resume where they stopped
        before = _labels(db)
        server.kill()
        _press(alice, "a")  # sent while the server is down: not stored, said so, the item stays
        WebDriverWait(alice, 20).until(lambda d: "Not saved" in d.find_element(By.ID, "notice").text)
        stuck = _key_shown(alice)
        assert _labels(db) == before
        server.start()
        _press(alice, "a")  # the same key again, to the new server (the page's CSRF token still holds)
        _wait_progress(alice, "4 of 6")
        _check_no_script_ran(alice)
        assert _labels(db)[-1][:2] == ("alice", stuck)
        bob.refresh()
        WebDriverWait(bob, 20).until(lambda d: " of " in _progress(d))
        assert _progress(bob) == "2 of 6"
        _check_no_script_ran(bob)
        # alice finishes; the skipped item comes last
        keys_seen = []
        for _ in range(2):
            keys_seen.append(_key_shown(alice))
            _press(alice, "b")
            WebDriverWait(alice, 20).until(lambda d, n=len(keys_seen): _progress(d) == f"{4 + n} of 6")
            if _progress(alice) != "6 of 6":
                _check_no_script_ran(alice)
            else:  # the last label: no item shown any more, and nothing ran
                _check_nothing_ran(alice)
        assert keys_seen[-1] == first
        assert "All done" in alice.find_element(By.ID, "done").text
        labels = _labels(db)
        assert len(labels) == 8 and len({(a, k) for a, k, _, _ in labels}) == 8  # one per annotator and item
        assert sorted(k for a, k, _, _ in labels if a == "alice") == sorted(f"q{i:03d}" for i in range(6))
        # the export of what the browser stored
        out = tmp_path / "wide.jsonl"
        res = subprocess.run([sys.executable, "-m", "evalign", "annotate", "export", str(db), "-o", str(out)],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [r["pref_alice"] for r in rows] == [next(v for a, k, v, _ in labels if a == "alice" and k == r["id"])
                                                   for r in rows]
        assert sum(r["pref_bob"] is not None for r in rows) == 2
    finally:
        server.stop()


DOC_PAIRS = [
    {"id": "cooking-12", "instruction": "How long should I boil an egg for a soft, runny yolk?",
     "response_a": "About 6 minutes. Lower the egg into water that is already boiling, keep it at a gentle boil for "
                   "6 minutes, then move it to cold water for a minute so it stops cooking. Peel and eat while warm.",
     "response_b": "Boil it for 10-12 minutes and the yolk will be soft.",
     "system_a": "model-x", "system_b": "model-y"},
    {"id": "code-7", "instruction": "Write a Python one-liner that reverses a string s.",
     "response_a": "s[::-1]", "response_b": "''.join(reversed(s))  # also works, a little slower: "
                                             "https://docs.python.org/3/library/functions.html#reversed",
     "system_a": "model-y", "system_b": "model-x"},
    {"id": "xss-1", "instruction": "Repeat exactly: <script>window.__xss = 1</script>",
     "response_a": "<img src=x onerror=\"window.__xss = 2\">", "response_b": "x" * 300,
     "system_a": "model-x", "system_b": "model-y"},
]


def test_screenshots_nothing_overflows(tmp_path: Path, browsers: list) -> None:
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in DOC_PAIRS))
    server = Server(tmp_path, ["pairs.jsonl", "--db", "labels.sqlite", "--min-seconds", "0"])
    server.start()
    shots = tmp_path / "img"
    shots.mkdir()
    try:
        drivers = [_browser() for _ in range(3)]
        browsers.extend(drivers)
        for name, d in zip(("ana", "ben", "chen"), drivers, strict=True):
            _open(d, f"{server.base}/annotate/{name}")
        for keys in (("a", "a", "b"), ("a", "t", "a")):  # two items labelled by three annotators
            for d, k in zip(drivers, keys, strict=True):
                n = int(_progress(d).split()[0])
                _press(d, k)
                _wait_progress(d, f"{n + 1} of 3")
        page = drivers[0]
        assert _key_shown(page) == "xss-1"  # the long, unbroken response and the markup items
        for width, height, mobile, name in ((1280, 800, False, "annotate_page.png"), (390, 844, True,
                                                                                        "annotate_phone.png")):
            _viewport(page, width, height, mobile)
            page.refresh()
            WebDriverWait(page, 20).until(lambda d: " of " in _progress(d))
            assert page.execute_script("return window.__xss === undefined")
            _no_overflow(page)
            if name == "annotate_page.png":  # the screenshot of the docs: an ordinary item
                _viewport(drivers[1], width, height, mobile)
                drivers[1].refresh()
                WebDriverWait(drivers[1], 20).until(lambda d: " of " in _progress(d))
                _press(drivers[1], "s")
                WebDriverWait(drivers[1], 20).until(lambda d: _key_shown(d) == "xss-1")
                _press(drivers[1], "u")
                WebDriverWait(drivers[1], 20).until(lambda d: _key_shown(d) == "code-7")
                drivers[1].execute_script("document.getElementById('notice').hidden = true")
                _no_overflow(drivers[1])
                assert drivers[1].save_screenshot(str(shots / name))
            else:
                _viewport(drivers[1], width, height, mobile)
                drivers[1].refresh()
                WebDriverWait(drivers[1], 20).until(lambda d: " of " in _progress(d))
                _no_overflow(drivers[1])
                assert drivers[1].save_screenshot(str(shots / name))
        # /agreement of a store three annotators have labelled 40 items in (some still short of 3)
        server.stop()
        (tmp_path / "agree").mkdir()
        store, truth, _ = pair_store(tmp_path / "agree", 40)
        fill(store, {"ana": 0.85, "ben": 0.8, "chen": 0.7}, truth)
        for _ in range(3):
            store.undo("chen")
        store.close()
        server = Server(tmp_path / "agree", ["pairs.jsonl", "--db", "labels.sqlite", "--admin-token", ADMIN])
        server.start()
        agree = drivers[2]
        agree.get(f"{server.base}/admin?token={ADMIN}")
        assert "Krippendorff" in agree.page_source and "ana" in agree.find_element(By.TAG_NAME, "table").text
        _no_overflow(agree)
        assert agree.save_screenshot(str(shots / "annotate_agreement.png"))
        _viewport(agree, 390, 844, True)
        agree.refresh()
        _no_overflow(agree)
        for f in shots.iterdir():
            assert f.stat().st_size > 10_000  # a real picture, not a blank page
        if os.environ.get("EVALIGN_UPDATE_SCREENSHOTS"):
            DOCS_IMG.mkdir(parents=True, exist_ok=True)
            for f in shots.iterdir():
                shutil.copyfile(f, DOCS_IMG / f.name)
    finally:
        server.stop()


def test_token_cookie_and_graded_page_with_rubric(tmp_path: Path, browsers: list) -> None:
    rows = [{"id": f"g{i}", "system": "m", "instruction": f"Explain idea {i} briefly.",
             "response": f"Idea {i} is explained here. " * 20} for i in range(3)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    server = Server(tmp_path, ["items.jsonl", "--db", "g.sqlite", "--rubric", "helpfulness", "--token", "tok-123",
                                 "--min-seconds", "0"])
    server.start()
    try:
        d = _browser()
        browsers.append(d)
        d.get(f"{server.base}/annotate/rita")
        assert "403" in d.find_element(By.TAG_NAME, "body").text  # no token: nothing but 403
        _open(d, f"{server.base}/annotate/rita?token=tok-123")  # then the cookie carries it
        assert _progress(d) == "0 of 3"
        rubric = d.find_element(By.ID, "rubric")
        assert rubric.is_displayed() and len(rubric.find_elements(By.TAG_NAME, "li")) == 5
        assert [b.get_attribute("data-key") for b in d.find_elements(By.CSS_SELECTOR, "#choices button")] == \
            ["1", "2", "3", "4", "5"]
        _press(d, "4")
        _wait_progress(d, "1 of 3")
        d.get(f"{server.base}/annotate/rita")  # the cookie: no token in the URL any more
        WebDriverWait(d, 20).until(lambda x: " of " in _progress(x))
        _press(d, "2")
        _wait_progress(d, "2 of 3")
        _viewport(d, 390, 844, True)
        d.refresh()
        WebDriverWait(d, 20).until(lambda x: " of " in _progress(x))
        _no_overflow(d)
        with sqlite3.connect(f"file:{tmp_path / 'g.sqlite'}?mode=ro", uri=True) as con:
            assert [json.loads(v) for (v,) in con.execute("SELECT label FROM labels ORDER BY id")] == [4.0, 2.0]
    finally:
        server.stop()


def test_label_task_keys_in_the_order_given(tmp_path: Path, browsers: list) -> None:
    rows = [{"id": f"x{i}", "system": "m", "instruction": f"Is answer {i} fine?", "response": f"Answer {i}."}
            for i in range(3)]
    (tmp_path / "items.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    server = Server(tmp_path, ["items.jsonl", "--db", "l.sqlite", "--labels", "ok,wrong,unsafe", "--per-item", "1",
                                 "--min-seconds", "0"])
    server.start()
    try:
        d = _browser()
        browsers.append(d)
        _open(d, f"{server.base}/annotate/lea")
        assert [(b.get_attribute("data-key"), kbd.text, b.text.removeprefix(kbd.text).strip())
                for b in d.find_elements(By.CSS_SELECTOR, "#choices button")
                for kbd in b.find_elements(By.TAG_NAME, "kbd")] == \
            [("1", "1", "ok"), ("2", "2", "wrong"), ("3", "3", "unsafe")]
        tab2 = _browser()  # the same annotator in a second tab, on the same item
        browsers.append(tab2)
        _open(tab2, f"{server.base}/annotate/lea")
        assert _key_shown(tab2) == _key_shown(d) == "x0"
        _press(d, "9")  # no ninth label: nothing happens
        _press(d, "3")
        _wait_progress(d, "1 of 3")
        _press(tab2, "2")  # the second tab's label of x0: refused, said so, not doubled
        WebDriverWait(tab2, 20).until(lambda x: "already" in x.find_element(By.ID, "notice").text)
        assert _progress(tab2) == "1 of 3" and _key_shown(tab2) == "x1"
        _press(d, "1")
        _wait_progress(d, "2 of 3")
        with sqlite3.connect(f"file:{tmp_path / 'l.sqlite'}?mode=ro", uri=True) as con:
            got = [(k, json.loads(v)) for k, v in con.execute(
                "SELECT i.key, l.label FROM labels l JOIN items i ON i.idx = l.idx ORDER BY l.id")]
        assert got == [("x0", "unsafe"), ("x1", "ok")]
    finally:
        server.stop()


def test_pair_of_conversations_each_side_with_its_earlier_turns(tmp_path: Path, browsers: list) -> None:
    def conversation(side: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": "Hi, I need a recipe."},
                {"role": "assistant", "content": f"Sure ({side}), which dish? {XSS[1]}"},
                {"role": "user", "content": "Pancakes."}, {"role": "assistant", "content": f"{side}: flour, milk, eggs."}]

    rows = [{"id": "c1", "system_a": "x", "system_b": "y", "messages_a": conversation("A"),
             "messages_b": conversation("B")}]
    (tmp_path / "conv.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    server = Server(tmp_path, ["conv.jsonl", "--db", "c.sqlite", "--min-seconds", "0"])
    server.start()
    try:
        d = _browser()
        browsers.append(d)
        _open(d, f"{server.base}/annotate/cleo")
        assert "Hi, I need a recipe." in d.find_element(By.ID, "context").text
        for side in ("left", "right"):
            letter = d.find_element(By.ID, f"response-{side}").text[0]
            assert f"Sure ({letter}), which dish?" in d.find_element(By.ID, f"context-{side}").text
        _check_nothing_ran(d)
        _viewport(d, 390, 844, True)
        d.refresh()
        WebDriverWait(d, 20).until(lambda x: " of " in _progress(x))
        _no_overflow(d)
    finally:
        server.stop()
