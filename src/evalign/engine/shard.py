"""One shard: read and validate, score, write; and the run's end: system scores from all shards.

Layout of an output folder::

    manifest.json          what the run reads and scores (a re-run must match it)
    part-00000.parquet     the scored rows of shard 0 (input columns + metric columns)
    part-00000.keys.npz    a 64-bit hash of each row's (id, system) and its line (duplicate check)
    part-00000.json        the shard's record, written last: rows, skipped rows, seconds, corpus
                           statistics per system; a shard with a record is finished
    summary.json           what ``evalign score --json`` prints (written at the end)

In the Parquet shards ``reference`` is always a list of strings (a single reference is a list of
one), so every shard has the same schema.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.engine.plan import ShardSpec, plan_shards, read_shard_records
from evalign.engine.settings import EngineSettings
from evalign.errors import EvalignError, InputError
from evalign.io import records_to_table, references_of, write_json_atomic, write_table
from evalign.metrics.base import Metric, get_metric, metric_class
from evalign.scoring import MetricRun, score

#: hidden column carrying each record's line through validation (dropped before writing)
_LINE = "__evalign_line__"
MANIFEST_VERSION = 2  # 2: the input fingerprint is a SHA-256 of the bytes (1: size and mtime)
_CHUNK = 1 << 20


def part_name(index: int) -> str:
    """The file stem of shard ``index``: ``part-00000``."""
    return f"part-{index:05d}"


def is_model_metric(metric: Metric | type[Metric]) -> bool:
    """Whether ``metric`` (an instance or class) runs a model (scored in an actor, one model per
    actor) rather than string overlap (scored in a task)."""
    cls = metric if isinstance(metric, type) else type(metric)
    return cls.__module__ != "evalign.metrics.lexical"


def build_metrics(settings: EngineSettings, *, models: bool = True) -> list[Metric]:
    """The run's metric instances, in order (without the model metrics when not ``models``)."""
    return [get_metric(name, **opts) for name, opts in settings.metrics
            if models or not is_model_metric(metric_class(name))]


def prepare(settings: EngineSettings) -> list[ShardSpec]:
    """Plan the shards and write (or check) ``manifest.json``: an output folder that holds
    shards of a different run (other input, metrics, options or shard size) is an error."""
    shards = plan_shards(settings.source, settings.shard_rows)
    manifest = {
        "version": MANIFEST_VERSION,
        "source": str(Path(settings.source).resolve()),
        "input": _fingerprint(settings.source),
        "metrics": [[n, o] for n, o in settings.metrics],
        "fields": settings.fields,
        "default_system": settings.default_system,
        "skip_invalid": settings.skip_invalid,
        "shard_rows": settings.shard_rows,
        "shards": len(shards),
    }
    out = Path(settings.out_dir)
    path = out / "manifest.json"
    if path.exists():
        old = _read_json(path)
        diff = [k for k in manifest if old.get(k) != json.loads(json.dumps(manifest[k]))]
        if diff:
            raise EvalignError(f"--out-dir {settings.out_dir}: holds shards of a different run ({', '.join(diff)} "
                               "differ); give another --out-dir or remove that folder")
    else:
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(path, manifest)
    return shards


def _fingerprint(source: str) -> list[list[Any]]:
    """Per input file: its name, size and the SHA-256 of its bytes (streamed), so an input that
    changed but kept its size and mtime (``cp -p``, ``rsync -a``, ``tar x``) is a different run."""
    p = Path(source)
    files = sorted(x for x in p.iterdir() if x.is_file()) if p.is_dir() else [p]
    return [[x.name, x.stat().st_size, file_sha256(x)] for x in files]


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


@contextmanager
def shard_file(path: Path) -> Iterator[Path]:
    """Read a file of the output folder: a damaged one (truncated, overwritten, not Parquet / JSON
    / NPZ) is one :class:`~evalign.errors.EvalignError` naming it and saying how to redo its shard."""
    try:
        yield path
    except EvalignError:
        raise
    except Exception as e:  # pyarrow, json, numpy and zipfile each raise their own kinds
        stem = path.name.split(".")[0]
        detail = " ".join(str(e).split())[:200] or type(e).__name__
        fix = (f"delete {stem}.json in that folder and run the command again to redo this shard"
               if stem.startswith("part-") else "give another --out-dir or remove that folder")
        raise EvalignError(f"{path}: a damaged file of the output folder ({detail}); {fix}") from None


