"""Issue 39, bad 1: a password in a judge's URL (or a secret-bearing option) is never printed nor
stored by the bench: not in its JSON, its profile, its page, its partial files, nor its errors; the
signature hashes the URL without its user info."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from evalign.bench import parse_judge
from evalign.cli import app

SECRET = "PlantedPassw0rd"
runner = CliRunner()


def files_holding(folder: Path, secret: str) -> list[str]:
    """Every file under ``folder`` whose bytes hold ``secret``."""
    return [str(p) for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_bench_never_shows_nor_stores_a_url_password(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    out, html = tmp_path / "out", tmp_path / "page.html"
    spec = f"x=scripted-first:m@http://user:{SECRET}@127.0.0.1:9/v1"
    res = runner.invoke(app, ["bench", "--judge", spec, "--per-set", "5", "--sets", "hhh", "--resamples", "50",
                              "--json", "--out", str(out), "--html", str(html)])
    assert res.exit_code == 0, res.output
    assert SECRET not in res.output and SECRET not in (res.stderr if res.stderr_bytes else "")
    assert files_holding(tmp_path, SECRET) == []
    profile = json.loads((out / "profile.json").read_text(encoding="utf-8"))
    assert profile["signature"]["judges"]["x"]["spec"] == "scripted-first:m@http://127.0.0.1:9/v1"


def test_signature_hashes_the_url_without_its_user_info() -> None:
    a = parse_judge(f"x=openai:m@http://user:{SECRET}@host/v1")
    b = parse_judge("x=openai:m@http://other:pw2@host/v1")
    assert a.described == b.described == "openai:m@http://host/v1"


def test_a_malformed_spec_is_echoed_without_its_secrets() -> None:
    res = runner.invoke(app, ["bench", "--judge", f"openai:m@http://user:{SECRET}@host/v1"])
    assert res.exit_code == 2 and SECRET not in res.output
    assert "got 'openai:m@http://host/v1'" in " ".join(res.output.split())
    res = runner.invoke(app, ["bench", "--judge", f"x=openai:m@http://host/v1,api_key:{SECRET}"])
    assert res.exit_code == 2 and SECRET not in res.output
    assert "option 'api_key:***' is not KEY=VALUE" in " ".join(res.output.split())
