"""Reliability round 5 (issue 39), part c: SIGTERM says one line, the bench leaves no server log,
control characters never reach the terminal, and ``--constrain auto`` falls back when the
constraint engine cannot read the model's tokenizer."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import evalign
from evalign.interrupt import TERM_EXIT_CODE, TERM_LINE

SRC = str(Path(evalign.__file__).parents[1])


class _HungServer:
    """A TCP server that accepts connections and never answers (a judge that hangs)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.connected = threading.Event()
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.connected.set()

    def close(self) -> None:
        for c in self.conns:
            c.close()
        self.sock.close()


def _sigterm_while_judging(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    server = _HungServer()
    env = {**os.environ, "PYTHONPATH": SRC, "EVALIGN_CACHE": str(tmp_path / "cache.sqlite"), "COLUMNS": "120",
           "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    url = f"http://127.0.0.1:{server.port}/v1"
    argv = [a.replace("URL", url) for a in args]
    proc = subprocess.Popen([sys.executable, "-m", "evalign", *argv], env=env, cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert server.connected.wait(120), proc.communicate(timeout=5)
        time.sleep(0.3)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        server.close()
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _pairs(tmp_path: Path) -> Path:
    p = tmp_path / "pairs.jsonl"
    p.write_text("".join(json.dumps({"id": f"p{i}", "instruction": "Say hi.", "response_a": "hi", "response_b": "hello"})
                         + "\n" for i in range(3)), encoding="utf-8")
    return p


def test_sigterm_during_probe_prints_one_line_and_exits_143(tmp_path: Path) -> None:
    pairs = _pairs(tmp_path)
    r = _sigterm_while_judging(["probe", str(pairs), "--template", "llmbar_vanilla", "--base-url", "URL",
                                "--model", "m", "--probe", "position", "-o", str(tmp_path / "card.json")], tmp_path)
    assert r.returncode == TERM_EXIT_CODE, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines[-1] == TERM_LINE and sum(TERM_LINE in ln for ln in lines) == 1, r.stderr
    assert not (tmp_path / "card.json").exists()


@pytest.mark.slow
def test_sigterm_during_bench_prints_one_line_and_exits_143(tmp_path: Path) -> None:
    r = _sigterm_while_judging(["bench", "--judge", "x=openai:m@URL", "--sets", "llmbar-natural", "--per-set", "6",
                                "--out", str(tmp_path / "out")], tmp_path)
    assert r.returncode == TERM_EXIT_CODE, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines[-1] == TERM_LINE and sum(TERM_LINE in ln for ln in lines) == 1, r.stderr


def test_sigterm_while_the_command_starts_prints_the_line(tmp_path: Path) -> None:
    """A SIGTERM outside a verb (here: while the help is written) says the line too."""
    code = ("import os, signal, sys\n"
            "import evalign.cli as c\n"
            "sys.argv = ['evalign', '--help']\n"
            "orig = c._Group.format_help\n"
            "def fmt(*a, **k):\n"
            "    os.kill(os.getpid(), signal.SIGTERM)\n"
            "    return orig(*a, **k)\n"
            "c._Group.format_help = fmt\n"
            "c.main()\n")
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == TERM_EXIT_CODE and r.stderr.strip() == TERM_LINE, r.stderr


# ---- the bench's llama.cpp server log ---------------------------------------------------------


def _stand_in_server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, fails: bool) -> None:
    """LlamaServer runs a stand-in: a static HTTP server answering ``/v1/models`` (or, with
    ``fails``, a process that writes a line and exits 3)."""
    from evalign.judges.backends.llama_server import LlamaServer

    site = tmp_path / "site"
    (site / "v1").mkdir(parents=True)
    (site / "v1" / "models").write_text('{"data": []}', encoding="utf-8")

    def command(self: LlamaServer) -> list[str]:
        if fails:
            return [sys.executable, "-c", "import sys; print('model file is broken'); sys.exit(3)"]
        return [sys.executable, "-m", "http.server", str(self.port), "--bind", "127.0.0.1", "--directory", str(site)]

    monkeypatch.setattr(LlamaServer, "command", command)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()


def test_the_bench_removes_the_server_log_after_a_clean_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from evalign.bench.judges import BenchJudge as JudgeSpec
    from evalign.bench.judges import open_backend

    _stand_in_server(monkeypatch, tmp_path, fails=False)
    with open_backend(JudgeSpec(name="smol", backend="llama", model="smollm2-135m-instruct")) as backend:
        assert backend is not None
        assert [p.name for p in (tmp_path / "tmp").iterdir()] == [f"evalign-bench-smol-{os.getpid()}.log"]
    assert list((tmp_path / "tmp").iterdir()) == []


def test_the_bench_keeps_the_log_of_a_server_that_failed_and_says_where(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    from evalign.bench.judges import BenchJudge as JudgeSpec
    from evalign.bench.judges import open_backend
    from evalign.errors import BackendError

    _stand_in_server(monkeypatch, tmp_path, fails=True)
    log = tmp_path / "tmp" / f"evalign-bench-smol-{os.getpid()}.log"
    with pytest.raises(BackendError) as info, open_backend(JudgeSpec(name="smol", backend="llama",
                                                                     model="smollm2-135m-instruct")):
        pass
    assert f"the server's log is kept: {log}" in str(info.value) and "exited with code 3" in str(info.value)
    assert log.read_text(encoding="utf-8").strip() == "model file is broken"


# ---- control characters never reach the terminal ----------------------------------------------

TITLE = "\x1b]0;pwned\x07"  # retitles the terminal
CLEAR = "\x1b[2K"  # clears the line


def _no_raw_controls(text: str) -> None:
    assert "\x1b" not in text and "\x07" not in text, repr(text)


def test_alt_test_shows_control_characters_escaped(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evalign.cli import app

    data = Path(os.environ["EVALIGN_DATA_DIR"]) / "alttest" / "mtbench"
    humans = json.loads((data / "human_annotations.json").read_text(encoding="utf-8"))
    judges = json.loads((data / "llm_annotations.json").read_text(encoding="utf-8"))
    first = next(iter(humans))
    humans[f"ann{CLEAR}x"] = humans.pop(first)
    (tmp_path / "h.json").write_text(json.dumps(humans), encoding="utf-8")
    (tmp_path / "j.json").write_text(json.dumps({f"ev{TITLE}il": judges["gpt-4o"]}), encoding="utf-8")
    r = CliRunner().invoke(app, ["alt-test", str(tmp_path / "h.json"), str(tmp_path / "j.json"), "--epsilon", "0.2"],
                           env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    _no_raw_controls(r.output)
    assert "ev\\x1b]0;pwned\\x07il" in r.output and "ann\\x1b[2Kx" in r.output


def test_leaderboard_and_errors_show_control_characters_escaped(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from evalign.cli import app

    rows = [{"id": str(i), "system_a": f"sys{TITLE}", "system_b": "plain", "verdict": "AB"[i % 2]} for i in range(6)]
    f = tmp_path / "v.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    r = CliRunner().invoke(app, ["leaderboard", str(f), "--bootstrap", "0"], env={"COLUMNS": "200"})
    assert r.exit_code == 0, r.output
    _no_raw_controls(r.output)
    assert "sys\\x1b]0;pwned\\x07" in r.output
    r = CliRunner().invoke(app, ["leaderboard", str(f), "--verdict", f"col{CLEAR}"])  # an error line
    assert r.exit_code != 0
    _no_raw_controls(r.output)
    assert "col\\x1b[2K" in r.output


def test_visible_escapes_every_control_character_and_keeps_the_rest() -> None:
    from evalign.cli.common import visible

    assert visible("a\tb\nc") == "a\tb\nc" and visible("é ✓ 日本") == "é ✓ 日本"
    assert visible("\x00\x1b\x7f\x9b\r") == "\\x00\\x1b\\x7f\\x9b\\r"
    assert visible("\u202eevil") == "\\u202eevil"
    assert visible(visible(TITLE)) == visible(TITLE)


# ---- --constrain on a tokenizer llguidance cannot read ----------------------------------------


@pytest.fixture(scope="module")
def wordpiece_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama causal LM with a WordPiece ``BertTokenizerFast`` over the metric tests'
    vocabulary (tests/metrics/tiny_models.py): llguidance cannot read its decoder."""
    pytest.importorskip("llguidance")
    import torch
    from transformers import BertTokenizerFast, LlamaConfig, LlamaForCausalLM

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "metrics"))
    from tiny_models import wordpiece_vocab

    path = tmp_path_factory.mktemp("wordpiece-lm")
    (path / "vocab.txt").write_text("\n".join(wordpiece_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])) + "\n",
                                    encoding="utf-8")
    tok = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), do_lower_case=True, eos_token="[SEP]")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_constrain_falls_back_or_refuses_when_llguidance_cannot_read_the_tokenizer(
    wordpiece_lm: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from evalign.cli import app
    from evalign.judges.backends import HFLocalBackend

    monkeypatch.setenv("EVALIGN_CACHE", str(tmp_path / "cache.sqlite"))
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "1", "system": "s", "instruction": "say hi", "response": "hi there"}) + "\n",
                     encoding="utf-8")
    calls: list[int] = []
    real = HFLocalBackend._generate_batch
    monkeypatch.setattr(HFLocalBackend, "_generate_batch", lambda self, reqs: calls.append(len(reqs)) or real(self, reqs))
    base = ["judge", str(items), "--backend", "hf", "--model", str(wordpiece_lm), "--max-tokens", "16"]
    why = "llguidance cannot read the tokenizer of 'wordpiece-lm0': can't determine decoder type"
    r = CliRunner().invoke(app, [*base, "--constrain", "on", "-o", str(tmp_path / "on.jsonl")], env={"COLUMNS": "400"})
    assert r.exit_code == 1 and calls == [], r.output
    assert f"error: cannot constrain the output: {why}" in r.output and "this is a bug" not in r.output
    assert not (tmp_path / "on.jsonl").exists()
    r = CliRunner().invoke(app, [*base, "--constrain", "auto", "-o", str(tmp_path / "auto.jsonl")],
                           env={"COLUMNS": "400"})
    assert r.exit_code == 0, r.output
    assert sum(f"note: output not constrained: {why}" in ln for ln in r.output.splitlines()) == 1
    assert calls == [1]
    rows = [json.loads(ln) for ln in (tmp_path / "auto.jsonl").read_text(encoding="utf-8").splitlines()]
    summary = json.loads((tmp_path / "auto.jsonl.summary.json").read_text(encoding="utf-8"))
    assert len(rows) == 1 and why in summary["constraint"]["note"]


# ---- `evalign --help`: a plain listing, typer's rich formatter not loaded ---------------------

LIST_MODULES = """
import json, runpy, sys
sys.argv = ["evalign", *json.loads(sys.argv[1])]
try:
    runpy.run_module("evalign", run_name="__main__", alter_sys=True)
except SystemExit as e:
    print("\\nexit", e.code)
print("\\n" + json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(("args", "code"), [(["--help"], "0"), ([], "2")], ids=["help", "no-args"])
def test_root_help_is_a_plain_listing_without_the_rich_formatter(args: list[str], code: str) -> None:
    from evalign.cli import VERBS

    r = subprocess.run([sys.executable, "-c", LIST_MODULES, json.dumps(args)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": SRC, "COLUMNS": "100"})
    lines = r.stdout.strip().splitlines()
    modules = json.loads(lines[-1])
    assert "typer.rich_utils" not in modules and "rich.markdown" not in modules
    assert f"exit {code}" in lines or (code == "0" and "exit None" in lines), r.stdout[-500:]
    text = r.stdout
    assert text.startswith("Usage: ") and "\nCommands:\n" in text and "\nOptions:\n" in text
    listed = [ln.split()[0] for ln in text.split("\nCommands:\n")[1].splitlines() if ln.startswith("  ") and
              not ln.startswith("   ")]
    assert listed == list(VERBS)
    assert "how a small local judge compares with the published ones on LLMBar)." in " ".join(text.split())


def test_a_program_that_calls_main_keeps_its_own_exit_status() -> None:
    """The last exit hook ends the process with the command's status only in the ``evalign`` command itself:
    a test runner that called ``main()`` in-process exits with its own status (it ended pytest with 1)."""
    code = ("import sys\n"
            "from evalign.cli import main\n"
            "sys.argv = ['evalign', 'meta', '/nonexistent/items.jsonl', '--human', 'h', '-m', 'x']\n"
            "try:\n"
            "    main()\n"
            "except SystemExit as e:\n"
            "    assert e.code == 1, e.code\n"
            "sys.argv = ['a-test-runner']\n")
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": SRC}, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # the command itself (argv[0] still evalign at exit) ends with the command's status
    r = subprocess.run([sys.executable, "-c", code.replace("sys.argv = ['a-test-runner']\n", "")],
                       env={**os.environ, "PYTHONPATH": SRC}, capture_output=True, text=True, timeout=60)
    assert r.returncode == 1, r.stderr
