"""`evalign VERB --help` exits 0 with the help and no error line (typer's own Exit is not a failure)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

VERBS = ["score", "metrics", "meta", "judge", "report", "demo", "datasets", "synth", "train-judge", "verify-judge",
         "run", "cache"]


@pytest.mark.parametrize("verb", VERBS)
def test_help_exits_zero(verb: str) -> None:
    env = {**os.environ, "COLUMNS": "100"}
    res = subprocess.run([sys.executable, "-m", "evalign", verb, "--help"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Usage:" in res.stdout and "error:" not in res.stdout + res.stderr
