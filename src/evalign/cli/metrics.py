"""``evalign metrics``: list the registered metrics."""

from __future__ import annotations

import typer

from evalign.cli.common import AS_JSON, emit_json, print_table
from evalign.metrics.base import list_metrics


def metrics_cmd(
    as_json: bool = AS_JSON,
    options: bool = typer.Option(False, "--options", help="List each metric's options (for --option metric.key=value)."),
) -> None:
    """List the metrics evalign knows, with their direction, default options and description (or their options)."""
    import pandas as pd  # a table to print: not at `evalign metrics --help`

    if options:
        rows = [
            {"metric": m.name, "option": k, "values": spec.describe(), "help": spec.help}
            for m in list_metrics()
            for k, spec in m.option_types.items()
            if spec.cli
        ]
        if as_json:
            emit_json(rows)
        else:
            print_table(pd.DataFrame(rows), title="Metric options (--option metric.key=value)")
        return
    rows = [
        {"metric": m.name, "higher_is_better": m.higher_is_better,
         "defaults": ", ".join(f"{k}={v}" for k, v in m.defaults.items()), "description": m.description}
        for m in list_metrics()
    ]
    if as_json:
        emit_json(rows)
    else:
        print_table(pd.DataFrame(rows), title="Metrics")


def register(app: typer.Typer) -> None:
    """Add ``metrics`` to ``app``."""
    app.command("metrics")(metrics_cmd)
