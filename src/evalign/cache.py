"""The project's one cache: a content-addressed key/value store in SQLite.

Embeddings (float arrays) and judge outputs (JSON) are stored here, each under a *namespace*
(``"embedding"``, ``"judge"``, ...) and a *key* that hashes everything the value depends on
(model signature, settings, input text). Every ``put`` is committed at once, so an interrupted
run loses nothing that was already computed. Two runs on one cache pay each value once: a run
takes a *lease* on the keys it is about to compute (:meth:`~Cache.claim`: a row in ``leases`` with an
expiry, renewed while it works); a key whose line is in a provider batch still in flight (``batches`` /
``batch_lines``, :mod:`evalign.backends.batch_store`) counts as leased too; another run that finds a key leased waits for the value and computes it itself only when the lease expires (its owner died). Secrets (API keys) must never be part of a key
or a value: callers pass only what determines the result.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalign.errors import EvalignError
from evalign.signature import stable_hash

if TYPE_CHECKING:
    import numpy as np

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    value BLOB NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now')),
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
    namespace TEXT NOT NULL,
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    expires REAL NOT NULL,
    PRIMARY KEY (namespace, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS batches (
    no INTEGER PRIMARY KEY AUTOINCREMENT,
    provider TEXT NOT NULL,
    batch_id TEXT,
    url TEXT NOT NULL,
    model TEXT,
    key_env TEXT,
    state TEXT NOT NULL,
    collected INTEGER NOT NULL DEFAULT 0,
    lines INTEGER NOT NULL,
    done INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    polled REAL,
    detail TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE IF NOT EXISTS batch_lines (
    batch INTEGER NOT NULL,
    custom_id TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT,
    PRIMARY KEY (batch, custom_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS batch_lines_by_id ON batch_lines(custom_id, state);
"""

#: seconds a lease lives without being renewed (a crashed run's keys are free again after this)
LEASE_SECONDS = 30.0

_CHUNK = 500  # SQLite's default limit on host parameters is 999
#: whether one key's line is in a provider batch still in flight
_HELD_ONE = ("SELECT 1 FROM batch_lines l JOIN batches b ON b.no = l.batch WHERE l.custom_id=? AND l.state='pending' "
             "AND b.collected=0")


def default_cache_path() -> Path:
    """``$EVALIGN_CACHE`` if set, else ``$XDG_CACHE_HOME/evalign/cache.sqlite`` (``~/.cache`` by default)."""
    env = os.environ.get("EVALIGN_CACHE")
    if env:
        return Path(env).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return base / "evalign" / "cache.sqlite"


#: SQLite's messages for a database file it cannot read whole (cut short, a damaged log)
_DAMAGE = ("malformed", "disk i/o error")


def _is_damage(e: sqlite3.Error) -> bool:
    return any(m in str(e).lower() for m in _DAMAGE)


