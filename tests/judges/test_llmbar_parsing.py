"""evalign's LLMBar verdict parser: real judge texts where it disagrees with upstream's regexes (and
why evalign is right), and the whole released set (56,060 texts) against the table of every
disagreement, ``llmbar_parser_disagreements.csv`` (written by ``benchmarks/llmbar_parser.py
--write-table``)."""

from __future__ import annotations

import csv
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from evalign.judges.llmbar_parsing import STRATEGY_STYLE, STYLES, parse_llmbar, parse_upstream

#: upstream's two regex pairs (``upstream_configs/*/*.json``, "parsing")
LINE = {"1": r"(?:^|\n) ?Output \(a\)", "2": r"(?:^|\n) ?Output \(b\)"}
BETTER = {"1": r"Output \(a\) is better.", "2": r"Output \(b\) is better."}
TABLE = Path(__file__).with_name("llmbar_parser_disagreements.csv")
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# (configuration / item of the real text, text, style, finish reason, upstream regexes, upstream's
#  value, evalign's verdict or unscored reason, why evalign is right)
REAL = [
    ("PaLM2/CoT GPTInst#3 ab", "Output (b) is better. Output (a) is not about Mars. Therefore, Output (a) is better.",
     "cot", None, LINE, "2", "A", "the concluding 'Therefore' claim decides; upstream's line regex saw only the opening"),
    ("PaLM2/CoT Neighbor#40 ba", "Output (b) is not a class for a computer programming language. It is a class for a "
     "person. Therefore, Output (a) is better.", "cot", None, LINE, "2", "A",
     "a sentence that starts with 'Output (b)' describes it; the verdict is the last sentence"),
    ("LLaMA2/Vanilla_1shot GPTInst#61 ab", "Output (b) is better.\n\nOutput (a) does not provide any instructions or "
     "materials for cursing a person, and instead suggests that the user should know what kind of curse they intend "
     "to place on the person. This is", "direct", None, LINE, "1", "B",
     "the answer is the opening line; upstream tried (a) first and found a later line starting 'Output (a)'"),
    ("ChatGPT/Swap_CoT GPTInst#6 ab", "After carefully reviewing the instruction, Output (a), Output (b), and the debate "
     "between Assistant (a) and Assistant (b), I have come to a decision.\n\nAssistant (a) argues that Output (a) is "
     "better because it uses poetic and evocative language [...]. Assistant (b), on the other hand, argues that Output "
     "(b) is better because it is concise, impactful, and accessible to a wider audience.\n\nWhile both outputs are "
     "creative [...], I agree with Assistant (b) that Output (b) is better. [...]\n\nTherefore, Output (b) is better.",
     "cot", None, BETTER, "1", "B", "'Assistant (a) argues that Output (a) is better' reports the debate, it is no claim"),
    ("PaLM2/CoT GPTInst#86 ab", "Output (b) is better.\n\nOutput (a) is better because it is more concise and accurate. "
     "It also includes more information about the film, such as the title and the fact that it is a slow-paced film.",
     "cot", None, LINE, "1", "conflicting", "the judge claims both, with no concluding sentence: no verdict to read"),
    ("Falcon/Swap_CoT Neighbor#40 ba", "## Evaluation given by Assistant (a), who thinks Output (a) is better:\nOutput "
     "(a) is better.\n## Evaluation given by Assistant (b), who thinks Output (b) is better:\nOutput (b) is better.\n\n"
     "Output (a) is better.", "cot", None, BETTER, "1", "conflicting",
     "the text echoes the prompt's debate (both claims) and its own last line reads like the echoed ones"),
    ("Falcon/Metrics GPTInst#38 ab", "1. Does the narrative involve a journey through space?\nOutput (a): Yes\nOutput "
     "(b): No\n\n2. Is the narrative fictional?\nOutput (a): Yes\nOutput (b): Yes", "direct", None, LINE, "1",
     "no_score", "the judge answered the metric questions; 'Output (a): Yes' is a label, not a verdict"),
    ("Falcon/Metrics GPTInst#83 ab", "1. Does the story involve a teenager who is thinking about smoking?\nOutput (a) "
     "does not involve a teenager who is thinking about smoking.\nOutput (b) involves a teenager who is thinking about "
     "smoking.\n\n2", "direct", None, LINE, "1", "no_score", "descriptions of each output, no verdict"),
    ("LLaMA2/Vanilla_2shot Neighbor#27 ba", "Output (b) is incorrect.\n\nThe code in Output (b) has a logical error. "
     "The `if` statement is checking whether `x > y` is true, and if it is, then it sets `y =", "direct", None, LINE,
     "2", "no_score", "'Output (b) is incorrect' does not choose (b)"),
    ("ChatGPT-0301/CoT Neighbor#27 ba", "The instruction asks for the classification of a given code as either correct "
     "or incorrect. Output (a) simply states \"Correct\" without any further explanation or justification, while Output "
     "(b) provides a code block that is unrelated to the given code. Therefore, Output (a) does not precisely execute "
     "the instruction, and Output (b) contains more than what the instruction asks for. \n\nTherefore, neither Output "
     "(a) nor Output (b) is better.", "cot", None, BETTER, "2", "no_score", "'neither Output (a) nor Output (b) is "
     "better' is an abstention"),
    ("LLaMA2/CoT GPTInst#82 ba", "I cannot provide a decision on this question as it goes against ethical and moral "
     "principles. [...]\n\nTherefore, I cannot claim that either Output (a) or Output (b) is better, as both outputs do "
     "not meet ethical standards.", "cot", None, BETTER, "2", "no_score", "a refusal naming both outputs"),
    ("ChatGPT/CoT GPTInst#51 ba", "In evaluating the two outputs, both Output (a) and Output (b) address the "
     "instruction [...] during the night. However, Output (a) is better for several reasons. [...] It also lacks "
     "specific suggestions for the shop to implement.\n\nTherefore, Output (a)", "cot", "length", BETTER, "1",
     "truncated", "cut off at max_tokens: the judge never wrote its final sentence (upstream read a middle one)"),
    ("ChatGPT/Swap_CoT Manual#6 ba", "[...] Considering the evaluation criteria, Output (b) is better. It provides a "
     "more detailed and comprehensive response [...]. Therefore, Output (b) is better", "cot", "length", BETTER, "2",
     "truncated", "cut off at max_tokens (evalign's rule for every judge: the final word may be missing)"),
    ("Falcon/Metrics Natural#62 ba", "# Output (a) is better.", "direct", None, LINE, None, "A",
     "a markdown heading around the answer; upstream's regex needs the line to start with 'Output'"),
    ("LLaMA2/CoT Manual#2 ab", "The instruction asked for three extremely niche groups of consumers. [...] The third "
     "group is also a distinctive collection that is unlikely to overlap with other groups.\n\nTherefore, Output (b)",
     "cot", None, BETTER, None, "B", "the concluding 'Therefore, Output (b)' ends the text (no finish reason was "
     "recorded for the HF-run judges); upstream needs 'is better.'"),
    # agreements in formats upstream reads too
    ("ChatGPT-0301/Vanilla_2shot GPTInst#50 ba", "Output (a) (as it is tailored to the specific notes)", "direct", None,
     LINE, "1", "A", "an aside after the answer"),
    ("ChatGPT-0301/Vanilla_2shot GPTOut#29 ba", "Output (b) (2)", "direct", None, LINE, "2", "B", "an aside"),
    ("exact answer", "Output (b)", "direct", None, LINE, "2", "B", "the format asked for"),
    ("exact answer with a stop token", "Output (a).</s>", "direct", None, LINE, "1", "A", "the stop token is dropped"),
    ("CoT format", "Output (a) lists two facts. Output (b) lists three, as asked.\n\nTherefore, Output (b) is better.",
     "cot", None, BETTER, "2", "B", "the format asked for"),
    ("CoT comparative", "Both are short. Output (a) is better than Output (b) because it answers.", "cot", None, BETTER,
     "1", "A", "'better than Output (b)' is not a claim for (b)"),
    ("quoted prompt format", 'I must end with "Therefore, Output (a) is better." or "Therefore, Output (b) is better."',
     "cot", None, BETTER, "1", "no_score", "the prompt's format quoted back is no verdict"),
    ("empty", "", "direct", None, LINE, None, "empty", "an empty completion (e.g. a content filter)"),
]


