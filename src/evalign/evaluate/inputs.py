"""One input path: "a file or a dataset plus flags" -> the table to evaluate and its human labels.

:func:`load_inputs` takes one frozen :class:`InputSettings` (the file of scored items or a judged
pair table, a dataset ``NAME[:VARIANT]``, the field names, the human label flags) and returns
:class:`Inputs`: the item table (or the scored sides of the pairs), the pair table in the pair
path, the :class:`~evalign.evaluate.Human` labels, the source's name and the loaded dataset. It is
what ``evalign meta``, ``evalign report`` and ``evalign run`` read their data with.

The verbs differ in one thing, which settings decide between the item and the pair path, named by
:attr:`InputSettings.rule`:

- ``"flags"`` (``meta``): ``pref``, a pair-table ``file``, or a dataset whose own labels are
  preferences (when neither ``human`` nor ``system_human`` is given) choose the pair path; a
  ``file`` of items is then the scored sides of the pairs (a ``side`` column a/b).
- ``"tables"`` (``report``): ``human`` or ``system_human`` choose the item path; else a pair table
  at hand (``pairs_file``, a pair-table ``file``, the dataset's pairs when it has no items or when
  ``pref`` asks for them, or when ``file`` holds the pairs' sides) chooses the pair path.
- ``"labels"`` (``run``): the kind of the given ``labels``; else the dataset's own labels (its
  preference columns when ``file`` is a pair table); else a pair-table ``file``'s ``pref_*`` columns.

``label_set`` (``--labels NAME``, run configs' ``data.labels``) names one of the dataset's label sets
(:class:`~evalign.datasets.LabelSet`): its rating column or all its annotator columns, as ``human`` /
``pref`` would, in every rule. Preference columns that are a strict subset of the dataset's annotator
columns are kept, with a warning (:attr:`~evalign.evaluate.Human.warnings`) saying how many there are.

A condition of the inputs (no labels, no pair table, ...) is an :class:`InputsError` whose
:attr:`~InputsError.reason` names it, so that each verb words it in its own terms; an error raised
while the labels are chosen carries ``input_stage = "labels"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from evalign.datasets import HumanDataset, label_set, load_dataset_spec, pairs_to_items
from evalign.datasets.catalogue import subset_warning
from evalign.errors import EvalignError, InputError, UsageError
from evalign.evaluate.prepare import attach_labels, dataset_human, dataset_title
from evalign.evaluate.spec import Human
from evalign.io import detect_format, iter_records, read_items, read_pairs, read_system_human

__all__ = ["RULES", "InputSettings", "Inputs", "InputsError", "first_record", "load_inputs", "pref_candidates"]

#: how the item or the pair path is chosen (see the module doc)
RULES = ("flags", "tables", "labels")

#: :attr:`InputsError.reason` values and their default wording
REASONS = {
    "no_labels": "no human labels: give a rating column, system-level values, preference columns or a dataset",
    "no_pref_columns": "the pair table has no pref_* columns: name the preference columns",
    "no_pair_table": "no pair table (a file with response_a / response_b, or a dataset with pairs)",
    "file_not_pairs": "the file is not a pair table (needs response_a / response_b)",
    "not_sides": "expected the scored items of the pairs (a 'side' column a/b)",
    "no_item_table": "the dataset has no item table",
}


class InputsError(EvalignError):
    """The inputs lack what the evaluation needs; :attr:`reason` is a key of :data:`REASONS`."""

    def __init__(self, reason: str, message: str | None = None, *, dataset: str | None = None) -> None:
        self.reason = reason
        #: the dataset concerned, where there is one
        self.dataset = dataset
        super().__init__(message or REASONS[reason])


@dataclass(frozen=True)
class InputSettings:
    """Where the table and its labels come from (every field optional; see the module doc)."""

    #: scored items, or a (judged) pair table
    file: Path | None = None
    #: a registered dataset ``NAME`` or ``NAME:VARIANT``
    dataset: str | None = None
    #: the folder of dataset files that do not ship with evalign
    data_dir: Path | None = None
    #: field names of ``file`` (see :func:`evalign.io.read_items`)
    fields: Mapping[str, str] | None = None
    #: an item-level human rating column
    human: str | None = None
    #: a file of system-level human values
    system_human: Path | None = None
    #: whether lower values of ``human`` / ``system_human`` are better
    lower_is_better: bool = False
    #: annotator preference columns of the pair table
    pref: tuple[str, ...] = ()
    #: a separate pair table with the human preferences (rule ``"tables"``)
    pairs_file: Path | None = None
    #: labels given whole (rule ``"labels"``)
    labels: Human | None = None
    rule: str = "flags"
    #: score columns of ``file`` to rank: read as numbers (non-finite or text values are errors
    #: naming the line and the column)
    scores: tuple[str, ...] = ()
    #: one of the dataset's label sets by name (``--labels NAME``); not with ``human``, ``pref``,
    #: ``system_human`` or ``labels``
    label_set: str | None = None


@dataclass(frozen=True)
class Inputs:
    """The table to evaluate and its labels."""

    #: the item table, or the scored sides of the pairs (None only when nothing gives items)
    items: pd.DataFrame | None
    #: the pair table in the pair path, else None
    pairs: pd.DataFrame | None
    human: Human
    #: the data's name in messages: the file, or ``dataset NAME``
    source: str
    #: the dataset's display name (None without a dataset)
    dataset: str | None
    #: the loaded dataset (None without one)
    ds: HumanDataset | None


def first_record(path: Path) -> dict[str, Any]:
    """The first record of a table file ({} when it has none)."""
    for _, rec in iter_records(path, detect_format(path)):
        return dict(rec)
    return {}


def pref_candidates(pairs: pd.DataFrame) -> tuple[str, ...]:
    """A pair table's ``pref_*`` columns, in order (``pref_2`` before ``pref_10``)."""
    return tuple(sorted((c for c in pairs.columns if str(c).startswith("pref_")), key=lambda c: (len(c), c)))


