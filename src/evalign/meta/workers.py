"""Run independent pieces of a resampling computation in worker processes, results in task order.

:func:`parallel_map` calls ``fn(task)`` for every task and returns the results in the order of the
tasks, whatever the number of workers, so a computation made of deterministic tasks (one metric's
interval, one block of resamples with its draws made by the caller) gives the same result on one
core or many. Workers are forked (``fork`` start method: the function, which may be a closure over
large arrays, is inherited, not pickled; the tasks and results are pickled); where ``fork`` is not
available, or inside a worker, the tasks run one after the other in this process. At most
``2 x workers`` tasks are in flight, so a caller can stream tasks (blocks of draws) from a generator
with bounded memory.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: the function of the running parallel_map, inherited by its forked workers
_FN: Callable[[Any], Any] | None = None
#: True in a worker process (a worker runs nested parallel maps itself, in order)
_IN_WORKER = False


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity where the system tells it), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def worker_count(workers: int | None) -> int:
    """The number of worker processes for a ``workers`` setting: None or 0 = every available core."""
    return available_cores() if not workers else max(1, int(workers))


def can_fork() -> bool:
    """Whether worker processes can be forked here (POSIX ``fork``, not inside a worker)."""
    return not _IN_WORKER and "fork" in multiprocessing.get_all_start_methods()


def _mark_worker() -> None:
    global _IN_WORKER
    _IN_WORKER = True


def _call(task: Any) -> Any:
    assert _FN is not None
    return _FN(task)


def parallel_map(fn: Callable[[T], R], tasks: Iterable[T], workers: int | None = 1) -> list[R]:
    """``[fn(t) for t in tasks]``, computed by up to ``workers`` forked processes (None or 0: every
    available core; 1: in this process). Tasks and results must pickle; ``fn`` need not."""
    n_workers = worker_count(workers)
    if n_workers <= 1 or not can_fork():
        return [fn(t) for t in tasks]
    global _FN
    previous, _FN = _FN, fn
    try:
        with ProcessPoolExecutor(max_workers=n_workers, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_mark_worker) as pool:
            out: list[R] = []
            pending: deque[Future[Any]] = deque()
            for t in tasks:
                pending.append(pool.submit(_call, t))
                if len(pending) >= 2 * n_workers:
                    out.append(pending.popleft().result())
            out.extend(f.result() for f in pending)
            return out
    finally:
        _FN = previous


__all__ = ["available_cores", "can_fork", "parallel_map", "worker_count"]
