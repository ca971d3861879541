"""The summary of a judge run: what its calls cost (:class:`CallUsage`, :class:`CallCounts`), the
verdict or score distribution with its length and order biases, and the :class:`JudgeSummary` written as
``OUT.summary.json`` (built by :func:`summarize` from the run's state; see :mod:`evalign.judges.runner`)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends.types import answered_by
from evalign.judges.base import Judge
from evalign.judges.bias import length_bias, order_swap_agreement, pairwise_length_bias
from evalign.judges.usage import JudgeUsage, Price, Tokens, drift_message, model_versions


@dataclass(frozen=True)
class CallUsage:
    """What one answered call cost and who answered it: the server's token counts, the latency in
    seconds (None when not measured) and the returned ``model`` / ``system_fingerprint``; the prompt
    tokens read from / written to the provider's prompt cache (``cache_write_1h_tokens`` of the
    written ones at the one-hour TTL), and ``batched``: the call went through a batch API (the cached
    generation says ``"batched": true``) or at OpenAI's flex tier (priced with the batch multiplier)."""

    prompt_tokens: int
    completion_tokens: int
    seconds: float | None
    model: str | None
    fingerprint: str | None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    batched: bool = False

    @classmethod
    def of(cls, gen: Mapping[str, Any]) -> CallUsage:
        """From a cached generation (:meth:`evalign.backends.Generation.to_json`)."""
        u = gen.get("usage") or {}
        model, fp = gen.get("model"), gen.get("system_fingerprint")
        if "model" not in gen:  # stored before evalign kept them: the server's response says
            model, fp = answered_by(gen.get("raw"))
        secs = gen.get("seconds")
        raw = gen.get("raw") if isinstance(gen.get("raw"), Mapping) else {}
        raw_usage = raw.get("usage") if isinstance(raw.get("usage"), Mapping) else {}
        creation = raw_usage.get("cache_creation") if isinstance(raw_usage.get("cache_creation"), Mapping) else {}
        batched = bool(gen.get("batched")) or raw.get("service_tier") == "flex"
        return cls(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0),
                   float(secs) if isinstance(secs, int | float) else None, model, fp,
                   cache_read_tokens=int(u.get("cache_read_tokens") or 0),
                   cache_write_tokens=int(u.get("cache_write_tokens") or 0),
                   cache_write_1h_tokens=int(creation.get("ephemeral_1h_input_tokens") or 0), batched=batched)

    @property
    def tokens(self) -> Tokens:
        """The call's tokens as they are priced."""
        return Tokens(self.prompt_tokens, self.completion_tokens, self.cache_read_tokens, self.cache_write_tokens,
                      self.cache_write_1h_tokens)


@dataclass(frozen=True)
class CallCounts:
    """Calls of a run: distinct calls, from the cache, made anew, re-asks, failed after retries,
    HTTP retries (of successful and failed calls), and unscored calls by reason."""

    total: int
    cached: int
    new: int
    reasked: int
    failed: int
    http_retries: int
    unscored_by_reason: Mapping[str, int]
    #: calls whose output was cut off at max_tokens after a complete verdict (read, and counted here)
    read_before_cut: int = 0


