"""The records of provider batches (``--batch-api``), kept in the cache's SQLite file so that a run that
dies (Ctrl-C, ``kill -9``, a reboot) re-attaches to its batches instead of paying for them twice.

A batch's record (table ``batches``) holds the provider, its batch id, the API root it was sent to
(without user info), the model, the NAME of the environment variable of its key (never the key), the
provider's state, whether its results were collected, line counts and the provider's file ids
(``detail``); its lines (table ``batch_lines``) hold each ``custom_id`` (the call's cache key) and its
state: ``pending`` (submitted, no result read yet), ``done`` (answered, written into the cache) or
``failed`` (with the reason). A record is written *before* the batch is created at the provider (state
``submitting``, with a submission id the provider keeps in the batch's metadata), so a crash between
the two finds the batch again; every line of a record not collected counts as leased in the cache
(:meth:`evalign.cache.Cache.batch_held`): no run sends it synchronously meanwhile.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalign.cache import Cache, default_cache_path
from evalign.errors import EvalignError

_CHUNK = 500


@dataclass(frozen=True)
class BatchRecord:
    """One stored batch: ``no`` (local number), ``provider``, ``batch_id`` (None while submitting),
    ``url`` (API root, no user info), ``model``, ``key_env`` (the key's variable NAME), ``state`` (the
    provider's, or ``submitting``), ``collected``, ``lines`` / ``done`` / ``failed`` counts, ``created``
    / ``updated`` / ``polled`` (Unix seconds) and ``detail`` (file ids, submission id)."""

    no: int
    provider: str
    batch_id: str | None
    url: str
    model: str | None
    key_env: str | None
    state: str
    collected: bool
    lines: int
    done: int
    failed: int
    created: float
    updated: float
    polled: float | None
    detail: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly (``evalign cache batches --json``)."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


_COLUMNS = "no, provider, batch_id, url, model, key_env, state, collected, lines, done, failed, created, updated, polled, detail"


def _record(row: Sequence[Any]) -> BatchRecord:
    vals = list(row)
    vals[7] = bool(vals[7])
    vals[14] = json.loads(vals[14] or "{}")
    return BatchRecord(*vals)


class BatchStore:
    """The batch records of the cache at ``path`` (default: the project cache)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        Cache(self.path).close()  # creates the file and its tables
        try:
            self._conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False)
        except sqlite3.Error as e:
            raise EvalignError(f"cache {self.path}: cannot open ({e})") from None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def _write(self, sql: str, args: Sequence[Any] = ()) -> int:
        with self._lock:
            try:
                cur = self._conn.execute(sql, args)
                self._conn.commit()
            except sqlite3.Error as e:
                self._conn.rollback()
                raise EvalignError(f"cache {self.path}: cannot write a batch record ({e})") from None
            return int(cur.lastrowid or 0)

    # -- writing ---------------------------------------------------------------------------
    def begin(self, provider: str, url: str, model: str | None, key_env: str | None, custom_ids: Sequence[str],
              detail: Mapping[str, Any]) -> int:
        """Record a batch about to be created (state ``submitting``) with its lines, in one
        transaction; returns its local number."""
        now = time.time()
        with self._lock:
            try:
                cur = self._conn.execute(
                    "INSERT INTO batches(provider, url, model, key_env, state, lines, created, updated, detail) "
                    "VALUES (?, ?, ?, ?, 'submitting', ?, ?, ?, ?)",
                    (provider, url, model, key_env, len(custom_ids), now, now, json.dumps(dict(detail))))
                no = int(cur.lastrowid or 0)
                self._conn.executemany("INSERT OR REPLACE INTO batch_lines(batch, custom_id, state) VALUES (?, ?, 'pending')",
                                       [(no, k) for k in custom_ids])
                self._conn.commit()
            except sqlite3.Error as e:
                self._conn.rollback()
                raise EvalignError(f"cache {self.path}: cannot write a batch record ({e})") from None
        return no

    def update(self, no: int, *, batch_id: str | None = None, state: str | None = None,
               detail: Mapping[str, Any] | None = None, polled: bool = False) -> None:
        """Set a record's provider id, state, detail (merged) and/or poll time."""
        rec = self.get(no)
        if rec is None:
            return
        new_detail = {**rec.detail, **(detail or {})}
        self._write("UPDATE batches SET batch_id=?, state=?, detail=?, updated=?, polled=? WHERE no=?",
                    (batch_id or rec.batch_id, state or rec.state, json.dumps(new_detail), time.time(),
                     time.time() if polled else rec.polled, no))

    def stop_polling(self, nos: Sequence[int]) -> None:
        """Say that no run polls these records any more (a run without ``--batch-api`` then stops at
        their lines at once instead of waiting for their answers)."""
        for no in nos:
            self._write("UPDATE batches SET polled=NULL WHERE no=?", (no,))

    def finish(self, no: int, states: Mapping[str, tuple[str, str | None]]) -> None:
        """Mark a record collected, with each line's final ``(state, reason)`` (lines not named:
        ``failed`` / ``missing``)."""
        with self._lock:
            try:
                self._conn.executemany("UPDATE batch_lines SET state=?, reason=? WHERE batch=? AND custom_id=?",
                                       [(s, r, no, k) for k, (s, r) in states.items()])
                self._conn.execute("UPDATE batch_lines SET state='failed', reason='missing' WHERE batch=? AND "
                                   "state='pending'", (no,))
                done, failed = self._conn.execute(
                    "SELECT SUM(state='done'), SUM(state='failed') FROM batch_lines WHERE batch=?", (no,)).fetchone()
                self._conn.execute("UPDATE batches SET collected=1, done=?, failed=?, updated=? WHERE no=?",
                                   (int(done or 0), int(failed or 0), time.time(), no))
                self._conn.commit()
            except sqlite3.Error as e:
                self._conn.rollback()
                raise EvalignError(f"cache {self.path}: cannot write a batch record ({e})") from None

    def forget(self, no: int) -> None:
        """Delete a record and its lines (a submission the provider never created)."""
        with self._lock:
            self._conn.execute("DELETE FROM batch_lines WHERE batch=?", (no,))
            self._conn.execute("DELETE FROM batches WHERE no=?", (no,))
            self._conn.commit()

    def clear(self, *, in_flight: bool = False) -> int:
        """Delete the collected records (and, with ``in_flight``, those still at the provider too);
        returns how many were deleted."""
        where = "" if in_flight else " WHERE collected=1"
        with self._lock:
            nos = [n for (n,) in self._conn.execute(f"SELECT no FROM batches{where}")]
            for i in range(0, len(nos), _CHUNK):
                chunk = nos[i : i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                self._conn.execute(f"DELETE FROM batch_lines WHERE batch IN ({marks})", chunk)
                self._conn.execute(f"DELETE FROM batches WHERE no IN ({marks})", chunk)
            self._conn.commit()
        return len(nos)

    # -- reading ---------------------------------------------------------------------------
    def get(self, no: int) -> BatchRecord | None:
        """One record, or None."""
        with self._lock:
            row = self._conn.execute(f"SELECT {_COLUMNS} FROM batches WHERE no=?", (no,)).fetchone()
        return None if row is None else _record(row)

    def records(self, *, in_flight_only: bool = False) -> list[BatchRecord]:
        """Every record, oldest first (only those not collected with ``in_flight_only``)."""
        where = " WHERE collected=0" if in_flight_only else ""
        with self._lock:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM batches{where} ORDER BY no").fetchall()
        return [_record(r) for r in rows]

    def custom_ids(self, no: int) -> set[str]:
        """The custom ids of one record's lines."""
        with self._lock:
            return {k for (k,) in self._conn.execute("SELECT custom_id FROM batch_lines WHERE batch=?", (no,))}

    def attached(self, provider: str, url: str, keys: Iterable[str]) -> dict[int, list[str]]:
        """Those of ``keys`` whose line is pending in a record of ``provider`` at ``url`` that is not
        collected, by record number (what a rerun re-attaches to)."""
        uniq = list(dict.fromkeys(keys))
        out: dict[int, list[str]] = {}
        with self._lock:
            for i in range(0, len(uniq), _CHUNK):
                chunk = uniq[i : i + _CHUNK]
                q = (f"SELECT l.batch, l.custom_id FROM batch_lines l JOIN batches b ON b.no = l.batch WHERE "
                     f"b.collected=0 AND l.state='pending' AND b.provider=? AND b.url=? AND "
                     f"l.custom_id IN ({','.join('?' * len(chunk))})")
                for no, k in self._conn.execute(q, [provider, url, *chunk]):
                    out.setdefault(int(no), []).append(k)
        return out


__all__ = ["BatchRecord", "BatchStore"]
