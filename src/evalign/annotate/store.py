"""The label store: one SQLite file (WAL journal) holding a copy of the items, the task, every label
and every skip. Each label is committed (``synchronous=FULL``) before the page moves on, so killing the
server loses at most the label being sent; one label per annotator and item (a UNIQUE constraint: a
second tab's duplicate is refused, not doubled)."""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalign.annotate.items import Item, items_hash
from evalign.errors import InputError, UsageError

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (idx INTEGER PRIMARY KEY, key TEXT UNIQUE NOT NULL, record TEXT NOT NULL,
                                  view TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS labels (id INTEGER PRIMARY KEY AUTOINCREMENT, annotator TEXT NOT NULL,
                                   idx INTEGER NOT NULL REFERENCES items(idx), label TEXT NOT NULL,
                                   shown TEXT, seconds REAL, comment TEXT, created REAL NOT NULL,
                                   UNIQUE (annotator, idx));
CREATE TABLE IF NOT EXISTS skips (annotator TEXT NOT NULL, idx INTEGER NOT NULL, seq INTEGER NOT NULL,
                                  PRIMARY KEY (annotator, idx));
CREATE TABLE IF NOT EXISTS annotators (name TEXT PRIMARY KEY, token_hash TEXT UNIQUE NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS gold_items (key TEXT PRIMARY KEY, pos INTEGER NOT NULL, view TEXT NOT NULL,
                                       answer TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS gold_labels (id INTEGER PRIMARY KEY AUTOINCREMENT, annotator TEXT NOT NULL,
                                        key TEXT NOT NULL, label TEXT NOT NULL, shown TEXT, seconds REAL,
                                        created REAL NOT NULL, UNIQUE (annotator, key));
"""

#: the tables every label store has (a store of an older version lacks the newer ones: they are added)
TABLES = {"meta", "items", "labels", "skips"}
#: columns added to ``labels`` since the first version (name, SQL type and default), added on opening
LABEL_COLUMNS = (("unsure", "INTEGER NOT NULL DEFAULT 0"), ("broken", "INTEGER NOT NULL DEFAULT 0"))


def token_hash(token: str) -> str:
    """The hash an annotator's token is stored as (SHA-256, hex): the store never holds the token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class StoreSettings:
    """What a store labels.

    Attributes:
        task: ``pairwise``, ``graded`` or ``label``.
        labels: the label set of the ``label`` task, in key order (empty otherwise).
        per_item: labels each item needs (K).
        rubric: the rubric shown with graded items (``criteria`` and five ``descriptions``), or None.
        source: the ITEMS file the store was made from (shown only).
    """

    task: str
    labels: tuple[str, ...] = ()
    per_item: int = 3
    rubric: dict[str, Any] | None = None
    source: str = ""


@dataclass(frozen=True)
class Label:
    """One stored label (``value`` in the items' own frame: +1 / -1 / 0 for a pair)."""

    annotator: str
    idx: int
    key: str
    value: float | str
    shown: str | None
    seconds: float | None
    comment: str | None
    created: float
    unsure: bool = False
    broken: bool = False


@dataclass(frozen=True)
class Flags:
    """What an annotator says about a label besides the answer.

    Attributes:
        unsure: the annotator is not sure of the label (key ``?``).
        broken: the item is broken (unreadable, empty, cut off: key ``x``).
    """

    unsure: bool = False
    broken: bool = False


@dataclass(frozen=True)
class GoldLabel:
    """One label of a gold item (``value`` None: the annotator skipped it)."""

    annotator: str
    key: str
    value: float | str | None
    answer: float | str
    seconds: float | None
    created: float


class Store:
    """An open label store (thread-safe: one connection behind a lock).

    A new file (or an empty database) becomes a store; ``must_exist``: the store must be there already
    (``status``, ``export``). Another program's SQLite database is refused with
    :class:`~evalign.errors.InputError` and left as it was (no tables or WAL journal added)."""

    def __init__(self, path: str | Path, *, must_exist: bool = False) -> None:
        self.path = Path(path)
        if must_exist and not self.path.is_file():
            raise InputError("no such label store", file=str(self.path))
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30)
            tables = {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if (tables or must_exist) and not tables >= TABLES:  # another program's database is left as it is
                self._db.close()
                raise InputError("not an evalign label store (" + ("no tables" if not tables else
                                 f"it holds other tables: {', '.join(sorted(tables)[:5])}") + ")", file=str(self.path))
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
            have = {r[1] for r in self._db.execute("PRAGMA table_info(labels)")}
            for name, sql in LABEL_COLUMNS:  # a store of an older version: its labels kept, the column added
                if name not in have:
                    self._db.execute(f"ALTER TABLE labels ADD COLUMN {name} {sql}")
        except sqlite3.OperationalError as e:
            raise InputError(f"cannot open the label store ({e})", file=str(self.path)) from None
        except sqlite3.DatabaseError as e:
            raise InputError(f"not an evalign label store ({e})", file=str(self.path)) from None
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection (the WAL is checkpointed)."""
        with self._lock:
            self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _meta(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    # -- setting up ------------------------------------------------------------------------------
    def initialise(self, items: Sequence[Item], settings: StoreSettings) -> None:
        """Fill a new store with ``items`` and ``settings``, or check that an existing one holds the same
        items and task (a restart with another ITEMS file, task or label set is refused); ``per_item``
        may change between runs."""
        digest = items_hash(list(items))
        meta = self._meta()
        if meta:
            if meta.get("items_hash") != digest:
                raise UsageError(f"{self.path} holds the labels of other items (made from {meta.get('source')}); "
                                 "give the same ITEMS file or another --db")
            old = (meta.get("task"), json.loads(meta.get("labels", "[]")))
            if old != (settings.task, list(settings.labels)):
                raise UsageError(f"{self.path} was made for --task {old[0]}" +
                                 (f" --labels {','.join(old[1])}" if old[1] else "") + "; give the same task or another --db")
            with self._write() as db:
                db.execute("UPDATE meta SET value = ? WHERE key = 'per_item'", (str(settings.per_item),))
                db.execute("INSERT OR REPLACE INTO meta VALUES ('rubric', ?)", (json.dumps(settings.rubric),))
            return
        with self._write() as db:
            db.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("task", settings.task), ("labels", json.dumps(list(settings.labels))),
                ("per_item", str(settings.per_item)), ("rubric", json.dumps(settings.rubric)),
                ("source", settings.source), ("items_hash", digest), ("seed", secrets.token_hex(8)),
                ("secret", secrets.token_hex(32)), ("created", str(time.time())),
            ])
            db.executemany("INSERT INTO items VALUES (?, ?, ?, ?)", [
                (i, it.key, json.dumps(it.record, ensure_ascii=False), json.dumps(it.view, ensure_ascii=False))
                for i, it in enumerate(items)])

    # -- reading -----------------------------------------------------------------------------------
    @property
    def settings(self) -> StoreSettings:
        """The store's task, label set, K, rubric and source."""
        meta = self._meta()
        if "task" not in meta:
            raise InputError("not an evalign label store (no task recorded)", file=str(self.path))
        return StoreSettings(task=meta["task"], labels=tuple(json.loads(meta["labels"])),
                             per_item=int(meta["per_item"]), rubric=json.loads(meta.get("rubric", "null")),
                             source=meta.get("source", ""))

    @property
    def seed(self) -> str:
        """The seed of the left/right orders."""
        return self._meta()["seed"]

    @property
    def secret(self) -> str:
        """The secret the CSRF tokens are made from (kept in the store: a restart keeps open pages working)."""
        return self._meta()["secret"]

    def n_items(self) -> int:
        """How many items the store holds."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM items").fetchone()[0])

    def item(self, idx: int) -> tuple[str, dict[str, Any]]:
        """The key and the page's view of item ``idx``."""
        with self._lock:
            key, view = self._db.execute("SELECT key, view FROM items WHERE idx = ?", (idx,)).fetchone()
        return key, json.loads(view)

    def index_of(self, key: str) -> int | None:
        """The index of the item with ``key``, or None."""
        with self._lock:
            row = self._db.execute("SELECT idx FROM items WHERE key = ?", (key,)).fetchone()
        return None if row is None else int(row[0])

    def records(self) -> list[tuple[str, dict[str, Any]]]:
        """Every item's key and record, in file order."""
        with self._lock:
            rows = self._db.execute("SELECT key, record FROM items ORDER BY idx").fetchall()
        return [(k, json.loads(r)) for k, r in rows]

    def counts(self) -> list[int]:
        """Labels per item (every annotator), by index."""
        out = [0] * self.n_items()
        with self._lock:
            for idx, c in self._db.execute("SELECT idx, COUNT(*) FROM labels GROUP BY idx"):
                out[idx] = int(c)
        return out

    def done(self, annotator: str) -> set[int]:
        """The items ``annotator`` labelled."""
        with self._lock:
            return {int(r[0]) for r in self._db.execute("SELECT idx FROM labels WHERE annotator = ?", (annotator,))}

    def skipped(self, annotator: str) -> list[int]:
        """The items ``annotator`` skipped, oldest skip first."""
        with self._lock:
            return [int(r[0]) for r in self._db.execute(
                "SELECT idx FROM skips WHERE annotator = ? ORDER BY seq", (annotator,))]

    def labels(self) -> list[Label]:
        """Every label, in the order given."""
        with self._lock:
            rows = self._db.execute(
                "SELECT l.annotator, l.idx, i.key, l.label, l.shown, l.seconds, l.comment, l.created, l.unsure, "
                "l.broken FROM labels l JOIN items i ON i.idx = l.idx ORDER BY l.id").fetchall()
        return [Label(a, int(i), k, json.loads(v), s, sec, c, t, bool(u), bool(b))
                for a, i, k, v, s, sec, c, t, u, b in rows]

    def labels_per_annotator(self) -> dict[str, int]:
        """The labels each annotator with a label gave."""
        with self._lock:
            return {str(a): int(c) for a, c in self._db.execute(
                "SELECT annotator, COUNT(*) FROM labels GROUP BY annotator")}

    def annotators(self) -> list[str]:
        """Every annotator with a label, by name."""
        with self._lock:
            return [r[0] for r in self._db.execute("SELECT DISTINCT annotator FROM labels ORDER BY annotator")]

    # -- writing -----------------------------------------------------------------------------------
    def add_label(self, annotator: str, idx: int, value: float | str, *, shown: str | None,
                  seconds: float | None, comment: str | None, flags: Flags = Flags()) -> bool:
        """Store a label (committed when this returns); False when ``annotator`` labelled ``idx`` already
        (the duplicate is not stored)."""
        try:
            with self._write() as db:
                db.execute("INSERT INTO labels (annotator, idx, label, shown, seconds, comment, created, unsure, "
                           "broken) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                           (annotator, idx, json.dumps(value), shown, seconds, comment or None, time.time(),
                            int(flags.unsure), int(flags.broken)))
                db.execute("DELETE FROM skips WHERE annotator = ? AND idx = ?", (annotator, idx))
        except sqlite3.IntegrityError:
            return False
        return True

    def undo(self, annotator: str) -> int | None:
        """Remove ``annotator``'s last label of an item (gold labels aside); the index of its item, or
        None without a label."""
        removed = self.undo_last(annotator, gold=False)
        return None if removed is None else int(removed[1])

    def undo_last(self, annotator: str, *, gold: bool = True) -> tuple[str, int | str, float | str | None] | None:
        """Remove ``annotator``'s last label, of an item or (``gold``) of a gold item, whichever came
        last: ``("item", idx, value)`` or ``("gold", key, value)``; None without a label."""
        with self._write() as db:
            row = db.execute("SELECT id, idx, label, created FROM labels WHERE annotator = ? ORDER BY id DESC "
                             "LIMIT 1", (annotator,)).fetchone()
            grow = db.execute("SELECT id, key, label, created FROM gold_labels WHERE annotator = ? ORDER BY id DESC "
                              "LIMIT 1", (annotator,)).fetchone() if gold else None
            if grow is not None and (row is None or grow[3] >= row[3]):
                db.execute("DELETE FROM gold_labels WHERE id = ?", (grow[0],))
                return "gold", str(grow[1]), json.loads(grow[2])
            if row is None:
                return None
            db.execute("DELETE FROM labels WHERE id = ?", (row[0],))
        return "item", int(row[1]), json.loads(row[2])

    # -- annotators --------------------------------------------------------------------------------
    def invite(self, name: str) -> str:
        """A new token for annotator ``name`` (stored hashed; an earlier token of the name stops
        working). ``name`` is stored as given: callers pass it case-normalised."""
        token = secrets.token_urlsafe(18)
        with self._write() as db:
            db.execute("INSERT OR REPLACE INTO annotators VALUES (?, ?, ?)", (name, token_hash(token), time.time()))
        return token

    def invited(self) -> set[str]:
        """The names of the invited annotators."""
        with self._lock:
            return {str(r[0]) for r in self._db.execute("SELECT name FROM annotators")}

    def annotator_of(self, token: str) -> str | None:
        """The invited annotator whose token ``token`` is, or None."""
        with self._lock:
            row = self._db.execute("SELECT name FROM annotators WHERE token_hash = ?", (token_hash(token),)).fetchone()
        return None if row is None else str(row[0])

    # -- gold items ------------------------------------------------------------------------------
    def set_gold(self, gold: Sequence[tuple[str, dict[str, Any], float | str]]) -> None:
        """Keep the gold items ``(key, view, answer)`` (replacing those of an earlier run; the gold labels
        given stay, by key)."""
        with self._write() as db:
            db.execute("DELETE FROM gold_items")
            db.executemany("INSERT INTO gold_items VALUES (?, ?, ?, ?)", [
                (k, i, json.dumps(v, ensure_ascii=False), json.dumps(a)) for i, (k, v, a) in enumerate(gold)])

    def gold_items(self) -> list[tuple[str, dict[str, Any], float | str]]:
        """The gold items ``(key, view, answer)``, in file order."""
        with self._lock:
            rows = self._db.execute("SELECT key, view, answer FROM gold_items ORDER BY pos").fetchall()
        return [(str(k), json.loads(v), json.loads(a)) for k, v, a in rows]

    def gold_done(self, annotator: str) -> set[str]:
        """The keys of the gold items ``annotator`` labelled (or skipped)."""
        with self._lock:
            return {str(r[0]) for r in self._db.execute("SELECT key FROM gold_labels WHERE annotator = ?",
                                                        (annotator,))}

    def add_gold_label(self, annotator: str, key: str, value: float | str | None, *, shown: str | None,
                       seconds: float | None) -> bool:
        """Store a label of gold item ``key`` (None: skipped); False for a duplicate."""
        try:
            with self._write() as db:
                db.execute("INSERT INTO gold_labels (annotator, key, label, shown, seconds, created) "
                           "VALUES (?, ?, ?, ?, ?, ?)", (annotator, key, json.dumps(value), shown, seconds, time.time()))
        except sqlite3.IntegrityError:
            return False
        return True

    def gold_labels(self) -> list[GoldLabel]:
        """Every label of a gold item that is still in the store, in the order given."""
        with self._lock:
            rows = self._db.execute(
                "SELECT l.annotator, l.key, l.label, g.answer, l.seconds, l.created FROM gold_labels l "
                "JOIN gold_items g ON g.key = l.key ORDER BY l.id").fetchall()
        return [GoldLabel(a, k, json.loads(v), json.loads(g), s, t) for a, k, v, g, s, t in rows]

    def skip(self, annotator: str, idx: int) -> None:
        """Put item ``idx`` at the end of ``annotator``'s queue."""
        with self._write() as db:
            seq = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM skips WHERE annotator = ?",
                             (annotator,)).fetchone()[0]
            db.execute("INSERT OR REPLACE INTO skips VALUES (?, ?, ?)", (annotator, idx, seq))
