"""Finding dataset files that are not bundled with evalign (too large, or licence not checked).

The search order for a set stored in folder ``<folder>`` is: the ``data_dir`` argument, else the
*default data folder* (:func:`default_data_dir`): the environment variable ``EVALIGN_DATA_DIR``,
else the user cache folder ``$XDG_CACHE_HOME/evalign/data`` (``~/.cache/evalign/data`` when
``XDG_CACHE_HOME`` is unset). Never a path relative to the source checkout.
``data_dir`` may be the root that holds the set folders (``<data_dir>/<folder>/...``) or the set
folder itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from evalign.errors import EvalignError

ENV_VAR = "EVALIGN_DATA_DIR"


def default_data_dir() -> Path:
    """The default data folder: ``$EVALIGN_DATA_DIR`` (made absolute against the current folder),
    else ``$XDG_CACHE_HOME/evalign/data``, else ``~/.cache/evalign/data``. It need not exist."""
    return cache_folder(ENV_VAR, "data")


def cache_folder(env_var: str, name: str) -> Path:
    """An evalign folder: ``$<env_var>`` (made absolute) when set, else ``$XDG_CACHE_HOME/evalign/<name>``,
    else ``~/.cache/evalign/<name>``. It need not exist."""
    env = os.environ.get(env_var, "").strip()
    if env:
        return Path(env).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "evalign" / name).absolute()


def find_set_dir(folder: str, required: Sequence[str], data_dir: str | Path | None, *, where: str) -> Path:
    """The folder that holds all ``required`` files (paths relative to the set folder).

    ``where`` says where to get the files; it is put into the error raised when they are missing.
    """
    root = Path(data_dir).expanduser() if data_dir is not None else default_data_dir()
    candidates = [root / folder, root]
    for c in candidates:
        if all((c / r).is_file() for r in required):
            return c
    looked = ", ".join(str(c) for c in candidates)
    raise EvalignError(
        f"dataset files not found (looked in {looked}; need {', '.join(required)}). "
        f"Get them from {where}, put them in <DIR>/{folder}/ and pass --data-dir <DIR> "
        f"(data_dir=<DIR> in Python) or set {ENV_VAR}=<DIR>."
    )