def load_inputs(settings: InputSettings) -> Inputs:
    """The table and labels named by ``settings`` (see the module doc)."""
    s = settings
    if s.rule not in RULES:
        raise ValueError(f"rule must be one of {', '.join(RULES)}, not {s.rule!r}")
    if s.human and s.system_human is not None:  # one would be silently ignored
        raise UsageError("give either --human or --system-human, not both")
    if s.label_set is not None:
        s = _labelled(_with_label_set, s)
    if s.rule == "tables":
        return _by_tables(s)
    ds = load_dataset_spec(s.dataset, s.data_dir) if s.dataset else None
    file_pairs = s.file is not None and "response_a" in first_record(s.file)
    if s.rule == "labels":
        human = _labelled(_given_labels, s, ds, file_pairs)
        pair_path = human.kind == "pairs"
    else:
        pair_path = bool(s.pref) or file_pairs or (ds is not None and s.human is None and s.system_human is None
                                                   and _own_labels_are_pairs(ds))
        human = None if pair_path else _labelled(_item_labels, s, ds, strict=True)
    if pair_path:
        pairs = _pair_table(s, ds, file_pairs)
        if human is None:
            human = _labelled(_pref_labels, ds, s.pref, pairs)
        items = _sides(s, pairs, file_pairs)
    else:
        assert human is not None
        pairs = None
        items = _item_table(s, ds, human)
    source = str(s.file) if s.file is not None else f"dataset {ds.name}"  # type: ignore[union-attr]
    return Inputs(items, pairs, human, source, dataset_title(ds) if ds is not None else None, ds)


# ------------------------------------------------------------------------------------------------
# labels


def _labelled(choose: Any, *args: Any, **kwargs: Any) -> Any:
    """``choose(*args, **kwargs)``, an error raised on the way marked as the labels' stage."""
    try:
        return choose(*args, **kwargs)
    except EvalignError as e:
        e.input_stage = "labels"  # type: ignore[attr-defined]
        raise


def _with_label_set(s: InputSettings) -> InputSettings:
    """The settings with the label set ``s.label_set`` of the dataset turned into ``human`` / ``pref``
    (a system-level set: the dataset's system values, which those two left empty choose)."""
    given = [flag for flag, v in (("--human", s.human), ("--pref", s.pref), ("--system-human", s.system_human),
                                  ("meta.human", s.labels)) if v]
    if given:
        raise InputError(f"--labels picks the labels: not with {', '.join(given)}", field="labels")
    if not s.dataset:
        raise InputError("--labels names a label set of a dataset: give --dataset NAME (see `evalign datasets`)",
                         field="labels")
    ls = label_set(s.dataset, s.label_set or "")
    return replace(s, label_set=None, human=ls.column, pref=ls.pref)


def _own_labels_are_pairs(ds: HumanDataset) -> bool:
    """Whether a dataset's own labels are preferences (it has no item ratings or system values)."""
    return ds.items is None or (not ds.human_columns and not ds.system_human)


def _pref_labels(ds: HumanDataset | None, pref: tuple[str, ...], pairs: pd.DataFrame) -> Human:
    """Preference labels: ``pref``, else the dataset's preference columns, else the ``pref_*``
    columns of ``pairs``."""
    if pref:
        if ds is None:
            return Human(pref_columns=tuple(pref))
        warning = subset_warning(ds, pref)
        human = dataset_human(ds, pref=list(pref))
        return replace(human, warnings=(warning,)) if warning else human
    if ds is not None and ds.pref_columns:
        return dataset_human(ds, pref=list(ds.pref_columns))
    cands = pref_candidates(pairs)
    if not cands:
        raise InputsError("no_pref_columns")
    return Human(pref_columns=cands)


def _column_labels(s: InputSettings, ds: HumanDataset | None) -> Human:
    """The ``human`` column's labels: the dataset's when it has that column."""
    assert s.human is not None
    if ds is not None and ds.items is not None and s.human in ds.items.columns:
        return dataset_human(ds, column=s.human)
    return Human(column=s.human, higher_is_better=not s.lower_is_better)


