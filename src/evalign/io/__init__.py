"""Reading and writing the item table.

The item table is a pandas DataFrame with one row per item x system and the columns
``id``, ``system``, ``instruction``, ``input``, ``reference`` (a string or a list of strings),
``response``, optional ``task`` and ``language``, human rating columns, and one column per
metric. Readers validate every row; an error names the file, the line (1-based; for CSV the
header is line 1; ``record N`` for the N-th element of a JSON list; ``row N`` for Parquet files
and DataFrames), the 1-based character column where it helps, and the field.

What the readers accept and how they decide:

* **Formats by suffix**: ``.jsonl`` / ``.json`` / ``.ndjson`` (one object per line, or one JSON
  list of objects, or one object holding the list, see below), ``.csv``, ``.tsv`` (tab-separated),
  ``.parquet`` / ``.pq``. ``-`` reads JSONL from standard input.
* **Text**: UTF-8 only; a UTF-8 byte-order mark is skipped; invalid UTF-8 is an error naming the
  line and column. A lone UTF-16 surrogate (e.g. the JSON escape ``"\\ud800"``) is not text and
  is **rejected** with its place: evalign never replaces characters silently.
* **A JSON object that holds the records** (``{"items": [{...}, ...]}``): when the whole file is
  one object, has none of the fields ``id``/``system``/``response``, and exactly one of its keys
  holds a list of objects, the records are read from that key (``attrs["json_key"]`` says which);
  with several such keys the error names them.
* **Missing is never a value**: ``null``, an empty CSV cell, a cell absent from a short CSV row,
  and NaN / ``pd.NA`` / ``None`` / ``NaT`` in a DataFrame are all *missing*; a required field that
  is missing is an error (or the row is skipped and counted with ``on_invalid="skip"``).
  Booleans are not numbers and numbers are not text.
* **Field mappings** (``fields={"response": "output"}``) read only the named source field: a
  record without ``output`` has a missing response even if it has a ``response`` field.

Writers are atomic: after an error, Ctrl-C or SIGTERM (the command line turns SIGTERM into an
exit) the output path holds either the old file or the complete new one. A new file gets the
permissions of the user's umask; an overwritten file keeps its mode. Errors name the output
path, never the temporary file. ``-`` writes JSONL to standard output.

Reading is bounded: a line (a JSONL record, a line of a CSV file) or a CSV cell longer than 64 MiB
(:data:`DEFAULT_MAX_LINE_BYTES`; the environment variable ``EVALIGN_MAX_LINE_BYTES`` sets another
limit) is an error naming the file and the line, never an unbounded read into memory. A JSON
document (one list over many lines) is read whole, its lines bounded the same way.
"""

from __future__ import annotations

from evalign.io.battle_table import BATTLE_REQUIRED, LineNumbers, read_battles
from evalign.io.overlap import OutputFolder, refuse_output_onto_inputs, same_file
from evalign.io.readers import (
    CORE_FIELDS,
    DEFAULT_MAX_LINE_BYTES,
    FORMATS,
    STDIO,
    TEXT_FIELDS,
    binary_stream,
    bounded_lines,
    check_text,
    check_value_text,
    complete_json_line,
    csv_value,
    decoded_lines,
    detect_format,
    is_missing,
    iter_csv,
    iter_frame,
    iter_records,
    json_loads,
    max_line_bytes,
    unbox,
)
from evalign.io.validation import (
    PAIR_REQUIRED,
    PAIR_TEXT_FIELDS,
    check_systems,
    parse_number,
    parse_preference,
    read_items,
    read_pairs,
    read_system_human,
    records_to_table,
    references_of,
    responses_of,
)
from evalign.io.writers import (
    atomic_path,
    check_output,
    json_default,
    json_safe,
    write_files_atomic,
    write_json_atomic,
    write_table,
    write_text_atomic,
)

__all__ = [
    "BATTLE_REQUIRED",
    "CORE_FIELDS",
    "DEFAULT_MAX_LINE_BYTES",
    "FORMATS",
    "PAIR_REQUIRED",
    "PAIR_TEXT_FIELDS",
    "STDIO",
    "TEXT_FIELDS",
    "LineNumbers",
    "OutputFolder",
    "atomic_path",
    "binary_stream",
    "bounded_lines",
    "check_output",
    "check_systems",
    "check_text",
    "check_value_text",
    "complete_json_line",
    "csv_value",
    "decoded_lines",
    "detect_format",
    "is_missing",
    "iter_csv",
    "iter_frame",
    "iter_records",
    "json_default",
    "json_loads",
    "json_safe",
    "max_line_bytes",
    "parse_number",
    "parse_preference",
    "read_battles",
    "read_items",
    "read_pairs",
    "read_system_human",
    "records_to_table",
    "references_of",
    "refuse_output_onto_inputs",
    "responses_of",
    "same_file",
    "unbox",
    "write_files_atomic",
    "write_json_atomic",
    "write_table",
    "write_text_atomic",
]
