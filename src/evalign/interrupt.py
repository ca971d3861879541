"""Ctrl-C in the ``evalign`` command: one line and exit code 130 at any moment, from the first
instruction of the entry point on (importing, parsing options, printing help, running a verb).

Python turns SIGINT into :class:`KeyboardInterrupt` wherever the program happens to be. While a verb
runs, :func:`evalign.cli.common.handle_errors` catches it (finished work is kept: caches and atomic
writers clean up as the exception unwinds) and prints :data:`LINE`. Before that (the command line is
still importing its modules, or click is parsing the options) nothing could catch it, and a Python
traceback from inside whatever library was loading came out. So the command line has two phases:

* **starting** (:func:`guard`): SIGINT's handler is :func:`exit_interrupted`, which prints
  :data:`LINE` and raises ``SystemExit(130)``: no traceback, nothing to keep yet. ``evalign/__init__.py``
  installs it as its first instruction when the process is the ``evalign`` command
  (:func:`is_command_line`: the console script, ``python -m evalign``), and the entry point
  :func:`evalign.cli.main` installs it too (for other ways in, e.g. ``python -c``);
* **running a verb** (:func:`verb_running`): Python's own handler again, so a verb (and the
  libraries it drives: asyncio, Ray, torch) sees an ordinary KeyboardInterrupt.

An inherited ``SIG_IGN`` (a background job of a non-interactive shell) is respected, as Python does:
neither phase installs anything then. Importing evalign as a library changes no signal handler.
This module uses only the standard library (it runs before anything else is loaded).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from types import FrameType

#: the one line an interrupted command prints (on stderr), at any moment
LINE = "interrupted: finished work is kept; run the same command again to resume"
#: exit code of an interrupted command (128 + SIGINT, as a shell reports it)
EXIT_CODE = 130
#: the one line a command ended by SIGTERM prints (on stderr), at any moment
TERM_LINE = "terminated: finished work is kept; run the same command again to resume"
#: exit code of a command ended by SIGTERM (128 + SIGTERM)
TERM_EXIT_CODE = 143
#: names the console script may have (pip writes ``evalign``; ``evalign.exe`` / ``evalign-script.py`` on Windows)
_SCRIPT_SUFFIXES = ("-script.pyw", "-script.py", ".exe")


def is_command_line(argv: list[str] | None = None, orig_argv: list[str] | None = None) -> bool:
    """Whether this process is the ``evalign`` command: the console script (``argv[0]`` is a file
    named ``evalign``) or ``python -m evalign[.cli]`` (while the package loads for ``-m``, Python
    sets ``argv[0]`` to ``'-m'``; the module named is in ``sys.orig_argv``)."""
    argv = sys.argv if argv is None else argv
    orig = getattr(sys, "orig_argv", []) if orig_argv is None else orig_argv
    first = argv[0] if argv else ""
    if first == "-m":
        for k, arg in enumerate(orig[1:], start=1):
            if arg.startswith("-m"):
                module = arg[2:] or (orig[k + 1] if k + 1 < len(orig) else "")
                return module == "evalign" or module.startswith("evalign.")
        return False
    name = first.replace("\\", "/").rsplit("/", 1)[-1]  # (a Windows path too)
    for suffix in _SCRIPT_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name == "evalign"


#: whether :data:`LINE` was printed (by :func:`exit_interrupted` or the verb's error handler)
_said: list[bool] = [False]


def said() -> bool:
    """Whether :data:`LINE` was printed already; marks it printed (the caller prints it now), so
    that a second Ctrl-C while the first one unwinds prints nothing more."""
    before = _said[0]
    _said[0] = True
    return before


class Terminated(SystemExit):
    """SIGTERM, raised where the program is (a :class:`SystemExit`, so that it passes every
    ``except Exception`` and temporary outputs are removed as it unwinds); the command line prints
    :data:`TERM_LINE` once it has unwound (see :func:`say_terminated`)."""

    def __init__(self) -> None:
        super().__init__(TERM_EXIT_CODE)


def raise_terminated(signum: int, frame: FrameType | None) -> None:
    """SIGTERM's handler in the command line: raise :class:`Terminated`."""
    raise Terminated()


def say_terminated() -> None:
    """Print :data:`TERM_LINE` on stderr unless a line was printed already (see :func:`said`)."""
    if not said():
        with suppress(Exception):
            sys.stderr.write(TERM_LINE + "\n")
            sys.stderr.flush()


def exit_interrupted(signum: int, frame: FrameType | None) -> None:
    """SIGINT's handler while the command starts: print :data:`LINE` once, exit 130."""
    if not said():
        with suppress(Exception):
            sys.stderr.write(LINE + "\n")
            sys.stderr.flush()
    raise SystemExit(EXIT_CODE)


