"""What a judge costs and which model answered: calls, tokens, seconds, parse rate and price per 1,000
items, and the model versions behind the answers.

Every judge call's ``usage`` (prompt and completion tokens, as the server counted them), latency in
seconds, returned ``model`` and ``system_fingerprint`` are stored with the answer in the cache; the
judged table carries them per row (``J.calls``, ``J.unparsed``, ``J.prompt_tokens``,
``J.completion_tokens``, ``J.seconds``, ``J.model`` and, when a server gave one, ``J.fingerprint``),
so ``evalign meta`` and ``evalign report`` read a judge's cost from the table alone.

Prices are per million tokens, input / output, in the currency the user writes them in (the providers'
lists: USD): ``--price 2.5/10`` for one judge, or a price file the user keeps (YAML: model name or glob
-> ``{input, output}``; ``--prices FILE`` or the environment variable ``EVALIGN_PRICES``)::

    # prices.yaml: USD per million tokens
    gpt-4o-2024-08-06: {input: 2.50, output: 10.00}
    "gpt-4o-mini*": {input: 0.15, output: 0.60}
    "claude-sonnet-*": {input: 3, output: 15, cache_write_1h: 2.0}
    smollm2: {input: 0, output: 0}

Besides ``input`` and ``output`` a model may set the multipliers of the list price its provider bills
(:data:`MULTIPLIERS`): ``batch`` (0.5: a call sent through a batch API, or at OpenAI's ``flex`` service
tier), ``cache_read`` (0.1: a prompt token read from the provider's prompt cache), ``cache_write_5m``
(1.25) and ``cache_write_1h`` (2.0: a prompt token written to it). A run's cost is priced from its real
token split (:meth:`Price.run_cost`), beside the list price of the same tokens (:meth:`Price.cost`).

A model is looked up by the name the server returned, then by the name asked for; the first key that
equals it, else the first glob that matches it (in file order), gives its price.

Seconds are the calls' own latencies, added up: "seconds per 1,000 items" is what judging 1,000 items
one call at a time takes (divide by the concurrency of a server that answers calls in parallel).
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from evalign.errors import InputError, UsageError
from evalign.io.yaml_files import load_yaml

#: the per-row usage columns of a judge ``J`` (``J.<suffix>``), in the order they are written
ROW_COLUMNS = ("calls", "unparsed", "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens",
               "seconds", "model", "fingerprint")
#: the price multipliers a price file may set per model, with their defaults (the providers' lists)
MULTIPLIERS = {"batch": 0.5, "cache_read": 0.1, "cache_write_5m": 1.25, "cache_write_1h": 2.0}
#: the environment variable naming the user's price file
PRICES_ENV = "EVALIGN_PRICES"
_PRICE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)\s*/\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Tokens:
    """Token counts priced apart: ``prompt`` (every prompt token, whatever its rate), ``completion``,
    and the parts of ``prompt`` read from (``cache_read``) or written to (``cache_write``, of which
    ``cache_write_1h`` with the one-hour TTL) the provider's prompt cache."""

    prompt: int = 0
    completion: int = 0
    cache_read: int = 0
    cache_write: int = 0
    cache_write_1h: int = 0

    def __add__(self, other: Tokens) -> Tokens:
        return Tokens(self.prompt + other.prompt, self.completion + other.completion, self.cache_read + other.cache_read,
                      self.cache_write + other.cache_write, self.cache_write_1h + other.cache_write_1h)

    def __sub__(self, other: Tokens) -> Tokens:
        return Tokens(self.prompt - other.prompt, self.completion - other.completion, self.cache_read - other.cache_read,
                      self.cache_write - other.cache_write, self.cache_write_1h - other.cache_write_1h)


