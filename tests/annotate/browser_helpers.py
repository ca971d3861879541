"""Shared pieces of the labelling page's browser tests: ``evalign annotate`` in a subprocess, Debian's
chromium driven by selenium with Debian's chromium-driver (no browser download), and the page's probes."""

from __future__ import annotations

import json
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from annotate_helpers import free_port

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

DRIVER = "/usr/bin/chromedriver"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: whether Debian's chromium and chromium-driver are there (scripts/test.sh installs both)
HAVE_BROWSER = Path(DRIVER).is_file() and Path(CHROMIUM).is_file()
#: the page ignores the same key pressed again within 0.3 s (a bounce): the tests' presses keep apart
REPEAT_S = 0.32


class Server:
    """``evalign annotate`` in a subprocess (started, killed, restarted on the same port)."""

    def __init__(self, cwd: Path, args: list[str]) -> None:
        self.cwd, self.args, self.port = cwd, args, free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "evalign", "annotate", *self.args, "--port", str(self.port)],
                                     cwd=self.cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(300):
            try:
                httpx.get(f"{self.base}/static/annotate.css", timeout=2)
                return
            except httpx.TransportError:
                time.sleep(0.1)
        raise AssertionError("the server did not start")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)  # no clean shutdown: what a crash or a power cut leaves
        self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def browser() -> webdriver.Chrome:
    """A headless chromium at 1280 x 800."""
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,800",
                "--hide-scrollbars", "--force-device-scale-factor=1"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    viewport(driver, 1280, 800)
    return driver


def viewport(driver: webdriver.Chrome, width: int, height: int, mobile: bool = False) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})


def labels(db: Path) -> list[tuple[str, str, float, str]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT l.annotator, i.key, l.label, l.shown FROM labels l JOIN items i ON i.idx = l.idx "
                           "ORDER BY l.id").fetchall()
    return [(a, k, json.loads(v), s) for a, k, v, s in rows]


def progress(driver: webdriver.Chrome) -> str:
    return driver.find_element(By.ID, "progress-text").text


def wait_progress(driver: webdriver.Chrome, text: str) -> None:
    WebDriverWait(driver, 20).until(lambda d: progress(d) == text)


def key_shown(driver: webdriver.Chrome) -> str:
    return driver.find_element(By.ID, "task-area").get_attribute("data-key")


_last_press: dict[int, float] = {}


def press(driver: webdriver.Chrome, key: str) -> None:
    """Press ``key`` as a person would: never the same browser's keys closer than the page's bounce guard."""
    wait = _last_press.get(id(driver), 0.0) + REPEAT_S - time.monotonic()
    if wait > 0:
        time.sleep(wait)
    ActionChains(driver).send_keys(key).perform()
    _last_press[id(driver)] = time.monotonic()


def open_page(driver: webdriver.Chrome, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, 20).until(lambda d: " of " in progress(d))


def notice(driver: webdriver.Chrome) -> str:
    return driver.find_element(By.ID, "notice").text