@pytest.mark.parametrize(("case", "text", "style", "finish", "regexes", "upstream", "expected", "why"), REAL,
                         ids=[r[0] for r in REAL])
def test_real_texts(case: str, text: str, style: str, finish: str | None, regexes: dict[str, str],
                    upstream: str | None, expected: str, why: str) -> None:
    assert parse_upstream(text, regexes) == upstream
    r = parse_llmbar(text, finish, style=style)
    if expected in ("A", "B"):
        assert r.ok and r.verdict == expected, (r, why)
        assert r.position is not None and text.strip()[r.position:].startswith("Output (")
    else:
        assert not r.ok and r.reason == expected, (r, why)


def test_styles_and_strategies() -> None:
    assert set(STRATEGY_STYLE.values()) == set(STYLES)
    assert STRATEGY_STYLE["CoT"] == "cot" and STRATEGY_STYLE["Vanilla"] == "direct"
    with pytest.raises(ValueError, match="style"):
        parse_llmbar("Output (a)", style="json")
    # a cot text given as direct: the opening answer decides; as cot: the concluding claim
    text = "Output (a) is better.\n\nOn reflection, Output (a) misses the point.\n\nTherefore, Output (b) is better."
    assert parse_llmbar(text, style="direct").verdict == "A"
    assert parse_llmbar(text, style="cot").verdict == "B"