@dataclass(frozen=True)
class Price:
    """A model's price per million tokens: ``input`` (prompt) and ``output`` (completion), and the
    multipliers of that list price its provider bills (:data:`MULTIPLIERS`): ``batch`` (batched or
    flex calls, input and output), ``cache_read``, ``cache_write_5m``, ``cache_write_1h`` (prompt tokens
    read from / written to the prompt cache)."""

    input: float
    output: float
    batch: float = MULTIPLIERS["batch"]
    cache_read: float = MULTIPLIERS["cache_read"]
    cache_write_5m: float = MULTIPLIERS["cache_write_5m"]
    cache_write_1h: float = MULTIPLIERS["cache_write_1h"]

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        """The list price of these tokens (the price's currency): every token at its plain rate."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6

    def split_cost(self, t: Tokens) -> float:
        """What ``t`` costs sent synchronously: uncached prompt tokens at ``input``, cache reads and
        writes at their multipliers of it, completion tokens at ``output``."""
        uncached = t.prompt - t.cache_read - t.cache_write
        write_5m = t.cache_write - t.cache_write_1h
        prompt = uncached + self.cache_read * t.cache_read + self.cache_write_5m * write_5m \
            + self.cache_write_1h * t.cache_write_1h
        return (prompt * self.input + t.completion * self.output) / 1e6

    def run_cost(self, tokens: Tokens, batched: Tokens | None = None) -> float:
        """What a run's ``tokens`` cost from their real split, ``batched`` of them (calls sent through a
        batch API or at a flex tier) at the ``batch`` multiplier."""
        part = batched or Tokens()
        return self.split_cost(tokens - part) + self.batch * self.split_cost(part)

    def __str__(self) -> str:
        return f"{self.input:g}/{self.output:g} per 1M tokens"


def parse_price(text: str, *, option: str = "--price") -> Price:
    """``"IN/OUT"`` (per million input / output tokens, e.g. ``"2.5/10"``) as a :class:`Price`; anything
    else is a :class:`~evalign.errors.UsageError` naming ``option``."""
    m = _PRICE_RE.match(str(text))
    if not m:
        raise UsageError(f"{option} must be IN/OUT, the price per million input and output tokens (e.g. 2.5/10), "
                         f"got {text!r}")
    price = Price(float(m.group(1)), float(m.group(2)))
    if not (math.isfinite(price.input) and math.isfinite(price.output)):
        raise UsageError(f"{option} must be finite prices per million tokens, got {text!r}")
    return price


@dataclass(frozen=True)
class PriceBook:
    """Prices by model (names or globs, in order: ``models``) and by judge column (``columns``, e.g. from
    ``--price J=IN/OUT``); ``default``: the price of every judge without one (``--price IN/OUT``)."""

    models: tuple[tuple[str, Price], ...] = ()
    columns: Mapping[str, Price] = field(default_factory=dict)
    default: Price | None = None

    def for_model(self, *names: str | None) -> Price | None:
        """The price of the first of ``names`` the book knows (exact keys first, then globs)."""
        for name in (n for n in names if n):
            for key, price in self.models:
                if key == name:
                    return price
            for key, price in self.models:
                if any(c in key for c in "*?[") and fnmatch.fnmatchcase(name, key):
                    return price
        return None

    def price(self, column: str | None = None, models: Sequence[str | None] = ()) -> Price | None:
        """The price of a judge: its column's, else its models' (a judge whose answers came from several
        priced models has none), else the default."""
        if column is not None and column in self.columns:
            return self.columns[column]
        found = {self.for_model(m) for m in models if m}
        found.discard(None)
        if len(found) == 1:
            return found.pop()
        return self.default if not found else None

    @property
    def empty(self) -> bool:
        """True when the book holds no price at all."""
        return not (self.models or self.columns or self.default)


def read_prices(path: str | Path, *, source: str | None = None) -> PriceBook:
    """A price file (YAML or JSON: model name or glob -> ``{input, output}`` per million tokens, or
    ``"IN/OUT"``); errors name the file and the model (and ``source``, where the path came from, e.g.
    ``$EVALIGN_PRICES``, when the file is missing)."""
    p = Path(path)
    if p.is_dir():
        raise InputError("is a folder, not a price file" + (f" (from {source})" if source else ""), file=str(p))
    if not p.is_file():
        raise InputError("no such price file" + (f" (from {source})" if source else ""), file=str(p))
    try:
        data = load_yaml(p.read_text(encoding="utf-8"), str(p), what="price file")
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text (byte {e.start}); save the price file as UTF-8", file=str(p)) from None
    if not isinstance(data, Mapping):
        raise InputError("a price file maps model names to {input, output} prices per million tokens", file=str(p))
    models: list[tuple[str, Price]] = []
    for key, v in data.items():
        if isinstance(v, str):
            try:
                models.append((str(key), parse_price(v)))
            except UsageError:
                raise InputError(f"must be IN/OUT or {{input, output}}, got {v!r}", file=str(p), field=str(key)) from None
            continue
        if not isinstance(v, Mapping) or not {"input", "output"} <= set(v) or set(v) - {"input", "output", *MULTIPLIERS}:
            raise InputError("must be {input: PRICE, output: PRICE} (per million tokens), optionally with the "
                             f"multipliers {', '.join(MULTIPLIERS)}", file=str(p), field=str(key))
        nums = list(v.values())
        if any(isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0 for x in nums):
            raise InputError(f"prices and multipliers must be numbers >= 0, got {v!r}", file=str(p), field=str(key))
        models.append((str(key), Price(**{k: float(x) for k, x in v.items()})))
    return PriceBook(models=tuple(models))


def price_book(prices: str | Path | None = None, price: Sequence[str] | str | None = None) -> PriceBook:
    """The prices of a command: the price file ``prices`` (else ``$EVALIGN_PRICES``, if set) and the
    ``--price`` values (``IN/OUT`` for every judge, ``COLUMN=IN/OUT`` for one judge column)."""
    path = prices if prices is not None else (os.environ.get(PRICES_ENV) or None)
    book = read_prices(path, source=None if prices is not None else f"${PRICES_ENV}") if path else PriceBook()
    columns: dict[str, Price] = {}
    default: Price | None = None
    for item in [price] if isinstance(price, str) else list(price or []):
        if "=" in item:
            col, _, value = item.rpartition("=")
            columns[col.strip()] = parse_price(value)
        else:
            default = parse_price(item)
    return PriceBook(models=book.models, columns=columns, default=default)


@dataclass(frozen=True)
class JudgeUsage:
    """A judge's calls over ``items`` judged items (skipped rows not counted): answered ``calls``, of
    which ``unparsed`` gave no grade, their ``prompt_tokens`` / ``completion_tokens`` (the server's
    ``usage``), ``seconds`` (their latencies added up), and the ``price`` when known.
    ``cache_read_tokens`` / ``cache_write_tokens`` (of which ``cache_write_1h_tokens`` at the one-hour
    TTL) are parts of ``prompt_tokens``; ``batched``: the tokens of calls sent through a batch API or at
    a flex tier (priced with the ``batch`` multiplier)."""

    items: int
    calls: int
    unparsed: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    price: Price | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    batched: Tokens = field(default_factory=Tokens)

    @property
    def tokens(self) -> Tokens:
        """Every token of the calls, split as they are priced."""
        return Tokens(self.prompt_tokens, self.completion_tokens, self.cache_read_tokens, self.cache_write_tokens,
                      self.cache_write_1h_tokens)

    @property
    def parse_rate(self) -> float:
        """Answered calls whose grade was read / answered calls (NaN without a call)."""
        return (self.calls - self.unparsed) / self.calls if self.calls else float("nan")

    @property
    def seconds_per_call(self) -> float:
        """Mean latency of a call (NaN without a call)."""
        return self.seconds / self.calls if self.calls else float("nan")

    @property
    def seconds_per_1000(self) -> float:
        """Seconds of calls per 1,000 items (one call at a time)."""
        return 1000 * self.seconds / self.items if self.items else float("nan")

    @property
    def cost(self) -> float:
        """What the tokens cost from their real split (cache reads and writes, batched calls at their
        multipliers; NaN without a price)."""
        return self.price.run_cost(self.tokens, self.batched) if self.price else float("nan")

    @property
    def list_cost(self) -> float:
        """The list price of the same tokens, every one at its plain rate (NaN without a price)."""
        return self.price.cost(self.prompt_tokens, self.completion_tokens) if self.price else float("nan")

    @property
    def cost_per_1000(self) -> float:
        """What 1,000 items cost (:attr:`cost`; NaN without a price)."""
        return 1000 * self.cost / self.items if self.items and self.price else float("nan")

    @property
    def list_cost_per_1000(self) -> float:
        """The list price of 1,000 items (:attr:`list_cost`; NaN without a price)."""
        return 1000 * self.list_cost / self.items if self.items and self.price else float("nan")

    def cost_detail(self) -> dict[str, Any] | None:
        """``{"run": {cost, cost_per_1000_items}, "list": {...}}``: this run's cost from its real token
        split beside the list price of the same tokens (None without a price)."""
        if self.price is None:
            return None
        return {"run": {"cost": self.cost, "cost_per_1000_items": self.cost_per_1000},
                "list": {"cost": self.list_cost, "cost_per_1000_items": self.list_cost_per_1000}}

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the counts, the rates and, with a price, the cost."""
        return {
            "items": self.items, "calls": self.calls, "unparsed": self.unparsed, "parse_rate": self.parse_rate,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "cache_write_tokens": self.cache_write_tokens, "cache_read_tokens": self.cache_read_tokens,
            "seconds": round(self.seconds, 3), "seconds_per_call": self.seconds_per_call,
            "seconds_per_1000_items": self.seconds_per_1000,
            "price": None if self.price is None else {"input_per_million": self.price.input,
                                                      "output_per_million": self.price.output,
                                                      **{k: getattr(self.price, k) for k in MULTIPLIERS}},
            "cost": self.cost if self.price else None, "cost_per_1000_items": self.cost_per_1000 if self.price else None,
            "cost_detail": self.cost_detail(),
            BATCH_USAGE_KEY: batch_usage(self),
        }  # fmt: skip

    def with_price(self, price: Price | None) -> JudgeUsage:
        """The same usage at ``price``."""
        return replace(self, price=price)