def damage(path: Path) -> str | None:
    """Why the cache file at ``path`` cannot hold what was stored in it, by its size and SQLite's header
    (no read of its pages): empty, shorter than the header, or shorter than the pages its header
    records (a file cut short). None for a file that looks whole, or no file."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            return None
        with path.open("rb") as fh:
            head = fh.read(100)
    except OSError:
        return None
    if size == 0:
        return "the file is empty (0 bytes; a cache file evalign made is never empty: it was cut short)"
    if size < 100 or not head.startswith(b"SQLite format 3\x00"):
        return None if size >= 100 else f"the file is cut short ({size} bytes, less than SQLite's 100-byte header)"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    if head[24:28] == head[92:96] and size < pages * page:  # (the recorded size is valid: SQLite >= 3.7)
        return f"the file is cut short ({size:,} bytes of the {pages * page:,} its header records)"
    return None


def _create(path: Path) -> None:
    """Make a new cache file whole or not at all: its schema written to a file beside it, linked into
    place only if no file is there yet (a run that opens the cache meanwhile never finds an empty
    file, so an empty cache file is always a damaged one)."""
    if path.exists():
        return
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.new")
    try:
        conn = sqlite3.connect(str(tmp))
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            conn.commit()
        finally:
            conn.close()
        with contextlib.suppress(OSError):  # there already, or no hard links here (SQLite then makes it)
            os.link(tmp, path)
    finally:
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            leftover.unlink(missing_ok=True)


def damaged_message(path: Path, why: str) -> str:
    """What a damaged cache file means for the answers stored in it, and the ways on."""
    return (f"cache {path}: {why}: the answers stored in it cannot be read, and evalign leaves the file as it is. "
            f"Run with --no-cache (nothing read from the cache), or move the file away (mv {path} {path}.broken) "
            "and run again to start a new cache (the stored answers are then asked again), or set EVALIGN_CACHE "
            "to another file")


def make_key(*parts: Any) -> str:
    """A cache key: the SHA-256 (hex, 32 chars) of the JSON of ``parts``."""
    return stable_hash(list(parts), length=32)


class Cache:
    """A SQLite key/value store. ``read=False`` ignores stored values (forces recomputation);
    ``write=False`` stores nothing. ``Cache.disabled()`` does neither."""

    def __init__(self, path: str | Path | None = None, *, read: bool = True, write: bool = True) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self.read = read
        self.write = write
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self.owner = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        if read or write:
            why = damage(self.path)
            if why is not None:
                raise EvalignError(damaged_message(self.path, why))
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                _create(self.path)
                conn = sqlite3.connect(str(self.path), timeout=60.0, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.executescript(_SCHEMA)
                conn.commit()
            except sqlite3.DatabaseError as e:
                if _is_damage(e):
                    raise EvalignError(damaged_message(self.path, " ".join(str(e).split()))) from None
                raise EvalignError(
                    f"cache {self.path}: cannot open ({' '.join(str(e).split()) or type(e).__name__}); set "
                    "EVALIGN_CACHE to a writable file or run with --no-cache"
                ) from None
            except (OSError, sqlite3.Error) as e:
                raise EvalignError(
                    f"cache {self.path}: cannot open ({' '.join(str(e).split()) or type(e).__name__}); set "
                    "EVALIGN_CACHE to a writable file or run with --no-cache"
                ) from None
            self._conn = conn

    @classmethod
    def for_command(cls, no_cache: bool = False) -> Cache:
        """The cache of a command that makes calls: the default cache, or with ``no_cache``
        (``--no-cache``) one that reads nothing and stores the new answers; when that cache cannot be
        opened (a file that is not a database, no space), ``--no-cache`` still runs, storing nothing."""
        if not no_cache:
            return cls()
        try:
            return cls(read=False, write=True)
        except EvalignError:
            return cls.disabled()

    @classmethod
    def disabled(cls) -> Cache:
        """A cache that stores and returns nothing (``--no-cache``)."""
        return cls(None, read=False, write=False)

    # -- raw bytes -------------------------------------------------------------------------
    def get(self, namespace: str, key: str) -> bytes | None:
        """The stored value, or None."""
        return self.get_many(namespace, [key]).get(key)

    def get_many(self, namespace: str, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored values of those ``keys`` that are present."""
        if not self.read or self._conn is None or not keys:
            return {}
        out: dict[str, bytes] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            try:
                for i in range(0, len(uniq), _CHUNK):
                    chunk = uniq[i : i + _CHUNK]
                    q = f"SELECT key, value FROM entries WHERE namespace=? AND key IN ({','.join('?' * len(chunk))})"
                    for k, v in self._conn.execute(q, [namespace, *chunk]):
                        out[k] = bytes(v)
            except sqlite3.DatabaseError as e:
                if not _is_damage(e):
                    raise
                raise EvalignError(damaged_message(self.path, " ".join(str(e).split()))) from None
        return out

    def put(self, namespace: str, key: str, value: bytes) -> None:
        """Store one value and commit at once."""
        self.put_many(namespace, {key: value})

    def put_many(self, namespace: str, items: Mapping[str, bytes] | Iterable[tuple[str, bytes]]) -> None:
        """Store several values in one transaction."""
        if not self.write or self._conn is None:
            return
        pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
        if not pairs:
            return
        with self._lock, self._writing():
            self._conn.executemany(
                "INSERT OR REPLACE INTO entries(namespace, key, value) VALUES (?, ?, ?)",
                [(namespace, k, sqlite3.Binary(v)) for k, v in pairs],
            )
            for i in range(0, len(pairs), _CHUNK):  # a stored value needs no lease any more
                chunk = [k for k, _ in pairs[i : i + _CHUNK]]
                self._conn.execute(f"DELETE FROM leases WHERE namespace=? AND owner=? AND key IN ({_marks(chunk)})",
                                   [namespace, self.owner, *chunk])
            self._conn.commit()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Turn a failed write (a full disk: "database or disk is full", a read-only file) into one line
        naming the cache file."""
        try:
            yield
        except sqlite3.Error as e:
            assert self._conn is not None
            with contextlib.suppress(sqlite3.Error):
                self._conn.rollback()
            if isinstance(e, sqlite3.DatabaseError) and _is_damage(e):
                raise EvalignError(damaged_message(self.path, " ".join(str(e).split()))) from None
            raise EvalignError(
                f"cache {self.path}: cannot write ({' '.join(str(e).split()) or type(e).__name__}); free some "
                "space, set EVALIGN_CACHE to another file or run with --no-cache"
            ) from None

    # -- leases: two runs on one cache compute each value once ---------------------------------
    @property
    def shared(self) -> bool:
        """Whether leases are used: only when the cache is both read and written."""
        return self._conn is not None and self.read and self.write

    def claim(self, namespace: str, keys: Sequence[str], seconds: float = LEASE_SECONDS) -> list[str]:
        """Lease those of ``keys`` that no other live run holds and that have no value yet; returns the
        keys this cache now holds (all of them when leases are not used)."""
        if not self.shared or not keys:
            return list(keys)
        assert self._conn is not None
        now = time.time()
        mine: list[str] = []
        with self._lock, self._writing():
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.execute("DELETE FROM leases WHERE expires < ?", (now,))
            for k in dict.fromkeys(keys):
                if self._conn.execute("SELECT 1 FROM entries WHERE namespace=? AND key=?", (namespace, k)).fetchone():
                    continue
                if self._conn.execute(_HELD_ONE, (k,)).fetchone():  # in a provider batch still in flight
                    continue
                cur = self._conn.execute(
                    "INSERT INTO leases(namespace, key, owner, expires) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT(namespace, key) DO UPDATE SET expires=excluded.expires WHERE owner=excluded.owner",
                    (namespace, k, self.owner, now + seconds))
                if cur.rowcount:
                    mine.append(k)
            self._conn.commit()
        return mine

    def renew(self, seconds: float = LEASE_SECONDS) -> None:
        """Extend every lease this cache holds (called while the values are being computed)."""
        if not self.shared:
            return
        assert self._conn is not None
        with self._lock, self._writing():
            self._conn.execute("UPDATE leases SET expires=? WHERE owner=?", (time.time() + seconds, self.owner))
            self._conn.commit()

    def release(self, namespace: str | None = None) -> None:
        """Give back the leases this cache holds (of one namespace, or all): failed calls, end of a run."""
        if not self.shared:
            return
        assert self._conn is not None
        with self._lock, self._writing():
            if namespace is None:
                self._conn.execute("DELETE FROM leases WHERE owner=?", (self.owner,))
            else:
                self._conn.execute("DELETE FROM leases WHERE owner=? AND namespace=?", (self.owner, namespace))
            self._conn.commit()

    def leased_elsewhere(self, namespace: str, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` leased by another live run (a key in a provider batch that a live run is
        polling counts: its answer is coming)."""
        if not self.shared or not keys:
            return set()
        assert self._conn is not None
        out: set[str] = set()
        uniq = list(dict.fromkeys(keys))
        now = time.time()
        with self._lock:
            for i in range(0, len(uniq), _CHUNK):
                chunk = uniq[i : i + _CHUNK]
                q = (f"SELECT key FROM leases WHERE namespace=? AND owner<>? AND expires>=? "
                     f"AND key IN ({_marks(chunk)})")
                out.update(k for (k,) in self._conn.execute(q, [namespace, self.owner, now, *chunk]))
                q = (f"SELECT l.custom_id FROM batch_lines l JOIN batches b ON b.no = l.batch WHERE l.state='pending' "
                     f"AND b.collected=0 AND b.polled >= ? AND l.custom_id IN ({_marks(chunk)})")
                out.update(k for (k,) in self._conn.execute(q, [now - 2 * LEASE_SECONDS, *chunk]))
        return out

    def batch_held(self, keys: Sequence[str]) -> set[str]:
        """Those of ``keys`` whose line is in a provider batch still in flight (submitted, its results
        not yet collected): no run sends them again meanwhile (``--batch-api`` re-attaches to them)."""
        if self._conn is None or not keys:
            return set()
        out: set[str] = set()
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(uniq), _CHUNK):
                chunk = uniq[i : i + _CHUNK]
                q = (f"SELECT l.custom_id FROM batch_lines l JOIN batches b ON b.no = l.batch WHERE l.state='pending' "
                     f"AND b.collected=0 AND l.custom_id IN ({_marks(chunk)})")
                out.update(k for (k,) in self._conn.execute(q, chunk))
        return out

    def count(self, namespace: str | None = None) -> int:
        """Number of stored entries (in one namespace, or in all)."""
        if self._conn is None:
            return 0
        with self._lock:
            if namespace is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0])
            return int(
                self._conn.execute("SELECT COUNT(*) FROM entries WHERE namespace=?", (namespace,)).fetchone()[0]
            )

    def clear(self, namespace: str | None = None) -> None:
        """Delete stored entries (of one namespace, or all)."""
        if self._conn is None:
            return
        with self._lock:
            if namespace is None:
                self._conn.execute("DELETE FROM entries")
            else:
                self._conn.execute("DELETE FROM entries WHERE namespace=?", (namespace,))
            self._conn.commit()

    def close(self) -> None:
        """Close the database connection."""
        if self._conn is not None:
            with self._lock:
                self._conn.close()
            self._conn = None

    def __enter__(self) -> Cache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- typed helpers ---------------------------------------------------------------------
    def get_json(self, namespace: str, key: str) -> Any | None:
        """A stored JSON value, or None."""
        raw = self.get(namespace, key)
        return None if raw is None else json.loads(raw.decode("utf-8"))

    def put_json(self, namespace: str, key: str, value: Any) -> None:
        """Store a JSON-serialisable value."""
        self.put(namespace, key, json.dumps(value, ensure_ascii=False).encode("utf-8"))

    def get_arrays(self, namespace: str, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Stored float arrays (as saved by :meth:`put_arrays`) for the keys present."""
        return {k: _decode_array(v) for k, v in self.get_many(namespace, keys).items()}

    def put_arrays(self, namespace: str, items: Mapping[str, np.ndarray]) -> None:
        """Store 1-D or n-D numpy arrays (dtype and shape kept)."""
        import numpy as np  # numpy is loaded where arrays are cached, not at every command's start

        self.put_many(namespace, {k: _encode_array(np.asarray(v)) for k, v in items.items()})


def _marks(items: Sequence[Any]) -> str:
    return ",".join("?" * len(items))


def _encode_array(a: np.ndarray) -> bytes:
    import numpy as np

    header = json.dumps({"dtype": a.dtype.str, "shape": list(a.shape)}).encode("ascii")
    return len(header).to_bytes(4, "little") + header + np.ascontiguousarray(a).tobytes()


def _decode_array(raw: bytes) -> np.ndarray:
    import numpy as np

    n = int.from_bytes(raw[:4], "little")
    header = json.loads(raw[4 : 4 + n].decode("ascii"))
    return np.frombuffer(raw[4 + n :], dtype=np.dtype(header["dtype"])).reshape(header["shape"]).copy()


# -- inspecting and clearing (``evalign cache info|clear``) ------------------------------------


def cache_stats(path: str | Path | None = None) -> dict[str, Any]:
    """What the cache at ``path`` (default: :func:`default_cache_path`) holds, without creating it:
    ``{"path", "exists", "size_bytes" (database file plus its WAL/SHM files), "entries" (total),
    "by_namespace": {namespace: {"entries", "value_bytes"}}}``."""
    p = Path(path) if path is not None else default_cache_path()
    files = [p, p.with_name(p.name + "-wal"), p.with_name(p.name + "-shm")]
    out: dict[str, Any] = {
        "path": str(p),
        "exists": p.is_file(),
        "size_bytes": sum(f.stat().st_size for f in files if f.is_file()),
        "entries": 0,
        "by_namespace": {},
    }
    if not p.is_file():
        return out
    try:
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=60.0)
    except sqlite3.Error as e:
        raise EvalignError(f"cache {p}: cannot read ({' '.join(str(e).split())})") from None
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows = [] if "entries" not in tables else conn.execute(
            "SELECT namespace, COUNT(*), COALESCE(SUM(LENGTH(value)), 0) FROM entries GROUP BY namespace ORDER BY namespace"
        ).fetchall()
    except sqlite3.Error as e:  # unreadable, corrupt, or not an SQLite file at all
        raise EvalignError(
            f"cache {p}: not a readable evalign cache ({' '.join(str(e).split())}); move it away or "
            "set EVALIGN_CACHE to another file"
        ) from None
    finally:
        conn.close()
    out["by_namespace"] = {ns: {"entries": int(n), "value_bytes": int(b)} for ns, n, b in rows}
    out["entries"] = sum(int(n) for _, n, _ in rows)
    return out


def clear_cache(namespace: str | None = None, path: str | Path | None = None) -> int:
    """Delete the entries of one ``namespace`` (or all) from the cache at ``path`` (default:
    :func:`default_cache_path`) and give the space back to the file system (VACUUM). Returns the
    number of entries deleted (0 when there is no cache)."""
    p = Path(path) if path is not None else default_cache_path()
    if not p.is_file():
        return 0
    with Cache(p) as cache:
        n = cache.count(namespace)
        cache.clear(namespace)
        assert cache._conn is not None
        with cache._lock:
            cache._conn.execute("VACUUM")
            cache._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return n
