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
    smollm2: {input: 0, output: 0}

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalign.errors import InputError, UsageError
from evalign.io.yaml_files import load_yaml

#: the per-row usage columns of a judge ``J`` (``J.<suffix>``), in the order they are written
ROW_COLUMNS = ("calls", "unparsed", "prompt_tokens", "completion_tokens", "seconds", "model", "fingerprint")
#: the environment variable naming the user's price file
PRICES_ENV = "EVALIGN_PRICES"
_PRICE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)\s*/\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Price:
    """A model's price per million tokens: ``input`` (prompt) and ``output`` (completion)."""

    input: float
    output: float

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        """The cost of these tokens (the price's currency)."""
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6

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
        if not isinstance(v, Mapping) or set(v) != {"input", "output"}:
            raise InputError("must be {input: PRICE, output: PRICE} (per million tokens)", file=str(p), field=str(key))
        nums = [v["input"], v["output"]]
        if any(isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) or x < 0 for x in nums):
            raise InputError(f"prices must be numbers >= 0, got {v!r}", file=str(p), field=str(key))
        models.append((str(key), Price(float(nums[0]), float(nums[1]))))
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
    ``usage``), ``seconds`` (their latencies added up), and the ``price`` when known."""

    items: int
    calls: int
    unparsed: int
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    price: Price | None = None

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
        """The price of the tokens (NaN without a price)."""
        return self.price.cost(self.prompt_tokens, self.completion_tokens) if self.price else float("nan")

    @property
    def cost_per_1000(self) -> float:
        """The price per 1,000 items (NaN without a price)."""
        return 1000 * self.cost / self.items if self.items and self.price else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the counts, the rates and, with a price, the cost."""
        return {
            "items": self.items, "calls": self.calls, "unparsed": self.unparsed, "parse_rate": self.parse_rate,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 3), "seconds_per_call": self.seconds_per_call,
            "seconds_per_1000_items": self.seconds_per_1000,
            "price": None if self.price is None else {"input_per_million": self.price.input,
                                                      "output_per_million": self.price.output},
            "cost": self.cost if self.price else None, "cost_per_1000_items": self.cost_per_1000 if self.price else None,
        }  # fmt: skip

    def with_price(self, price: Price | None) -> JudgeUsage:
        """The same usage at ``price``."""
        return JudgeUsage(self.items, self.calls, self.unparsed, self.prompt_tokens, self.completion_tokens,
                          self.seconds, price)


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
    return JudgeUsage(items=len(t), calls=int(_num(t[f"{column}.calls"])), unparsed=int(unparsed),
                      prompt_tokens=int(_num(t[f"{column}.prompt_tokens"])),
                      completion_tokens=int(_num(t[f"{column}.completion_tokens"])),
                      seconds=_num(t[f"{column}.seconds"]), price=price)


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


__all__ = ["PRICES_ENV", "ROW_COLUMNS", "JudgeUsage", "Price", "PriceBook", "drift_message", "has_usage",
           "model_versions", "parse_price", "price_book", "read_prices", "table_models", "table_usage"]
