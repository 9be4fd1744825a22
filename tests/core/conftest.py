"""The experimental ``NLIJudge`` is not in the package until a model ships: it lives in
``training/`` (``nli_judge.py``, ``nli_model.py``), and its tests here import it with
``training/`` on ``sys.path``, as the training scripts and ``benchmarks/nli.py`` do."""

from __future__ import annotations

import sys
from pathlib import Path

TRAINING = str(Path(__file__).resolve().parents[2] / "training")
if TRAINING not in sys.path:
    sys.path.append(TRAINING)
