"""A griffe extension for the API reference (``mkdocs.yml``): the docstrings' Sphinx roles
(``:func:`name```, ``:class:`~evalign.x.Y```) read as code in Markdown (`` `name` ``, `` `Y` ``)."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:func|class|mod|data|attr|meth|exc|obj|const|type):`~?([^`]+)`")


def plain_roles(text: str) -> str:
    """``text`` with every Sphinx cross-reference role as a code span (``~`` kept to the last name)."""
    return _ROLE.sub(lambda m: f"`{m.group(1)}`", text)


class SphinxRoles(griffe.Extension):
    """Rewrite each object's docstring with :func:`plain_roles` as griffe reads it."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
