"""Fine-tuning a judge on Feedback-Collection-style data (``evalign train-judge``) and checking it
against labels before trusting it (:func:`verify_judges`).

Needs the ``train`` extra (trl, peft, datasets) and the ``models`` extra (torch, transformers); they are
imported only when training starts, so ``import evalign.train`` stays light.
"""

from __future__ import annotations

from evalign.train.data import FALLBACK_CHAT_TEMPLATE, Example, read_examples
from evalign.train.settings import TrainSettings
from evalign.train.sft import SIGNATURE_FILE, TrainResult, build_trainer, latest_checkpoint, train_judge

__all__ = [
    "FALLBACK_CHAT_TEMPLATE",
    "SIGNATURE_FILE",
    "Example",
    "TrainResult",
    "TrainSettings",
    "build_trainer",
    "latest_checkpoint",
    "read_examples",
    "train_judge",
]
