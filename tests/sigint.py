"""Ctrl-C in tests, also when the suite runs as a background job.

A non-interactive shell starts background jobs with SIGINT ignored (``SIG_IGN``); Python then
installs no handler, so ``raise_signal(SIGINT)`` and ``proc.send_signal(SIGINT)`` do nothing and a
test of Ctrl-C hangs or fails. Tests that send SIGINT reset it themselves:

* :func:`default_sigint` as ``preexec_fn`` of a child process (it starts with SIGINT at its default,
  so Python raises KeyboardInterrupt as at a terminal);
* :func:`sigint_raises` around in-process code (Python's own handler while inside).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


def default_sigint() -> None:
    """``preexec_fn`` for :class:`subprocess.Popen`: SIGINT at its default in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def sigint_raises() -> Iterator[None]:
    """Inside, SIGINT raises KeyboardInterrupt in this process (whatever was inherited)."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
