"""``python -m llama_cpp.server`` (llama-cpp-python's OpenAI-compatible server) as a subprocess that
evalign starts, waits for and stops: the demo's live judge and the judge tests serve a GGUF with it.

:class:`LlamaServer` picks a free port on 127.0.0.1, starts the server, waits until ``/v1/models``
answers and yields :class:`ServerInfo` (``base_url`` ending in ``/v1``, the model name to send);
its log goes to a file. :func:`require_llama_cpp` says what to install when the server is missing
(looked up without importing it: importing ``llama_cpp`` loads its shared library).
"""

from __future__ import annotations

import contextlib
import importlib.util
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import NamedTuple


def require_llama_cpp() -> None:
    """Raise RuntimeError with install instructions when llama-cpp-python[server] is missing.

    Looks the packages up without importing them (importing llama_cpp loads its shared library)."""
    missing = [m for m in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")
               if importlib.util.find_spec(m) is None]  # fmt: skip
    if not missing:
        spec = importlib.util.find_spec("llama_cpp")
        locations = list(spec.submodule_search_locations or []) if spec else []
        if not any((Path(loc) / "server" / "__main__.py").exists() for loc in locations):
            missing.append("llama_cpp.server")
    if missing:
        raise RuntimeError(
            f"llama.cpp's OpenAI-compatible server (the local judge server) needs llama-cpp-python with its "
            f"[server] extra (missing: {', '.join(missing)}). "
            "Install it with `pip install 'llama-cpp-python[server]'` (builds a CPU wheel; in a checkout "
            "scripts/build_llama_server.sh builds it once and reuses it)."
        )


def free_port() -> int:
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerInfo(NamedTuple):
    """What the ``llama_server`` fixture yields: ``base_url, model = llama_server``.

    ``base_url`` ends in ``/v1`` (give it to OpenAI-compatible clients); ``model`` is the name to send.
    """

    base_url: str
    model: str

    @property
    def root_url(self) -> str:
        """``base_url`` without ``/v1`` (for proxies)."""
        return self.base_url.removesuffix("/v1")


class LlamaServer:
    """``python -m llama_cpp.server`` as a subprocess. Use as a context manager.

    ``model_path``: the GGUF; ``chat_format``: llama-cpp-python's name of a chat format, or None for
    the chat template stored in the GGUF; ``alias``: the model name clients send; ``n_threads``:
    CPU threads; ``log_path``: the server's log (default beside the model, ``*.server.log``)."""

    def __init__(
        self,
        model_path: str | Path,
        *,
        n_ctx: int = 8192,
        chat_format: str | None = None,
        n_threads: int = 1,
        alias: str = "local",
        log_path: str | Path | None = None,
        startup_timeout: float = 120.0,
    ) -> None:
        self.model_path = Path(model_path)
        self.n_ctx = n_ctx
        self.chat_format = chat_format
        self.alias = alias
        self.n_threads = n_threads
        self.log_path = Path(log_path) if log_path else self.model_path.with_suffix(".server.log")
        self.startup_timeout = startup_timeout
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def info(self) -> ServerInfo:
        """Where the server listens and the model name to send."""
        return ServerInfo(f"http://127.0.0.1:{self.port}/v1", self.alias)

    def command(self) -> list[str]:
        """The server's command line (``chat_format`` None: the chat template stored in the GGUF)."""
        fmt = [] if self.chat_format is None else ["--chat_format", self.chat_format]
        return [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.model_path),
            "--model_alias", self.alias,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            *fmt,
            "--logits_all", "True",
            # llama-cpp-python cuts a streamed answer short when another request arrives (its default):
            # with several requests in flight, each would interrupt the one before
            "--interrupt_requests", "False",
            "--verbose", "False",
        ]  # fmt: skip

    def start(self) -> ServerInfo:
        """Start the server and wait until it answers (RuntimeError with the log's tail when it fails)."""
        require_llama_cpp()
        self.port = free_port()
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._log = log
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://127.0.0.1:{self.port}/v1/models"
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(
                    f"llama.cpp server exited with code {self.proc.returncode}; log tail:\n{self._tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return self.info
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"llama.cpp server did not answer {url} in {self.startup_timeout:g} s:\n{self._tail()}")

    def _tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 15 s) and close its log."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        with contextlib.suppress(AttributeError):
            self._log.close()

    def __enter__(self) -> ServerInfo:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
