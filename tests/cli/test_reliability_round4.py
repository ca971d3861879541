"""Reliability, round 4 (issue 32): the new surfaces, Ctrl-C at any moment, and a command line that
starts at once. One test (or a few) per case of the issue, in its order; the cases whose own tests
live elsewhere say where."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import evalign
from evalign.cli import VERBS, app
from evalign.interrupt import LINE, is_command_line
from sigint import default_sigint

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]


def one_error(text: str) -> str:
    """The one ``error:`` line of an output (asserted: exactly one, no traceback), whitespace folded."""
    flat = " ".join(text.split())
    assert flat.count("error:") == 1 and "Traceback" not in text and "this is a bug" not in flat, text
    return flat


# ------------------------------------------------------------------------------------------------
# bad 2: Ctrl-C while a command is still starting (importing) gives the one line and exit 130


def console_script(folder: Path) -> Path:
    """The ``evalign`` console script as pip generates it from pyproject's entry point (the installed
    one may point at another checkout): a file named ``evalign`` that imports the entry point."""
    entry = re.search(r'^evalign = "([\w.]+):(\w+)"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    assert entry is not None, "no evalign entry point in pyproject.toml"
    module, func = entry.groups()
    path = folder / "evalign"
    path.write_text(
        f"#!{sys.executable}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\nfrom {module} import {func}\n"
        "if __name__ == '__main__':\n"
        "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
        f"    sys.exit({func}())\n", encoding="utf-8")
    return path


def interrupt_after(cmd: list[str], module: str, cwd: Path) -> tuple[int, list[str], list[str]]:
    """Run ``cmd`` (a Python command line; ``-X importtime`` is added) and send SIGINT as soon as it
    has finished importing ``module``: returns the exit code, the stderr lines that are not import
    times, and the modules it finished importing."""
    env = {**os.environ, "EVALIGN_CACHE": str(cwd / "cache.sqlite"), "COLUMNS": "100"}
    proc = subprocess.Popen([sys.executable, "-X", "importtime", *cmd], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint)
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("import time:"):
                seen.append(line.rsplit("|", 1)[1].strip())
                if seen[-1] == module:
                    proc.send_signal(signal.SIGINT)
                    break
        _, rest = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert module in seen, f"the command ended before importing {module}"
    lines = rest.splitlines()
    seen += [ln.rsplit("|", 1)[1].strip() for ln in lines if ln.startswith("import time:")]
    return proc.returncode, [ln for ln in lines if not ln.startswith("import time:")], seen


COMMANDS = {  # the three commands: (entry, verb arguments, the file it would write)
    "score -o": ("script", ["score", "--dataset", "self_instruct", "-m", "rouge_l", "-o", "scored.jsonl"],
                 "scored.jsonl"),
    "meta --json": ("-m", ["meta", "--dataset", "self_instruct", "-m", "rouge_l", "--json"], None),
    "datasets export": ("script", ["datasets", "export", "pandalm", "-o", "pairs.jsonl"], "pairs.jsonl"),
}
#: moments: evalign's own package is loaded (evalign.cli is importing: typer, rich), the command
#: line module is loaded (click parses; the verb's module imports), pandas is loaded (the verb runs)
MOMENTS = ["evalign", "evalign.cli", "pandas"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(COMMANDS))
def test_ctrl_c_at_any_moment_prints_one_line_and_exits_130(tmp_path: Path, name: str) -> None:
    entry, args, written = COMMANDS[name]
    prefix = [str(console_script(tmp_path))] if entry == "script" else ["-m", "evalign"]
    cut_short = []
    for moment in MOMENTS:
        rc, lines, imported = interrupt_after([*prefix, *args], moment, tmp_path)
        assert rc == 130, (name, moment, rc, lines)
        assert lines == [LINE], (name, moment, lines)
        assert written is None or not (tmp_path / written).exists(), (name, moment)
        cut_short.append(VERBS[args[0]][0] not in imported)  # (a failed import is listed too)
    assert cut_short[0], f"{name}: the first interrupt did not land before the verb's module was imported"


@pytest.mark.parametrize(("argv", "orig", "expected"), [
    (["/usr/local/bin/evalign", "score"], ["/usr/bin/python3", "/usr/local/bin/evalign", "score"], True),
    (["C:\\Scripts\\evalign-script.py"], [], True),
    (["evalign.exe"], [], True),
    (["-m", "score"], ["python3", "-m", "evalign", "score"], True),
    (["-m"], ["python3", "-X", "importtime", "-mevalign.cli"], True),
    (["-m"], ["python3", "-m", "pytest"], False),
    (["/home/me/train.py"], ["python3", "/home/me/train.py"], False),
    (["-c"], ["python3", "-c", "import evalign"], False),
    ([], [], False),
])
def test_only_the_command_line_changes_the_sigint_handler(argv: list[str], orig: list[str], expected: bool) -> None:
    assert is_command_line(argv, orig) is expected


def test_importing_evalign_as_a_library_keeps_python_s_handler() -> None:
    code = "import signal, evalign, evalign.cli; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         preexec_fn=default_sigint)
    assert res.stdout.strip() == "True", res.stderr


# ------------------------------------------------------------------------------------------------
# --version


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, str(console_script(tmp_path)), "--version"], capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout == f"evalign {evalign.__version__}\n", res.stderr
    assert re.fullmatch(r"\d+\.\d+\.\d+", evalign.__version__)
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # one source: pyproject reads evalign's
    assert re.search(r'^dynamic = \["version"\]', project, re.M) and not re.search(r'^version = "', project, re.M)
    assert 'version = { attr = "evalign.__version__" }' in project
    assert runner.invoke(app, ["--version"]).output == f"evalign {evalign.__version__}\n"


# ------------------------------------------------------------------------------------------------
# the suite itself: Ctrl-C tests pass when the suite runs as a background job (SIGINT ignored)


def test_ctrl_c_tests_pass_with_sigint_ignored() -> None:
    """``tests/test_io.py``'s Ctrl-C test run the way a background job runs it (SIGINT inherited as
    SIG_IGN); ``tests/judges/test_resume.py`` resets it for its child the same way (preexec_fn)."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_io.py::test_atomic_write_survives_ctrl_c"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, preexec_fn=ignore_sigint)
    assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout[-2000:]
    assert "preexec_fn=default_sigint" in (ROOT / "tests" / "judges" / "test_resume.py").read_text(encoding="utf-8")