@dataclass(frozen=True)
class JudgeSummary:
    """The summary of a judge run (written as ``OUT.summary.json``).

    ``kind``: ``"score"`` (item judges: ``column`` holds a number, direction ``higher_is_better``)
    or ``"verdict"`` (pair judges: ``column`` holds A / B / tie / unparseable). ``methods``: G-Eval
    rows by method (``logprobs`` / ``samples``). ``rounds``: ranking protocol pairs by rounds used.
    ``errors``: backend error messages (redacted) by count; ``last_error`` the last one;
    ``failed_fraction``: calls that failed after retries / calls sent. ``usage``: what the judged items
    cost (:meth:`evalign.judges.usage.JudgeUsage.as_dict` over the run's distinct answered calls, cached
    ones included, plus ``new_calls`` / ``new_prompt_tokens`` / ``new_completion_tokens``: this run's
    own). ``models``: the model versions that answered (``model``, ``system_fingerprint``, ``calls``);
    ``drift``: one line when there was more than one, else None. Reading it like a mapping
    (``summary["calls"]["new"]``) reads :meth:`as_dict`.
    """

    judge: str
    mode: str
    column: str
    kind: str
    higher_is_better: bool
    signature: str
    backend: Mapping[str, Any]
    reference: bool
    items: int
    scored: int
    unscored: int
    skipped: int
    unscored_by_reason: Mapping[str, int]
    calls: CallCounts
    distribution: Mapping[str, int]
    mean: float
    std: float | None
    bias: Mapping[str, Any]
    methods: Mapping[str, int]
    rounds: Mapping[str, int]
    errors: Mapping[str, int]
    last_error: str | None
    failed_fraction: float
    seconds: float
    #: the output constraint: ``mode`` (auto / on / off), ``sent`` (whether calls carried one),
    #: ``note`` (why not, or the refusal; None), ``outside_shape`` (answers outside its regex)
    constraint: Mapping[str, Any] = field(default_factory=dict)
    #: per criterion of a criteria judge: items read (``scored``), not read, and the mean rating
    criteria: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    usage: Mapping[str, Any] = field(default_factory=dict)
    models: Sequence[Mapping[str, Any]] = ()
    drift: str | None = None
    #: what the run's answers lacked, said once (:meth:`evalign.judges.base.Judge.run_notes`)
    notes: Sequence[str] = ()
    #: the provider's prompt cache (hosted backends only): ``mode``, the requests' estimated
    #: ``shared_prefix_tokens``, the model's ``minimum``, ``reaches_minimum``, ``note``
    #: (:func:`evalign.judges.prompt_cache.prefix_report`)
    prompt_cache: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly dict."""
        return asdict(self)

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        """Like ``dict.get`` on :meth:`as_dict`."""
        return self.as_dict().get(key, default)


def summarize(
    judge: Judge,
    out: pd.DataFrame,
    identity: Mapping[str, Any],
    signature: str,
    reference: bool,
    st: Any,
    progress: Mapping[str, int],
    human: str | None,
    length_unit: str,
    seconds: float,
    price: Price | None = None,
) -> JudgeSummary:
    col = judge.column
    status = out[f"{col}.status"]
    unscored_rows = out[status == "unscored"]
    calls = CallCounts(
        total=len({c["key"] for c in st.call_log}),
        cached=int(progress.get("cached", 0)),
        new=int(progress.get("new", 0)),
        reasked=len({c["key"] for c in st.call_log if c["attempt"] > 0}),
        failed=int(progress.get("failed", 0)),
        http_retries=st.http_retries,
        unscored_by_reason=dict(st.call_reasons.most_common()),
        read_before_cut=st.cut_calls,
    )
    if judge.pairwise:
        distribution, mean, bias, rounds = _pair_statistics(judge, out, length_unit)
        std: float | None = None
    else:
        distribution, mean, std, bias = _score_statistics(out, col, human, length_unit)
        rounds = {}
    usage, versions = run_usage(st, int((status != "skipped").sum()), price)
    methods: dict[str, int] = {}
    if f"{col}.method" in out.columns:
        methods = {str(k): int(v) for k, v in Counter(m for m in out[f"{col}.method"] if isinstance(m, str)).items()}
    return JudgeSummary(
        judge=judge.name,
        mode=judge.mode,
        column=col,
        kind="verdict" if judge.pairwise else "score",
        higher_is_better=judge.higher_is_better,
        signature=signature,
        backend=dict(identity),
        reference=reference,
        items=len(out),
        scored=int((status == "scored").sum()),
        unscored=int((status == "unscored").sum()),
        skipped=int((status == "skipped").sum()),
        unscored_by_reason=dict(Counter(unscored_rows[f"{col}.reason"].fillna("?").tolist()).most_common()),
        calls=calls,
        distribution=distribution,
        mean=mean,
        std=std,
        bias=bias,
        methods=methods,
        rounds=rounds,
        errors=dict(st.error_messages.most_common()),
        last_error=st.last_error,
        failed_fraction=(calls.failed / st.sent) if st.sent else 0.0,
        seconds=seconds,
        usage=usage,
        models=versions,
        drift=drift_message(versions),
    )


def run_usage(st: Any, items: int, price: Price | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The run's usage over its distinct answered calls (cached ones included) and the model versions
    that answered them."""
    first: dict[str, dict[str, Any]] = {}
    for c in st.call_log:
        if c.get("answered"):
            first.setdefault(c["key"], c)
    answers = {k: st.answers[k] for k in first}
    total = sum((a.tokens for a in answers.values()), Tokens())
    u = JudgeUsage(items=items, calls=len(answers), unparsed=sum(1 for c in first.values() if c["reason"] is not None),
                   prompt_tokens=total.prompt, completion_tokens=total.completion,
                   seconds=sum(a.seconds or 0.0 for a in answers.values()), price=price,
                   cache_read_tokens=total.cache_read, cache_write_tokens=total.cache_write,
                   cache_write_1h_tokens=total.cache_write_1h,
                   batched=sum((a.tokens for a in answers.values() if a.batched), Tokens()))
    new = [answers[k] for k, c in first.items() if not c["cached"]]
    out = u.as_dict()
    out.update(new_calls=len(new), new_prompt_tokens=sum(a.prompt_tokens for a in new),
               new_completion_tokens=sum(a.completion_tokens for a in new))
    return out, model_versions((a.model, a.fingerprint) for a in answers.values())


