"""``--batch-api`` and its options (``judge``, ``probe``, ``synth``): the calls of each wave sent through
the provider's batch API (:mod:`evalign.backends.batch`), and the run summary's ``batch`` block."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.markup import escape

from evalign.backends import Backend
from evalign.cli.common import err_console
from evalign.errors import UsageError

BATCH_API: Any = typer.Option(False, "--batch-api/--no-batch-api", help="Send the calls through the provider's "
                              "batch API (openai: half the price, results within 24 h): each wave of calls is one "
                              "submission; the batches are recorded in the cache, so the same command run again "
                              "(after Ctrl-C, a crash) re-attaches to them and submits nothing twice.")
BATCH_MAX_REQUESTS: Any = typer.Option(None, "--batch-max-requests", help="With --batch-api: most lines per provider "
                                       "batch (default: the provider's limit, openai 50,000). It splits a wave "
                                       "into batches at the provider; --batch-size is how many prompts one "
                                       "forward pass of a local (hf) model takes.")
BATCH_RETRIES: Any = typer.Option(2, "--batch-retries", help="With --batch-api: how many times a failed line is sent "
                                  "again (a line failing with the same 4xx twice is not sent again).")
BATCH_RETRY: Any = typer.Option("batch", "--batch-retry", help="With --batch-api: send failed lines again in a "
                                "later batch ('batch') or as ordinary requests ('sync').")
BATCH_POLL: Any = typer.Option(30.0, "--batch-poll", help="With --batch-api: seconds before the first status check "
                               "of a batch; each later wait is 1.5x longer, up to 10 minutes.")


def check_batch_options(o: Any) -> None:
    """The rules of the batch options of the command ``o`` (:data:`~evalign.judges.option_rules.BACKEND_RULES`);
    a ``--batch-...`` option without ``--batch-api`` is refused. Usage errors name the option."""
    from evalign.judges.option_rules import BATCH_OPTIONS, backend_option_problem

    defaults = {"batch_max_requests": None, "batch_retries": 2, "batch_retry": "batch", "batch_poll": 30.0}
    for key in BATCH_OPTIONS:
        problem = backend_option_problem(key, getattr(o, key))
        if problem:
            raise UsageError(f"--{key.replace('_', '-')} {problem}")
    given = [f"--{k.replace('_', '-')}" for k in BATCH_OPTIONS if getattr(o, k) != defaults[k]]
    if given and not o.batch_api:
        raise UsageError(f"{', '.join(given)} go{'es' if len(given) == 1 else ''} with --batch-api")


def with_batch(be: Backend, o: Any, *, quiet: bool = False) -> Backend:
    """``be`` itself, or with ``--batch-api`` the batch backend around it (its progress line and notes on
    stderr; ``quiet``: notes only)."""
    if not getattr(o, "batch_api", False):
        return be
    from evalign.backends.batch import BatchSettings
    from evalign.backends.batch_adapters import batch_backend
    from evalign.cache import default_cache_path

    settings = BatchSettings(max_requests=o.batch_max_requests, retries=o.batch_retries, retry=o.batch_retry,
                             poll=o.batch_poll, deadline=getattr(o, "deadline", None))
    shown = [0.0]

    def on_progress(line: str) -> None:
        now = time.monotonic()
        if not quiet and now - shown[0] >= 5.0:
            shown[0] = now
            err_console.print(f"[dim]{escape(line)}[/dim]", highlight=False, soft_wrap=True)

    def on_note(line: str) -> None:
        err_console.print(f"[yellow]note[/yellow]: {escape(line)}", highlight=False, soft_wrap=True)

    return batch_backend(be, settings, cache_path=default_cache_path(), on_progress=on_progress,
                         on_note=on_note)


def batch_block(be: Any) -> dict[str, Any] | None:
    """The summary's ``batch`` block (``{batches, lines, failed_lines, retried_lines, by_reason}``) of a
    batch backend, else None."""
    summary = getattr(be, "batch_summary", None)
    return summary() if callable(summary) else None
