"""The documentation site builds with ``mkdocs build --strict`` (a broken link, a missing anchor, an API
reference that does not resolve or a docstring griffe cannot read fails it), and its generated pages hold
what the code declares: every verb's help, every catalogued dataset, the rooms and their picture."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    return out


@pytest.mark.slow
def test_site_builds_strict_with_every_page(site: Path) -> None:
    pages = sorted(p.relative_to(ROOT / "docs").with_suffix("") for p in (ROOT / "docs").rglob("*.md"))
    for page in pages:
        built = site / ("index.html" if page.name == "index" and page.parent == Path() else
                        page.parent / ("" if page.name == "index" else page.name) / "index.html")
        assert built.is_file(), built


@pytest.mark.slow
def test_generated_pages_hold_what_the_code_declares(site: Path) -> None:
    from evalign.cli import VERBS
    from evalign.datasets.catalogue import CATALOGUE

    cli = (site / "cli" / "index.html").read_text(encoding="utf-8")
    for verb in VERBS:
        assert f'id="evalign-{verb}"' in cli, verb
        assert f"Usage: evalign {verb} [OPTIONS]" in cli, verb
    datasets = (site / "datasets" / "index.html").read_text(encoding="utf-8")
    for name in CATALOGUE:
        assert f'id="{name}"' in datasets, name
    svg = (site / "img" / "structure.svg").read_text(encoding="utf-8")
    for room in ("cli", "judges", "meta", "errors"):
        assert f">{room}/<" in svg or f">{room}.py<" in svg, room
    assert 'src="../img/structure.svg"' in (site / "design" / "index.html").read_text(encoding="utf-8")
    api = (site / "api" / "index.html").read_text(encoding="utf-8")
    assert 'id="evalign.evaluate.oneshot.meta_evaluate"' in api


@pytest.mark.slow
def test_cli_reference_does_not_depend_on_the_terminal_or_the_home(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated help is the same whatever the terminal's width, colour support and home folder."""
    import html
    import importlib.util
    import re

    for key, value in {"COLUMNS": "43", "HOME": str(tmp_path), "FORCE_COLOR": "1", "TERM": "xterm-256color"}.items():
        monkeypatch.setenv(key, value)
    spec = importlib.util.spec_from_file_location("_docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    blocks = re.findall(r"```text\n(.*?)\n```", hooks.cli_reference(), re.S)
    built = [html.unescape(re.sub(r"<[^>]+>", "", b)).strip("\n")
             for b in re.findall(r"<pre>(.*?)</pre>", (site / "cli" / "index.html").read_text(encoding="utf-8"), re.S)]
    assert len(blocks) >= 20 and [b.strip("\n") for b in blocks] == built
    assert str(tmp_path) not in "".join(blocks)


def test_readme_is_a_short_guide_into_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 400
    links = set(__import__("re").findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]+)?\)", readme))
    assert len(links) >= 8
    for link in links:
        assert (ROOT / link).is_file(), link
