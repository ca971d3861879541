"""Finding dataset files that are not bundled with evalign (too large, or licence not checked).

The search order for a set stored in folder ``<folder>`` is: the ``data_dir`` argument, the
environment variable ``EVALIGN_DATA_DIR``, then ``shared/data`` beside the source checkout.
``data_dir`` may be the root that holds the set folders (``<data_dir>/<folder>/...``) or the set
folder itself.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from evalign.errors import EvalignError

ENV_VAR = "EVALIGN_DATA_DIR"


def _checkout_data_root() -> Path:
    # src/evalign/datasets/_external.py -> parents[3] is the repository root
    return Path(__file__).resolve().parents[3].parent / "shared" / "data"


def find_set_dir(folder: str, required: Sequence[str], data_dir: str | Path | None, *, where: str) -> Path:
    """The folder that holds all ``required`` files (paths relative to the set folder).

    ``where`` says where to get the files; it is put into the error raised when they are missing.
    """
    candidates: list[Path] = []
    if data_dir is not None:
        candidates += [Path(data_dir) / folder, Path(data_dir)]
    elif os.environ.get(ENV_VAR):
        root = Path(os.environ[ENV_VAR])
        candidates += [root / folder, root]
    else:
        candidates.append(_checkout_data_root() / folder)
    for c in candidates:
        if all((c / r).is_file() for r in required):
            return c
    looked = ", ".join(str(c) for c in candidates)
    raise EvalignError(
        f"dataset files not found (looked in {looked}; need {', '.join(required)}). "
        f"Get them from {where}, put them in <DIR>/{folder}/ and pass data_dir=<DIR> "
        f"or set {ENV_VAR}=<DIR>."
    )