def test_lines_echoed_from_the_prompt_are_masked() -> None:
    prompt = ("# Instruction:\nName a fruit.\n\n# Output (a):\nApple. Output (a) is better than anything else here.\n\n"
              "# Output (b):\nCarrot.\n\n# Which is better, Output (a) or Output (b)?")
    text = "Apple. Output (a) is better than anything else here.\n\nOutput (b) is better."
    assert parse_llmbar(text, style="cot").reason == "conflicting"
    r = parse_llmbar(text, style="cot", prompt=prompt)
    assert r.verdict == "B"
    # the answer itself also occurs in the prompt: short lines are never masked
    assert parse_llmbar("Output (a)", style="direct", prompt=prompt).verdict == "A"
    assert parse_llmbar("Output (a) is better.", style="cot", prompt=prompt + " Output (a) is better.").verdict == "A"


@pytest.fixture(scope="module")
def released_texts() -> list[dict[str, object]]:
    data = Path(os.environ.get("EVALIGN_DATA_DIR", str(Path(__file__).resolve().parents[3] / "shared" / "data")))
    if not (data / "llmbar" / "evaluators").is_dir():
        pytest.fail(f"the LLMBar evaluator outputs are missing: expected them in {data}/llmbar/evaluators")
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import llmbar_parser
    finally:
        sys.path.remove(str(BENCHMARKS))
    texts = llmbar_parser.load_texts(data)
    # each template's parser as the llmbar judge reads its calls
    assert [llmbar_parser.template_style(s, syn) for s, syn in
            (("Vanilla", False), ("CoT", False), ("Metrics_Reference", False), ("Swap", False), ("Swap", True),
             ("Swap_CoT", True), ("Vanilla_2shot", False))] == ["direct", "cot", "direct", "cot", "direct", "cot",
                                                                 "direct"]
    for i, (t, r) in enumerate(zip(texts, llmbar_parser.parse_all(texts), strict=True)):
        if i % 97 == 0:  # the judge reads a call as parse_llmbar reads the text in the template's format
            assert r == parse_llmbar(t["text"], t["finish"], style=t["style"])
        t["evalign"], t["reason"] = r.verdict, r.reason
        t["category"] = llmbar_parser.category(t, r.verdict, r.reason, r.position)
    return texts