def _read_json(path: Path) -> Any:
    with shard_file(path):
        return json.loads(path.read_text(encoding="utf-8"))


def _read_parquet(path: Path, columns: list[str]) -> pd.DataFrame:
    import pyarrow.parquet as pq

    with shard_file(path):
        return pq.read_table(path, columns=columns).to_pandas()


def _read_keys(path: Path, take: Callable[[Any], Any]) -> Any:
    with shard_file(path), np.load(path) as z:
        return take(z)


def is_done(settings: EngineSettings, index: int) -> bool:
    """Whether shard ``index`` was finished by an earlier run (its record exists)."""
    return (Path(settings.out_dir) / f"{part_name(index)}.json").exists()


def read_shard(spec: ShardSpec, settings: EngineSettings) -> pd.DataFrame:
    """The shard's validated rows (as :func:`evalign.io.read_items` with ``require_reference``),
    with a hidden line column; a shard whose rows were all skipped is an empty table."""
    records, word = read_shard_records(spec)
    seen: list[tuple[int, dict[str, Any]]] = []

    def tagged() -> Any:
        for line, rec in records:
            rec = {**rec, _LINE: line}
            seen.append((line, rec))
            yield line, rec

    kw: dict[str, Any] = {"file": spec.file, "fields": settings.fields, "human": (), "require_reference": True,
                          "default_system": settings.default_system,
                          "numeric_from_text": spec.kind == "csv"}
    try:
        return records_to_table(tagged(), meta={"line_word": word}, on_invalid="skip" if settings.skip_invalid
                                 else "error", **kw)
    except InputError as e:
        if not settings.skip_invalid or e.reason is None or not e.reason.startswith("no records"):
            raise
    skipped = []  # every row invalid: the reader's message for each
    for pair in seen:
        try:
            records_to_table([pair], meta={"line_word": word}, **kw)
        except InputError as e:
            skipped.append(str(e))
    empty = pd.DataFrame(columns=["id", "system", "reference", "response", _LINE])
    empty.attrs["skipped"] = skipped
    return empty


def score_table(table: pd.DataFrame, metrics: Sequence[Metric]) -> tuple[pd.DataFrame, dict[str, Any]]:
    """``table`` with the metrics' columns added, and the part of the shard record they make:
    seconds and info per column, corpus statistics per system for corpus-level metrics."""
    record: dict[str, Any] = {"seconds": {}, "info": {}, "corpus": {}}
    if not len(table) or not metrics:
        return table, record
    scored, runs = score(table, metrics)
    for m, r in zip(metrics, runs, strict=True):
        record["seconds"][r.column] = r.seconds
        record["info"][r.column] = r.info
        if getattr(m, "system_level", "mean") == "corpus":
            per: dict[str, Any] = {}
            for system, group in scored.groupby("system", sort=True):
                stats = [s for s in m.item_stats(group["response"].tolist(), references_of(group)) if s is not None]
                per[str(system)] = [int(x) for x in np.sum(np.asarray(stats, dtype=np.int64), axis=0)] if stats else None
            record["corpus"][r.column] = per
    return scored, record


def write_shard(spec: ShardSpec, settings: EngineSettings, scored: pd.DataFrame, metrics: Sequence[Metric],
                record: dict[str, Any]) -> dict[str, Any]:
    """Write shard ``spec``'s rows (metric columns in the run's order), key hashes and record
    (last, atomically: a shard with a record is finished). Returns the record."""
    out = Path(settings.out_dir)
    stem = part_name(spec.index)
    derived = [c for m in metrics for c in scored.columns if c == m.column or c.startswith(m.column + ".")]
    base = [c for c in scored.columns if c not in derived and c != _LINE]
    table = scored[base + derived].copy()
    if "reference" in table.columns:
        table["reference"] = table["reference"].map(lambda r: [r] if isinstance(r, str) else r)
    lines = scored[_LINE].to_numpy(dtype=np.int64) if len(scored) else np.zeros(0, dtype=np.int64)
    keys = key_hashes(scored["id"].tolist(), scored["system"].tolist())
    if len(table):
        write_table(table, out / f"{stem}.parquet")
    with (out / f".{stem}.keys.tmp.npz").open("wb") as fh:
        np.savez(fh, keys=keys, lines=lines)
    (out / f".{stem}.keys.tmp.npz").replace(out / f"{stem}.keys.npz")
    full = {"shard": spec.index, "file": spec.file, "rows": len(table), "skipped": list(scored.attrs.get("skipped", [])),
            **record}
    write_json_atomic(out / f"{stem}.json", full)
    return full


