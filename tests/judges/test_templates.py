"""Every built-in template against its source: the papers' texts in shared/reference/PAPER_PROMPTS.md
(rendered and compared whitespace-normalised) or prometheus-eval's prompts.py at a fixed commit (SHA-256
of the whitespace-normalised upstream text, computed from the upstream file)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from evalign.errors import EvalignError, InputError
from evalign.judges import get_judge, list_templates, load_template

PAPER = Path(__file__).resolve().parents[2] / ".." / "shared" / "reference" / "PAPER_PROMPTS.md"
if not PAPER.exists():  # the shared folder seen from the main checkout
    PAPER = Path("/work/shared/reference/PAPER_PROMPTS.md")


def norm(text: str) -> str:
    return " ".join(text.split())


def paper_block(number: int) -> str:
    """The ```text block of section ``number`` of PAPER_PROMPTS.md."""
    md = PAPER.read_text(encoding="utf-8")
    section = re.split(r"^## ", md, flags=re.M)[number]
    m = re.search(r"```text\n(.*?)```", section, re.S)
    assert m is not None
    return m.group(1)


def sha(text: str) -> str:
    return hashlib.sha256(norm(text).encode()).hexdigest()


INS, RESP, GOLD = "Name a prime number.\n\nBetween 10 and 20.", "13 is prime.", "11"


def test_geval_is_semscore_appendix_a3() -> None:
    paper = paper_block(1).replace("{{Instruction}}", INS).replace("{{Output}}", RESP)
    judge = get_judge("geval")
    row = {"instruction": "Name a prime number.", "input": "Between 10 and 20.", "response": RESP}
    msgs = judge.prompts(row, None, False)[0][1]
    assert [m["role"] for m in msgs] == ["user"]
    assert norm(msgs[0]["content"]) == norm(paper)
    assert judge.higher_is_better is False and judge.scale == (1, 4)
    assert not load_template("geval").has_reference
    with pytest.raises(EvalignError, match="no reference variant"):
        load_template("geval").text(True)


def _figure6() -> tuple[str, str]:
    block = paper_block(2)
    system = re.search(r'system_message = """(.*?)"""', block, re.S).group(1)  # type: ignore[union-attr]
    user = re.search(r'user_message = """(.*?)"""', block, re.S).group(1)  # type: ignore[union-attr]
    return system, user


@pytest.mark.parametrize("gold", [True, False])
def test_criteria_is_figure_6(gold: bool) -> None:
    system, user = _figure6()
    if not gold:  # the paper: drop the '[Gold Answer]' line and the '***' after it
        lines = user.split("\n")
        i = next(k for k, line in enumerate(lines) if line.startswith("[Gold Answer]"))
        assert lines[i + 1] == "***"
        user = "\n".join(lines[:i] + lines[i + 2 :])
    paper_user = user.format(prompt=INS, response=RESP, gold_answer=GOLD)
    judge = get_judge("criteria", reference=gold)
    row = {"instruction": "Name a prime number.", "input": "Between 10 and 20.", "response": RESP, "reference": GOLD}
    msgs = judge.prompts(row, None, gold)[0][1]
    assert msgs[0] == {"role": "system", "content": system}
    assert norm(msgs[1]["content"]) == norm(paper_user)


def test_criteria_shows_all_gold_answers() -> None:
    judge = get_judge("criteria")
    row = {"instruction": "Name a prime.", "response": "7", "reference": ["2", "3", "5"]}
    text = judge.prompts(row, None, True)[0][1][1]["content"]
    assert "correct alternatives): \n- 2\n- 3\n- 5\n***" in text


# SHA-256 of the whitespace-normalised strings of prometheus-eval's libs/prometheus-eval/prometheus_eval/prompts.py,
# computed from the upstream git history (commit dcfb442: current; 485d2b4: June 2024).
UPSTREAM = {
    ("prometheus_relative", True): "252d92aec6645065ff3518a92eb42436c3e83202b0deeb478278db07c62a53cc",
    ("prometheus_relative", False): "bf484e1ac7670243fa4bfd9adb7252e674e9726c07852260fa907224c9d97934",
    ("prometheus_relative_2024_06", True): "3755e54349c2dac03e1e9c425a00fdca535a13684f7695d88e9b62e38bbca6a9",
    ("prometheus_relative_2024_06", False): "e57ff42c5b31844640b099064ea1e365647044f2ff680281c07309b3d1fa1cae",
    ("prometheus_absolute", True): "b4e60191b8be10b2bedff41a79b3caa48a4174f786d42690112a0bd8caab2332",
    ("prometheus_absolute", False): "14d066878580e32f827a44f17eeb8a321935b8bb7869dd1a339088c093b34aa4",
}
UPSTREAM_SYSTEM = {
    "prometheus_relative": "2d7f53af02b6a37c5701ed6a821289874a82615c0a6af9d181dc465b2fb5df20",
    "prometheus_relative_2024_06": "2d7f53af02b6a37c5701ed6a821289874a82615c0a6af9d181dc465b2fb5df20",
    "prometheus_absolute": "526b5b77a2d7eeaf33b21720197b6be536710d867d22cb468b0fb8f6022b62ab",
}


@pytest.mark.parametrize(("name", "reference"), sorted(UPSTREAM))
def test_prometheus_templates_match_upstream(name: str, reference: bool) -> None:
    t = load_template(name)
    assert sha(t.text(reference)) == UPSTREAM[(name, reference)]
    assert sha(t.system) == UPSTREAM_SYSTEM[name]


def test_relative_dcfb442_wording() -> None:
    t = load_template("prometheus_relative").text(False)
    assert "2. Make comparisons between Response A, Response B, and the Reference Answer." in t
    assert '4. The output format should look as follows: "Feedback: (write a feedback for criteria) [RESULT] (Either "A" or "B")"' in t
    assert t.endswith("###Feedback: ")


def test_every_template_names_its_source_and_test() -> None:
    """Each template file's header names its source and the test that checks it; ``source`` is set."""
    from evalign.judges.prompts import _data_dir

    for name in list_templates():
        path = _data_dir("templates") / f"{name}.yaml"
        head = path.read_text(encoding="utf-8").split("\nname:")[0]
        assert head.startswith("#") and "# Source:" in head and "# Test:" in head, name
        assert load_template(name).source, name


@pytest.mark.parametrize("reference", [True, False])
def test_tie_template_differs_from_june_2024_only_by_tie(reference: bool) -> None:
    tie = load_template("prometheus_relative_tie").text(reference)
    old = load_template("prometheus_relative_2024_06").text(reference)
    assert tie.replace(", or TIE if neither is better", "").replace("(A, B or TIE)", "(A or B)") == old


FEW_SHOT = """name: my_few_shot
version: 1
mode: relative
system: Judge well.
shots:
- role: user
  content: "Which is better? {instruction} A: 1 B: 2"
- role: assistant
  content: "[RESULT] A"
with_reference: null
without_reference: "{instruction} A: {response_A} B: {response_B} [RESULT]"
"""


def test_a_template_file_with_shots(tmp_path: Path) -> None:
    """``shots``: example turns between the system prompt and the filled prompt, sent verbatim."""
    path = tmp_path / "few.yaml"
    path.write_text(FEW_SHOT, encoding="utf-8")
    t = load_template(path)
    assert t.render(False, {"instruction": "Add.", "response_A": "x", "response_B": "y"}) == [
        {"role": "system", "content": "Judge well."},
        {"role": "user", "content": "Which is better? {instruction} A: 1 B: 2"},
        {"role": "assistant", "content": "[RESULT] A"},
        {"role": "user", "content": "Add. A: x B: y [RESULT]"},
    ]
    without = tmp_path / "zero.yaml"
    without.write_text(FEW_SHOT.split("shots:")[0] + FEW_SHOT.split("[RESULT] A\"\n")[1], encoding="utf-8")
    assert load_template(without).shots == () and load_template(without).hash(False) != t.hash(False)
    # a training row holds one prompt: the examples cannot be written into it, so it is refused
    fields = {"instruction": "Add.", "response_A": "x", "response_B": "y"}
    assert load_template(without).render_single_turn(False, fields) == ("Judge well.", "Add. A: x B: y [RESULT]")
    with pytest.raises(EvalignError, match="template 'my_few_shot' has example turns"):
        t.render_single_turn(False, fields)


@pytest.mark.parametrize(
    ("shots", "field", "message"),
    [
        ("shots: Output (a)\n", "shots", "non-empty list"),
        ("shots: []\n", "shots", "non-empty list"),
        ("shots:\n- Output (a)\n", "shots[0]", "exactly 'role' and 'content'"),
        ("shots:\n- {role: user, content: q, name: x}\n", "shots[0]", "exactly 'role' and 'content'"),
        ("shots:\n- {role: assistant, content: a}\n", "shots[0].role", "must be 'user'"),
        ("shots:\n- {role: user, content: q}\n- {role: user, content: q}\n", "shots[1].role", "must be 'assistant'"),
        ("shots:\n- {role: user, content: [q]}\n- {role: assistant, content: a}\n", "shots[0].content", "string"),
        ("shots:\n- {role: user, content: q}\n", "shots", "end with an assistant turn"),
    ],
)
def test_bad_shots_name_file_and_field(tmp_path: Path, shots: str, field: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(FEW_SHOT.split("shots:")[0] + shots + "with_reference: null\nwithout_reference: p\n",
                    encoding="utf-8")
    with pytest.raises(InputError, match=message) as info:
        load_template(path)
    assert info.value.file == str(path) and info.value.field == field


def test_a_template_is_validated_when_it_loads_and_fits_its_judge(tmp_path: Path) -> None:
    """Issue 32: every field checked at load (file, field, what is expected); a judge refuses a template
    whose prompts never show the responses it judges."""
    import yaml

    from evalign.errors import InputError, UsageError
    from evalign.judges import get_judge, load_template
    from evalign.judges.prompts import TEMPLATES

    good = yaml.safe_load(Path(TEMPLATES.get("llmbar_vanilla")).read_text(encoding="utf-8"))
    for change, field in (({"version": True}, "version"), ({"sampling": {"top_p": 2}}, "sampling.top_p"),
                          ({"without_reference": None}, "without_reference"), ({"system": "{rubrik}"}, "system")):
        path = tmp_path / "t.yaml"
        path.write_text(yaml.safe_dump({**good, **change}), encoding="utf-8")
        with pytest.raises(InputError, match=f"field '{field}'"):
            load_template(path)
    with pytest.raises(UsageError, match=r"declares mode relative .* but the mode asked for is absolute"):
        get_judge("absolute", template="prometheus_relative")  # (refused by its mode before its placeholders)
    with pytest.raises(UsageError, match=r"temperature must be a number in \[0, 2\]"):
        get_judge("absolute", temperature=-1)