#: the key of the summary's ``usage`` that the batch API fills (:func:`batch_usage`)
BATCH_USAGE_KEY = "batched_tokens"


def batch_usage(u: JudgeUsage) -> dict[str, int] | None:
    """The hook of the batch path in a summary's ``usage``: the tokens of the calls priced as batched
    (sent through a batch API or at a flex tier), None when there were none."""
    if not (u.batched.prompt or u.batched.completion):
        return None
    return {"prompt_tokens": u.batched.prompt, "completion_tokens": u.batched.completion,
            "cache_read_tokens": u.batched.cache_read, "cache_write_tokens": u.batched.cache_write}


def _num(values: Iterable[Any]) -> float:
    out = 0.0
    for v in values:
        if v is not None and not (isinstance(v, float) and math.isnan(v)):
            out += float(v)
    return out


def has_usage(table: Any, column: str) -> bool:
    """Whether ``table`` holds the per-row usage columns of judge ``column``."""
    return all(f"{column}.{c}" in table.columns for c in ("calls", "prompt_tokens", "completion_tokens", "seconds"))


def table_usage(table: Any, column: str, price: Price | None = None) -> JudgeUsage | None:
    """The :class:`JudgeUsage` of judge ``column`` from a judged table's per-row columns (rows whose
    ``J.status`` is ``skipped`` not counted), or None when the table has none."""
    if not has_usage(table, column):
        return None
    t = table
    if f"{column}.status" in t.columns:
        t = t[t[f"{column}.status"] != "skipped"]
    unparsed = _num(t[f"{column}.unparsed"]) if f"{column}.unparsed" in t.columns else 0.0
    cache = {k: int(_num(t[f"{column}.{k}"])) if f"{column}.{k}" in t.columns else 0
             for k in ("cache_read_tokens", "cache_write_tokens")}
    return JudgeUsage(items=len(t), calls=int(_num(t[f"{column}.calls"])), unparsed=int(unparsed),
                      prompt_tokens=int(_num(t[f"{column}.prompt_tokens"])),
                      completion_tokens=int(_num(t[f"{column}.completion_tokens"])),
                      seconds=_num(t[f"{column}.seconds"]), price=price, **cache)


