"""``evalign judge --simulated-annotators K --fewshot FILE``: the options of the simulated-annotators
confidence (:mod:`evalign.judges.modes.simulated`) and the judge they make."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from evalign.cli.common import CliError

SIMULATED_ANNOTATORS: Any = typer.Option(None, "--simulated-annotators", help="Pairwise: prompt the judge once per "
                                         "annotator of --fewshot (the first K), with that annotator's examples, in "
                                         "both orders; J.confidence is the verdict's probability averaged over them.")
FEWSHOT: Any = typer.Option(None, "--fewshot", help="With --simulated-annotators: the annotators' examples: "
                            "upstream's fewshot.jsonl (Trust or Escalate) or an evalign annotate export.")
FEWSHOT_EXAMPLES: Any = typer.Option(3, "--fewshot-examples", help="With --simulated-annotators: examples per "
                                     "annotator (the first N of each).")
FEWSHOT_PROMPT: Any = typer.Option("auto", "--fewshot-prompt", help="With --simulated-annotators: upstream (its "
                                   "prompt text, read from the data folder), evalign (evalign's template) or auto "
                                   "(upstream's when the data folder has it).")


def simulated_options(o: Any, mode: str) -> dict[str, Any] | None:
    """The simulated-annotators judge's own options (``fewshot``: the first K annotators' examples,
    ``prompt``, ``data_dir``) from the command ``o`` (a :class:`~evalign.cli.judge.JudgeCommand`), its
    options checked and the few-shot file read; None without ``--simulated-annotators`` (its other
    options are then refused). ``mode``: the judge mode the command resolved."""
    from evalign.judges.base import judge_class

    k = o.simulated_annotators
    if k is None:
        given = [n for n, v in (("--fewshot", o.fewshot), ("--fewshot-examples", o.fewshot_examples != 3),
                                ("--fewshot-prompt", o.fewshot_prompt != "auto")) if v]
        if given:
            raise CliError(f"{', '.join(given)} go with --simulated-annotators K")
        return None
    if k < 1:
        raise CliError(f"--simulated-annotators must be >= 1, got {k}")
    if o.fewshot is None:
        raise CliError("--simulated-annotators needs --fewshot FILE (the annotators' examples)")
    if o.fewshot_examples < 1:
        raise CliError(f"--fewshot-examples must be >= 1, got {o.fewshot_examples}")
    if judge_class(mode).name != "prometheus_relative" or o.template:
        raise CliError("--simulated-annotators is a pairwise judge of its own prompt: use it with --mode pairwise, "
                       "without --template (--fewshot-prompt picks the prompt) and a generating backend")
    if o.tie or o.single_order:
        raise CliError("--simulated-annotators asks for A or B in both orders: not with --tie or --single-order")
    from evalign.io.fewshot import read_fewshot

    source = read_fewshot(Path(o.fewshot), examples=o.fewshot_examples)
    return {"fewshot": source.first(k), "prompt": o.fewshot_prompt, "data_dir": o.data_dir}
