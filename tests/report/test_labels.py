"""Task labels that differ only in case or punctuation are merged, and every merge is listed."""

from __future__ import annotations

from evalign.report.data import label_key, merge_labels


def test_merge_labels_keeps_the_most_frequent_spelling() -> None:
    values = ["Yelp"] * 3 + ["yelp"] * 2 + ["(Wolfram alpha)?"] * 4 + ["Wolfram alpha"] * 1 + ["IMDB", None]
    mapping, lines = merge_labels(values)
    assert mapping == {"yelp": "Yelp", "Wolfram alpha": "(Wolfram alpha)?"}
    assert len(lines) == 2
    assert "'Yelp' (3), 'yelp' (2) -> 'Yelp'" in lines[0]
    assert "-> '(Wolfram alpha)?'" in lines[1]
    assert merge_labels(["a", "b", "A-B"]) == ({}, [])  # "a-b" is not "a" or "b"
    assert label_key("  Google   Docs!") == "google docs" and label_key("https://cohere.ai/") == "https cohere ai"


def test_report_cli_merges_task_labels(tmp_path) -> None:
    from typer.testing import CliRunner

    from evalign.cli import app

    out = tmp_path / "r.html"
    res = CliRunner().invoke(app, ["report", "--dataset", "pandalm", "-m", "rouge_l", "--bootstrap", "20",
                                   "-o", str(out)])
    assert res.exit_code == 0, res.output
    page = out.read_text(encoding="utf-8")
    assert "task labels merged (case and punctuation ignored): &#x27;Yelp&#x27; (23), &#x27;yelp&#x27; (10)" in page
    md = (tmp_path / "r_files" / "tables" / "by_task.md").read_text(encoding="utf-8")
    assert "| Yelp |" in md and "| yelp |" not in md