def table_models(table: Any, column: str) -> list[str]:
    """The models that answered judge ``column`` (its ``J.model`` column: ``;``-joined per row), in order."""
    if f"{column}.model" not in table.columns:
        return []
    out: dict[str, None] = {}
    for v in table[f"{column}.model"].tolist():
        if isinstance(v, str):
            out.update(dict.fromkeys(m.strip() for m in v.split(";") if m.strip()))
    return list(out)


# --- model versions ------------------------------------------------------------------------------


def model_versions(calls: Iterable[tuple[str | None, str | None]]) -> list[dict[str, Any]]:
    """The distinct ``(model, system_fingerprint)`` of answered calls with their counts, most calls first."""
    counts = Counter((m, f) for m, f in calls)
    return [{"model": m, "system_fingerprint": f, "calls": n} for (m, f), n in counts.most_common()]


def drift_message(versions: Sequence[Mapping[str, Any]]) -> str | None:
    """One line when the answers came from more than one model version (a model or fingerprint changed
    during the run, or since the cached answers were made), else None."""
    if len(versions) < 2:
        return None
    shown = ", ".join(f"{v['model'] or '?'}" + (f" ({v['system_fingerprint']})" if v["system_fingerprint"] else "")
                      + f": {v['calls']} call{'s' if v['calls'] != 1 else ''}" for v in versions)
    return (f"the judge's answers come from {len(versions)} model versions ({shown}): the model changed during the "
            "run or since the cached answers; grades of different versions may not be comparable")


__all__ = ["BATCH_USAGE_KEY", "MULTIPLIERS", "PRICES_ENV", "ROW_COLUMNS", "JudgeUsage", "Price", "PriceBook", "Tokens",
           "batch_usage", "drift_message", "has_usage",
           "model_versions", "parse_price", "price_book", "read_prices", "table_models", "table_usage"]