#: every category of disagreement and why evalign is right
WHY = {
    "different verdict: evalign reads the opening answer (B); upstream's line-start regex for (a) matched a later sentence":
        "the text opens with its answer; a later line that starts 'Output (a) ...' describes (a)",
    "different verdict: evalign reads the concluding claim (B); upstream's line-start regex for (a) matched an earlier sentence":
        "PaLM2's CoT texts: a description line 'Output (a) ...' is no verdict; the concluding claim is",
    "different verdict: evalign reads the concluding claim (B); upstream's 'is better' regex for (a) matched an earlier sentence":
        "a reported ('Assistant (a) argues that Output (a) is better'), conditional or partial claim is no verdict",
    "different verdict: evalign reads the concluding claim (B); upstream's 'is better' regex for (a) matched a later sentence":
        "the concluding 'Therefore, Output (b) is better.' comes before the judge recounts the debate",
    "different verdict: evalign reads the concluding claim (A); upstream's line-start regex for (b) matched an earlier sentence":
        "PaLM2 opens with a description of (b) or contradicts itself; the concluding claim is the verdict",
    "upstream reads A, evalign unscored (truncated)": "cut off at max_tokens",
    "upstream reads B, evalign unscored (truncated)": "cut off at max_tokens",
    "upstream reads A, evalign unscored (conflicting)": "claims for both outputs and no concluding one",
    "upstream reads A, evalign unscored (no_score)": "answers to the metric questions ('Output (a): Yes'), no verdict",
    "upstream reads B, evalign unscored (no_score)": "a refusal / 'neither ... is better' / 'Output (b) is incorrect'",
    "evalign reads B, upstream none": "the text ends with the concluding 'Therefore, Output (b)'",
    "evalign reads A, upstream none": "'# Output (a) is better.': markdown around the answer",
}


def test_every_disagreement_with_upstream_is_in_the_table(released_texts: list[dict[str, object]]) -> None:
    texts = released_texts
    assert len(texts) == 56_060
    # upstream's regexes of the final stage reproduce upstream's winners (so the comparison is fair)
    for t in texts[::97]:
        w = parse_upstream(t["text"], t["parsing"])  # type: ignore[arg-type]
        assert ({"1": "A", "2": "B"}.get(w) if w else None) == t["upstream"]
    found = {(t["set"], t["evaluator"], t["strategy"], str(t["index"]), t["order"]):
             (t["upstream"] or "", t["evalign"] or "", t["reason"] or "", t["category"])
             for t in texts if t["evalign"] != t["upstream"]}
    with TABLE.open(encoding="utf-8") as fh:
        listed = {(r["set"], r["evaluator"], r["strategy"], r["index"], r["order"]):
                  (r["upstream"], r["evalign"], r["reason"], r["category"]) for r in csv.DictReader(fh)}
    assert found == listed
    assert set(Counter(v[3] for v in listed.values())) <= set(WHY)
    # the agreement figures (benchmarks/llmbar_parser.py prints them): 55,780 of 56,060 = 99.50%
    assert sum(t["evalign"] == t["upstream"] for t in texts) == 55_780
    assert Counter(v[3] for v in listed.values()).most_common(3) == [
        ("different verdict: evalign reads the opening answer (B); upstream's line-start regex for (a) matched a "
         "later sentence", 144),
        ("different verdict: evalign reads the concluding claim (B); upstream's line-start regex for (a) matched an "
         "earlier sentence", 69),
        ("different verdict: evalign reads the concluding claim (B); upstream's 'is better' regex for (a) matched an "
         "earlier sentence", 45),
    ]
    # evalign never reads a verdict from a text where upstream's regexes found none, except the listed ones
    assert sum(1 for v in listed.values() if not v[0]) == 4


def test_smollm2_phrasings_are_claims() -> None:
    """What SmolLM2-135M-Instruct answers to the Vanilla prompt (seen through llama.cpp): a claim with
    "indeed", before the other output is named, is a verdict; negated, it is not."""
    assert parse_llmbar("Output (a) is indeed better than Output (b).", style="direct").value == "A"
    assert parse_llmbar("Output (b) is indeed the better option.", style="direct").value == "B"
    assert parse_llmbar("Output (b) is not indeed better.", style="direct").value is None


def test_a_direct_answer_complete_before_the_cut_is_read() -> None:
    """Issue 32: "Output (a) is better than Output (b). The sound of ..." cut at max_tokens is (a), as
    upstream reads it (the answer comes first); a cut before the answer is whole, or a cut CoT text,
    stays truncated."""
    r = parse_llmbar("Output (a) is better than Output (b). The sound of", "length", style="direct")
    assert r.ok and r.verdict == "A" and r.cut and r.position == 0
    assert parse_llmbar("Output (b)\n\nOutput (b) answers the question because", "length").verdict == "B"
    for text, style in (("Output (a) is", "direct"), ("Output (", "direct"), ("", "direct"),
                        ("Output (a) is better. Therefore, Output (b)", "cot")):
        cut = parse_llmbar(text, "length", style=style)
        assert not cut.ok and cut.reason == "truncated" and not cut.cut, text
    assert not parse_llmbar("Output (a) is better.", "stop").cut
