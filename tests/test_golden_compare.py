"""The golden comparison tolerates floating-point noise between processors and nothing else."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from golden import compare
from golden.compare import _line_record, _record_matches, numbers_close, same_up_to_noise


def test_noise_in_the_last_digits_passes() -> None:
    assert same_up_to_noise('{"value": 0.3333333333333332}', '{"value": 0.3333333333333331}')
    assert same_up_to_noise('"semscore": 0.81234561', '"semscore": 0.81234562')
    assert numbers_close("0.33333333333333315", "0.33333333333333326")


def test_a_rounding_boundary_may_move_one_unit() -> None:
    assert same_up_to_noise("| 0.334 |", "| 0.333 |")
    assert not same_up_to_noise("| 0.335 |", "| 0.333 |")


def test_real_changes_fail() -> None:
    assert not same_up_to_noise("n = 80", "n = 81")  # integers exactly
    assert not same_up_to_noise('{"value": 0.5}', '{"value": 0.5001}')
    assert not same_up_to_noise('{"value": 0.3333333}', '{"value": 0.3334333}')
    assert not same_up_to_noise("rank 1 bleu", "rank 1 chrf")
    assert not same_up_to_noise("a 1 b 2", "a 1 b")
    assert not numbers_close("1e-3", "2e-3")


def test_hashed_line_records() -> None:
    line = '{"id": "q1", "semscore": 0.8123456123, "bleu": 12.5}'
    record = _line_record(line)
    assert record.split(" ")[1:] == ["0.8123456123", "12.5"]
    assert _record_matches(record, line.replace("0.8123456123", "0.8123456129"))
    assert not _record_matches(record, line.replace("0.8123456123", "0.8124456123"))
    assert not _record_matches(record, line.replace("12.5", "12.6"))
    assert not _record_matches(record, line.replace("q1", "q2"))
    # a float32 cosine moves by up to ~5e-7 between processors, and 1.0 may print as 0.9999999999999998
    assert _record_matches(record, line.replace("0.8123456123", "0.8123460123"))
    one = _line_record('{"semscore": 1.0}')
    assert _record_matches(one, '{"semscore": 0.9999999999999998}')
    assert not _record_matches(one, '{"semscore": 0.99999}')


def _png(values: np.ndarray, width: float = 4) -> bytes:
    import io

    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 3), dpi=100)
    fig.subplots().plot(values)
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def test_figures_compare_as_pixels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A figure drawn through values moved by float noise passes though its bytes differ; another
    figure of the same size fails and says where."""
    monkeypatch.setattr(compare, "GOLDEN_DIR", tmp_path)
    values = np.random.default_rng(0).random(200)
    monkeypatch.setattr(compare, "UPDATE", True)
    compare.check_image("fig.png", _png(values))
    monkeypatch.setattr(compare, "UPDATE", False)
    noisy = _png(values * (1 + 3e-8))
    compare.check_image("fig.png", noisy)
    with pytest.raises(AssertionError, match="the pixels differ"):
        compare.check_image("fig.png", _png(values[::-1]))
    with pytest.raises(AssertionError, match="pixels, the golden one"):
        compare.check_image("fig.png", _png(values, width=5))


def test_html_figures_are_masked() -> None:
    html = '<img src="data:image/png;base64,iVBORw0KGgo+/AAA=" alt="x">'
    assert compare.mask_html_figures(html) == '<img src="data:image/png;base64,<figure>" alt="x">'