def _item_labels(s: InputSettings, ds: HumanDataset | None, *, strict: bool) -> Human:
    """Item-path labels: ``system_human``, else the ``human`` column (``strict``: a dataset without
    a file must have it), else the dataset's own."""
    if s.system_human is not None:
        return Human(system=read_system_human(s.system_human), higher_is_better=not s.lower_is_better)
    if s.human:
        if strict and ds is not None and s.file is None:
            return dataset_human(ds, column=s.human)
        return _column_labels(s, ds)
    if ds is not None:
        return dataset_human(ds)
    raise InputsError("no_labels")


def _given_labels(s: InputSettings, ds: HumanDataset | None, file_pairs: bool) -> Human:
    """Rule ``"labels"``: the given labels, else the dataset's, else a pair file's ``pref_*``."""
    if s.labels is not None:
        return s.labels
    if ds is not None and s.pref:
        return _pref_labels(ds, s.pref, pd.DataFrame())
    if ds is not None and s.human:
        return dataset_human(ds, column=s.human)
    if ds is not None:
        return dataset_human(ds, pref=list(ds.pref_columns)) if file_pairs and ds.pref_columns else dataset_human(ds)
    if file_pairs:
        assert s.file is not None
        pref = pref_candidates(read_pairs(s.file))
        if not pref:
            raise InputsError("no_pref_columns")
        return Human(pref_columns=pref)
    raise InputsError("no_labels")


# ------------------------------------------------------------------------------------------------
# tables


def _pair_table(s: InputSettings, ds: HumanDataset | None, file_pairs: bool) -> pd.DataFrame:
    if file_pairs:
        assert s.file is not None
        return read_pairs(s.file)
    if s.file is not None and s.rule == "labels":  # the file must be the pair table itself
        raise InputsError("file_not_pairs")
    if ds is None or ds.pairs is None:
        raise InputsError("no_pair_table")
    return ds.pairs.copy()


def _sides(s: InputSettings, pairs: pd.DataFrame, file_pairs: bool) -> pd.DataFrame:
    """The item table of the pair path: a file of the pairs' scored sides, else both sides of each pair."""
    if s.file is None or file_pairs:
        return pairs_to_items(pairs)
    items = read_items(s.file, fields=s.fields)
    if "side" not in items.columns:
        raise InputsError("not_sides")
    return items


def _item_table(s: InputSettings, ds: HumanDataset | None, human: Human) -> pd.DataFrame:
    """The item table of the item path: the file (its labels joined from the dataset), else the dataset's."""
    if s.file is not None:
        items = read_items(s.file, fields=s.fields, human=[human.column] if human.column and ds is None else [],
                           scores=s.scores)
        return attach_labels(items, ds, human) if ds is not None else items
    assert ds is not None
    if ds.items is None:
        raise InputsError("no_item_table", dataset=ds.name)
    return ds.items.copy()


# ------------------------------------------------------------------------------------------------
# rule "tables"


def _by_tables(s: InputSettings) -> Inputs:
    """Rule ``"tables"``: the files are read first, and the tables at hand choose the path."""
    first = first_record(s.file) if s.file is not None else {}
    pairs = read_pairs(s.pairs_file) if s.pairs_file else None
    items: pd.DataFrame | None = None
    if "response_a" in first:  # a judged pair table
        pairs = read_pairs(s.file)  # type: ignore[arg-type]
    elif s.file is not None:
        items = read_items(s.file)
    ds = load_dataset_spec(s.dataset, s.data_dir) if s.dataset else None
    if ds is not None and s.file is None:
        if ds.items is not None and not s.pref:
            items = ds.items.copy()
        elif ds.pairs is not None:
            pairs = ds.pairs
    side_table = items is not None and "side" in items.columns
    human, pairs = _labelled(_table_labels, s, ds, pairs, side_table)
    if ds is not None and items is not None and human.kind == "item":
        items = attach_labels(items, ds, human)
    if human.kind == "pairs" and items is None:
        items = pairs_to_items(pairs)  # type: ignore[arg-type]
    source = str(s.file) if s.file is not None else f"dataset {ds.name}"  # type: ignore[union-attr]
    return Inputs(items, pairs if human.kind == "pairs" else None, human, source,
                  dataset_title(ds) if ds is not None else None, ds)


def _table_labels(s: InputSettings, ds: HumanDataset | None, pairs: pd.DataFrame | None,
                  side_table: bool) -> tuple[Human, pd.DataFrame | None]:
    """Rule ``"tables"``: the labels, and the pair table (the dataset's when preferences are chosen
    without one at hand)."""
    if s.human:
        return _column_labels(s, ds), pairs
    if s.system_human:
        return Human(system=read_system_human(s.system_human), higher_is_better=not s.lower_is_better), pairs
    if pairs is not None or (ds is not None and ds.pairs is not None and (side_table or ds.items is None)):
        if pairs is None:
            pairs = ds.pairs  # type: ignore[union-attr]
        return _pref_labels(ds, s.pref, pairs), pairs  # type: ignore[arg-type]
    if ds is not None:
        return dataset_human(ds), pairs
    raise InputsError("no_labels")