def _verdicts(column: pd.Series, keep: np.ndarray) -> list[str | None]:
    """The single-order verdicts of the kept rows (``"A"`` / ``"B"`` / ``"tie"``; None = none)."""
    return [v if isinstance(v, str) and v in ("A", "B", "tie") else None for v in column[keep].tolist()]


def _pair_statistics(
    judge: Judge, out: pd.DataFrame, length_unit: str
) -> tuple[dict[str, int], float, dict[str, Any], dict[str, int]]:
    """Pair judges: verdict counts, mean code, length (and order-swap) bias, pairs by rounds used."""
    col = judge.column
    status = out[f"{col}.status"]
    codes = out[f"{col}.code"].to_numpy(dtype=float)
    verdicts = [v for v in out[col].tolist() if isinstance(v, str)]
    distribution = {k: int(v) for k, v in sorted(Counter(verdicts).items())}
    finite = codes[np.isfinite(codes)]
    mean = float(finite.mean()) if finite.size else float("nan")
    both = bool(getattr(judge, "both_orders", False))
    judged = (status != "skipped").to_numpy()
    orders = [_verdicts(out[f"{col}.{o}"], judged) for o in ("ab", "ba")] if both else []
    bias: dict[str, Any] = {
        "length": pairwise_length_bias(codes[judged], out["response_a"][judged].tolist(),
                                       out["response_b"][judged].tolist(), unit=length_unit, orders=orders)
    }
    if both:
        bias["order_swap"] = order_swap_agreement(*orders)
    rounds: dict[str, int] = {}
    if f"{col}.rounds" in out.columns:
        used = [int(r) for r, s in zip(out[f"{col}.rounds"], status, strict=True) if s != "skipped"]
        rounds = {str(k): int(v) for k, v in sorted(Counter(used).items())}
    return distribution, mean, bias, rounds


def _score_statistics(
    out: pd.DataFrame, col: str, human: str | None, length_unit: str
) -> tuple[dict[str, int], float, float, dict[str, Any]]:
    """Item judges: counts of the (rounded) scores, their mean and std, the length bias."""
    scores = out[col].to_numpy(dtype=float)
    finite = scores[np.isfinite(scores)]
    rounded = Counter(float(v) if float(v).is_integer() else round(float(v)) for v in finite)
    distribution = {f"{k:g}": int(v) for k, v in sorted(rounded.items())}
    mean = float(finite.mean()) if finite.size else float("nan")
    std = float(finite.std()) if finite.size else float("nan")
    hum = out[human].to_numpy(dtype=float) if human else None
    bias = {"length": length_bias(scores, out["response"].tolist(), unit=length_unit, human=hum)}
    return distribution, mean, std, bias


def failed_too_often(summary: JudgeSummary, max_failed: float) -> bool:
    """True when more than ``max_failed`` (a fraction 0..1) of the calls sent failed after retries."""
    return summary.calls.failed > 0 and summary.failed_fraction > max_failed and not math.isnan(summary.failed_fraction)
