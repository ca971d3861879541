"""A command line that starts at once (issue 32): which modules ``import evalign.cli``, ``evalign
--help`` and each verb's ``--help`` load. The test names modules, not times (the times are measured
by ``benchmarks/startup.py``).

The rule it enforces (see the docstring of :mod:`evalign.cli`): ``evalign --help`` lists the verbs
from the :data:`~evalign.cli.VERBS` table and imports no verb module; ``evalign VERB --help`` imports
that verb's module only, and no verb module loads a statistics or model stack (scipy, matplotlib,
torch, ...) at import; the verbs in :data:`LIGHT_VERBS` (``score`` first) load no numpy or pandas
either. A new verb is checked as soon as it is in ``VERBS``, and a verb module missing from
``VERBS`` fails :func:`test_verbs_table_matches_the_commands`.
"""

from __future__ import annotations

import inspect
import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import evalign.cli
from evalign.cli import VERBS, load_commands

#: the statistics and model stacks: no ``--help`` may import them (each costs 0.3-3 s)
STACKS = ("scipy", "matplotlib", "torch", "transformers", "sentence_transformers", "ray", "sklearn", "statsmodels",
          "datasets", "peft", "trl", "bert_score")
#: ... and the table libraries: ``import evalign.cli``, ``evalign --help`` and the light verbs load none
HEAVY = (*STACKS, "numpy", "pandas", "pyarrow", "rouge_score", "nltk", "sacrebleu", "httpx", "jinja2")
#: verbs whose ``--help`` loads nothing of :data:`HEAVY` (``score --help`` is in the issue)
LIGHT_VERBS = ("score", "metrics", "meta", "run", "cache")

#: runs the command line in this interpreter and prints every module loaded (last line of stdout)
PROBE = """
import json, runpy, sys
sys.argv = ["evalign", *json.loads(sys.argv[1])]
try:
    runpy.run_module("evalign", run_name="__main__", alter_sys=True)
except SystemExit as e:
    assert e.code in (0, None), e.code
print("\\n" + json.dumps(sorted(sys.modules)))
"""


def loaded_by(args: list[str]) -> list[str]:
    """The modules loaded by ``evalign ARGS`` (in a fresh interpreter)."""
    env = {**os.environ, "COLUMNS": "100"}
    res = subprocess.run([sys.executable, "-c", PROBE, json.dumps(args)], capture_output=True, text=True, env=env,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return list(json.loads(res.stdout.strip().splitlines()[-1]))


def heavy_in(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({m.split(".")[0] for m in modules} & set(names))


def test_import_evalign_cli_loads_no_heavy_library() -> None:
    res = subprocess.run([sys.executable, "-c", "import sys, json, evalign.cli; print(json.dumps(sorted(sys.modules)))"],
                         capture_output=True, text=True, timeout=300, check=True)
    modules = json.loads(res.stdout)
    assert heavy_in(modules, HEAVY) == []
    assert [m for m in modules if m.startswith("evalign.cli.")] == ["evalign.cli.cache", "evalign.cli.common"]


@pytest.mark.parametrize("args", [["--help"], ["--version"]], ids=["help", "version"])
def test_root_help_and_version_import_no_verb(args: list[str]) -> None:
    modules = loaded_by(args)
    assert heavy_in(modules, HEAVY) == []
    assert not [m for m in modules if m.startswith("evalign.cli.") and m not in ("evalign.cli.cache",
                                                                                "evalign.cli.common")]


@pytest.mark.parametrize("verb", list(VERBS))
def test_verb_help_loads_no_heavy_stack(verb: str) -> None:
    modules = loaded_by([verb, "--help"])
    assert heavy_in(modules, HEAVY if verb in LIGHT_VERBS else STACKS) == [], verb
    assert VERBS[verb][0] in modules


def test_verbs_table_matches_the_commands() -> None:
    """Every module of evalign.cli with a ``register`` adds exactly the commands VERBS names for it,
    and VERBS shows each command's own first help paragraph."""
    registered: dict[str, str] = {}
    for info in pkgutil.iter_modules(evalign.cli.__path__):
        module = f"evalign.cli.{info.name}"
        source = Path(evalign.cli.__path__[0]) / f"{info.name}.py"
        if "\ndef register(" not in source.read_text(encoding="utf-8"):
            continue
        for name, command in load_commands(module).items():
            registered.setdefault(name, module)
            first = inspect.cleandoc(command.help or "").split("\n\n")[0]
            assert name in VERBS, f"`{name}` ({module}) is not in evalign.cli.VERBS: add it there"
            assert VERBS[name][1] == first, f"VERBS['{name}'] help differs from the command's: {first!r}"
    assert {n: VERBS[n][0] for n in VERBS} == registered
