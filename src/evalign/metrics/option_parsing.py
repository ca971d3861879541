"""``metric.key=value`` option texts (the command line's ``--option``), parsed and checked through
each metric's declared option types (:mod:`evalign.metrics.options`)."""

from __future__ import annotations

import json

from evalign.errors import UsageError, did_you_mean, unknown_name
from evalign.metrics.base import metric_class


def parse_all_options(options: list[str], metrics: list[str], no_cache: bool) -> dict[str, dict[str, object]]:
    """The ``--option metric.key=value`` options, per metric of ``metrics``, parsed and checked
    through each metric's declared option types (``option_types``): an option of a metric that is
    not among ``metrics``, an unknown key or a value of the wrong type or range is a
    :class:`UsageError` naming the option. Metrics without declarations get JSON-parsed values."""
    out: dict[str, dict[str, object]] = {m: {} for m in metrics}
    classes = {m: metric_class(m) for m in metrics}  # unknown metric names fail here
    for opt in options:
        lhs, sep, value = opt.partition("=")
        name, dot, key = lhs.strip().partition(".")
        if not sep or not dot or not name or not key:
            raise UsageError(f"--option '{opt}': expected metric.key=value, e.g. chrf.char_order=4")
        if name not in out:
            hint = did_you_mean(name, metrics)
            raise UsageError(f"--option '{opt}': metric '{name}' is not scored in this run{hint} (add -m {name})")
        specs = classes[name].option_types
        where = f"--option {name}.{key}"
        if specs:
            if key not in specs or not specs[key].cli:
                raise unknown_name("option", key, [k for k, v in specs.items() if v.cli], where=f"--option {name}.{key}")
            parsed = specs[key].parse(value, where)
        else:
            try:
                parsed = json.loads(value)
            except json.JSONDecodeError:
                parsed = value
        if key in out[name]:
            raise UsageError(f"{where}: given twice")
        out[name][key] = parsed
    for m, cls in classes.items():
        if no_cache and cls.uses_cache:
            out[m]["use_cache"] = False
    return out


def parse_options(options: list[str], metric: str, no_cache: bool) -> dict[str, object]:
    """Options ``metric.key=value`` that apply to ``metric`` (parsed and checked as by
    :func:`parse_all_options`; options of other metrics are left for them)."""
    mine = [o for o in options if o.partition("=")[0].strip().partition(".")[0] == metric or "." not in o.partition("=")[0]]
    return parse_all_options(mine, [metric], no_cache)[metric]