def key_hashes(ids: Sequence[Any], systems: Sequence[Any]) -> np.ndarray:
    """A 64-bit BLAKE2b hash of each ``(id, system)`` (stable across processes and machines)."""
    out = np.empty(len(ids), dtype=np.uint64)
    for i, (a, b) in enumerate(zip(ids, systems, strict=True)):
        h = hashlib.blake2b(f"{a}\x00{b}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
        out[i] = int.from_bytes(h, "little")
    return out


def process_shard(spec: ShardSpec, settings: EngineSettings, metrics: Sequence[Metric]) -> dict[str, Any]:
    """Read, validate, score with every metric and write shard ``spec``; returns its record."""
    table = read_shard(spec, settings)
    scored, record = score_table(table, metrics)
    return write_shard(spec, settings, scored, metrics, record)


def finish(settings: EngineSettings, shards: Sequence[ShardSpec], metrics: Sequence[Metric],
           wall_seconds: float, resumed: int = 0) -> tuple[dict[str, Any], pd.DataFrame]:
    """The run's summary (the object ``evalign score --json`` prints, with ``out`` the folder)
    and system scores, from the finished shards; written to ``summary.json``.

    Mean-level metrics: ``numpy.nanmean`` of the system's item values in file order (what the
    in-memory engine computes); corpus metrics: sacrebleu's score of the system's summed sufficient
    statistics. Duplicate ``(id, system)`` across shards is the reader's error."""
    out = Path(settings.out_dir)
    records = _shard_records(out, shards)
    _check_duplicates(settings, shards)
    skipped = [m for r in records for m in r["skipped"]]
    n_items = sum(r["rows"] for r in records)
    if not n_items:
        first = f" ({len(skipped)} invalid ones skipped; first: {skipped[0]})" if skipped else ""
        raise InputError("no records" + first, file=settings.source)
    sys_df = _system_table(out, shards, records, metrics)
    runs = _metric_runs(records, metrics, n_items)
    summary = {
        "items": n_items,
        "skipped": len(skipped),
        "skipped_rows": skipped,
        "systems": sys_df.to_dict("records"),
        "metrics": [r.__dict__ for r in runs],
        "out": str(out),
        "shards": len(shards),
        "resumed_shards": resumed,
        "seconds": wall_seconds,
    }
    write_json_atomic(out / "summary.json", summary)
    return summary, sys_df


def _shard_records(out: Path, shards: Sequence[ShardSpec]) -> list[dict[str, Any]]:
    """Every shard's record (an error names the first shard not written)."""
    records = []
    for s in shards:
        path = out / f"{part_name(s.index)}.json"
        if not path.exists():
            raise EvalignError(f"{out}: shard {s.index} was not written; run the command again to finish it")
        records.append(_read_json(path))
    return records


def _mean_values(out: Path, shards: Sequence[ShardSpec], records: Sequence[dict[str, Any]],
                 mean_cols: list[str]) -> tuple[dict[str, dict[str, list[np.ndarray]]], dict[str, int]]:
    """Per system: the item values of each mean-level column (in file order) and the row count."""
    values: dict[str, dict[str, list[np.ndarray]]] = {}
    counts: dict[str, int] = {}
    for s, r in zip(shards, records, strict=True):
        if not r["rows"]:
            continue
        t = _read_parquet(out / f"{part_name(s.index)}.parquet", ["system", *mean_cols])
        for system, group in t.groupby("system", sort=False):
            counts[system] = counts.get(system, 0) + len(group)
            per = values.setdefault(system, {})
            for c in mean_cols:
                per.setdefault(c, []).append(group[c].to_numpy(dtype=float))
    return values, counts


def _corpus_score(m: Metric, records: Sequence[dict[str, Any]], system: str) -> float:
    """A corpus metric's score of ``system`` from its sufficient statistics summed over shards."""
    parts = [r["corpus"][m.column].get(system) for r in records if r["rows"]]
    parts = [p for p in parts if p is not None]
    return (float(m.score_from_stats([int(x) for x in np.sum(np.asarray(parts, dtype=np.int64), axis=0)]))
            if parts else float("nan"))


def _system_table(out: Path, shards: Sequence[ShardSpec], records: Sequence[dict[str, Any]],
                  metrics: Sequence[Metric]) -> pd.DataFrame:
    """The system scores: one row per system (sorted), one column per metric."""
    mean_cols = [m.column for m in metrics if getattr(m, "system_level", "mean") == "mean"]
    values, counts = _mean_values(out, shards, records, mean_cols)
    rows = []
    for system in sorted(counts):
        row: dict[str, Any] = {"system": system, "n_items": counts[system]}
        for m in metrics:
            if m.column in mean_cols:
                vals = np.concatenate(values[system][m.column])
                row[m.column] = float(np.nanmean(vals)) if np.isfinite(vals).any() else float("nan")
            else:
                row[m.column] = _corpus_score(m, records, system)
        rows.append(row)
    return pd.DataFrame(rows)


def _metric_runs(records: Sequence[dict[str, Any]], metrics: Sequence[Metric], n_items: int) -> list[MetricRun]:
    """Per metric, its run over all shards (seconds summed; numeric info summed, other info the last)."""
    runs = []
    for m in metrics:
        info: dict[str, Any] = {}
        for r in records:
            for k, v in r["info"].get(m.column, {}).items():
                info[k] = info.get(k, 0) + v if isinstance(v, int | float) and not isinstance(v, bool) else v
        runs.append(MetricRun(column=m.column, name=m.name, higher_is_better=m.higher_is_better,
                              signature=str(m.signature()), seconds=sum(r["seconds"].get(m.column, 0.0) for r in records),
                              n_items=n_items, info=info))
    return runs


def _check_duplicates(settings: EngineSettings, shards: Sequence[ShardSpec]) -> None:
    """The reader's duplicate ``(id, system)`` error for two rows in different shards."""
    out = Path(settings.out_dir)
    keys, owner = [], []
    for s in shards:
        k = _read_keys(out / f"{part_name(s.index)}.keys.npz", lambda z: np.asarray(z["keys"]))
        keys.append(k)
        owner.append(np.full(len(k), s.index, dtype=np.int32))
    if not keys:
        return
    allk = np.concatenate(keys)
    order = np.argsort(allk, kind="stable")
    sk = allk[order]
    dup = np.nonzero(sk[1:] == sk[:-1])[0]
    if not len(dup):
        return
    own = np.concatenate(owner)
    starts = np.cumsum([0] + [len(k) for k in keys])
    found = []
    for j in dup:  # confirm on the real values (a 64-bit hash collision is not a duplicate)
        a, b = sorted((int(order[j]), int(order[j + 1])))
        sa, sb = int(own[a]), int(own[b])
        ra, rb = a - starts[sa], b - starts[sb]
        ta = _read_parquet(out / f"{part_name(sa)}.parquet", ["id", "system"]).iloc[ra].to_dict()
        tb = _read_parquet(out / f"{part_name(sb)}.parquet", ["id", "system"]).iloc[rb].to_dict()
        if ta == tb:
            la = _read_keys(out / f"{part_name(sa)}.keys.npz", lambda z, r=ra: int(z["lines"][r]))
            lb = _read_keys(out / f"{part_name(sb)}.keys.npz", lambda z, r=rb: int(z["lines"][r]))
            found.append((lb, la, shards[sb], ta))
    if not found:
        return
    line, first, spec, key = min(found, key=lambda f: (f[2].index, f[0]))
    word = "row" if spec.kind == "parquet" else "line"
    raise InputError(f"duplicate (id, system) = ({key['id']!r}, {key['system']!r}); first seen on {word} {first}",
                     file=spec.file, line=line, field=settings.fields.get("id", "id"), line_word=word)


def shard_seconds() -> float:
    """A monotonic clock for the engines' timings (seconds)."""
    return time.perf_counter()
