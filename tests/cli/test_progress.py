"""Progress on stderr: each stage its own bar and timer, every bar ending at 100%; the Hugging Face
libraries' own bars (transformers' "Loading weights") stay off under the command line."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from evalign.cli.common import Stages

SCRIPT = """
import sys
if sys.argv[1] == "cli":
    import evalign.cli.common  # noqa: F401  (what every evalign verb imports first)
import pandas as pd
from evalign.backends.models import bundled_minilm_path
from evalign.metrics.base import get_metric
from evalign.scoring import score
m = get_metric("semscore", model=bundled_minilm_path(), use_cache=False)
df = pd.DataFrame({"id": ["1"], "system": ["s"], "instruction": ["a"], "response": ["x y"], "reference": ["x"]})
print(score(df, [m])[0][m.column].round(3).tolist())
"""


def test_stages_finish_at_100_percent_with_their_own_timers() -> None:
    with Stages() as st:
        st.start("bleu texts", total=10)
        st.update(3)
        first = st._task
        time.sleep(0.05)
        st.start("semscore texts", total=4)
        second = st._task
        st.update(1)
        st.start("semscore texts", total=4)  # the same stage again: not restarted
        assert st._task == second
        st.start("resampling")  # no total: a moving bar
        third = st._task
        tasks = {t.id: t for t in st.bar.tasks}
        assert tasks[first].completed == tasks[first].total == 10 and tasks[first].finished
        assert tasks[second].completed == 4 and tasks[second].finished
        assert tasks[third].total is None and not tasks[third].finished
        assert tasks[second].start_time >= tasks[first].start_time + 0.05  # its own timer
    tasks = {t.id: t for t in st.bar.tasks}
    assert tasks[third].finished and tasks[third].completed == tasks[third].total == 1
    assert all(t.finished for t in st.bar.tasks)


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, env=env,
                          timeout=300, check=True)


def test_transformers_loading_bar_is_silenced_under_the_cli() -> None:
    plain = _run("plain")
    assert "Loading weights" in plain.stderr  # the bar the test guards against exists
    cli = _run("cli")
    assert "Loading weights" not in cli.stderr and "%|" not in cli.stderr
    assert cli.stdout == plain.stdout  # same scores