def _set(handler: object, *, unless: object) -> None:
    """Install ``handler`` for SIGINT unless the current one is ``unless`` (or SIG_IGN, or this is
    not the main thread)."""
    with suppress(ValueError, TypeError):  # not the main thread / no signals here
        current = signal.getsignal(signal.SIGINT)
        if current is signal.SIG_IGN or current is unless:
            return
        signal.signal(signal.SIGINT, handler)  # type: ignore[arg-type]


def guard() -> None:
    """Enter the *starting* phase: a Ctrl-C prints :data:`LINE` and exits 130 (see the module doc);
    and, once, :func:`_last_at_exit` for the end of the process."""
    _set(exit_interrupted, unless=exit_interrupted)
    if not _exit_hook[0]:
        _exit_hook[0] = True
        atexit.register(_last_at_exit)  # registered first (at import): runs after every other callback


#: whether :func:`_last_at_exit` is registered
_exit_hook: list[bool] = [False]


def _last_at_exit() -> None:
    """The last thing the command does: Python would then put SIGINT back to the system's default
    while it tears itself down, so a Ctrl-C in that moment killed the process (status -2, no line).
    Until here a Ctrl-C is :func:`exit_interrupted` (one line, 130). Here SIGINT is ignored (SIG_IGN,
    which Python leaves in place), and when the command's status is known (:func:`exiting`) the
    process ends now with it (130 when :data:`LINE` was printed): every output is complete, every other
    exit callback has run, and nothing is left for a late Ctrl-C to land in."""
    with suppress(ValueError, TypeError, OSError):
        if signal.getsignal(signal.SIGINT) not in (exit_interrupted, said_at_exit):
            return
    if _status[0] is None or not _is_the_command():  # not the entry point: ignore a late Ctrl-C, keep the status
        with suppress(ValueError, TypeError, OSError):
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            with suppress(OSError, ValueError):
                stream.flush()
    except SystemExit:  # a Ctrl-C during the flush: exit_interrupted said the line
        pass
    with suppress(ValueError, TypeError, OSError):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # a printed line ends with 130 (Ctrl-C), unless it was SIGTERM's, whose status (143) is the command's
    status = EXIT_CODE if _said[0] and _status[0] != TERM_EXIT_CODE else _status[0]
    os._exit(TERM_EXIT_CODE if _termed[0] else status)


def _is_the_command() -> bool:
    """Whether this process is the ``evalign`` command (its script, ``python -m evalign``, or a program
    that made itself ``evalign`` in ``sys.argv``), not a program that called its ``main`` (a test runner:
    its own exit status must stand)."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and str(spec.name).startswith("evalign"):
        return True
    return bool(sys.argv) and os.path.basename(sys.argv[0]) == "evalign"


#: the command's exit status once it is known (:func:`exiting`)
_status: list[int | None] = [None]


def exiting(code: object) -> None:
    """Record the command's exit status (a ``SystemExit`` code: None, an int or a message). From here
    on, in the ``evalign`` command, a Ctrl-C only prints :data:`LINE` (:func:`said_at_exit`): raising
    there would land in Python's own teardown (the thread pools' exit hooks) and print a traceback;
    :func:`_last_at_exit` then ends the process with 130."""
    _status[0] = 0 if code is None else code if isinstance(code, int) else 1
    with suppress(ValueError, TypeError):  # not the main thread / no signals here
        if _is_the_command() and signal.getsignal(signal.SIGINT) is exit_interrupted:
            signal.signal(signal.SIGINT, said_at_exit)
        if _is_the_command() and signal.getsignal(signal.SIGTERM) is raise_terminated:
            signal.signal(signal.SIGTERM, term_said_at_exit)


#: whether :func:`term_said_at_exit` printed :data:`TERM_LINE` (the process then ends with 143)
_termed: list[bool] = [False]


def term_said_at_exit(signum: int, frame: FrameType | None) -> None:
    """SIGTERM's handler once the command's status is known: print :data:`TERM_LINE` once and end with
    143 (:func:`_last_at_exit`), raise nothing (a raise would land in Python's teardown: the thread
    pools' exit hooks, and print a traceback)."""
    if not said():
        _termed[0] = True
        with suppress(Exception):
            sys.stderr.write(TERM_LINE + "\n")
            sys.stderr.flush()


def said_at_exit(signum: int, frame: FrameType | None) -> None:
    """SIGINT's handler once the command's status is known: print :data:`LINE` once, raise nothing."""
    if not said():
        with suppress(Exception):
            sys.stderr.write(LINE + "\n")
            sys.stderr.flush()


@contextmanager
def verb_running() -> Iterator[None]:
    """The *running a verb* phase: inside, SIGINT raises KeyboardInterrupt again (Python's own
    handler) when it was :func:`exit_interrupted`; on leaving, the handler found is back."""
    before: object = None
    with suppress(ValueError, TypeError):
        before = signal.getsignal(signal.SIGINT)
    if before is not exit_interrupted:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)
