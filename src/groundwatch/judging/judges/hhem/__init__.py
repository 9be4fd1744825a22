"""Vectara's HHEM-2.1-Open as a judge, without remote code, exact to its authors' ``predict``.

HHEM-2.1-Open (``vectara/hallucination_evaluation_model``, Apache-2.0) is a flan-t5-base
classifier that reads a (premise, hypothesis) pair and gives the probability that the premise
supports the hypothesis ("consistent"); its authors call a hypothesis hallucinated when that
probability is below 0.5. :mod:`._model` says how the model is built from the checkpoint's own
files on transformers 4.x and 5.x.

``HHEMJudge(model=...)`` runs it in the published way by default (``mode="answer"``): premise
= the retrieved passages joined by blank lines, hypothesis = the whole answer, the answer
hallucinated when its consistency is below 0.5 (the usage of HHEM's model card, its
leaderboard and its published evaluations, so their accuracy carries over). The claims are
then scored one by one against the same premise, only when the answer is hallucinated, to
show which claims the model backs least. ``mode="claims"`` scores each claim against the
passages and calls the answer hallucinated when any claim is below 0.5 (the answer's
consistency is then its least consistent claim's). The question is not read: HHEM takes two
texts. Verdicts, evidence and the rules-first option are the detector judges' shared ones
(:mod:`groundwatch.judging.judges._detectors._judge`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from ...._shared.model_calls import MODEL_CALLS
from .._detectors import ClaimReading, DetectorJudge, Reading
from ..local import LocalJudge
from ._model import CONSISTENT, FOUNDATION, PROMPT, OnnxHHEM, TorchHHEM, export_onnx

__all__ = [
    "CONSISTENT",
    "FOUNDATION",
    "MODES",
    "PROMPT",
    "THRESHOLD",
    "HHEMJudge",
    "export_onnx",
]

THRESHOLD = 0.5
"""The authors' decision threshold: consistent from 0.5 on, hallucinated below."""

MODES = ("answer", "claims")
"""``answer``: premise = the passages, hypothesis = the answer (published usage, default);
``claims``: each claim is a hypothesis, the answer hallucinated when any claim is."""

PREMISE_SEPARATOR = "\n\n"
"""Between two passages in the premise."""


class HHEMJudge(DetectorJudge):
    """HHEM-2.1-Open (module doc: what it reads and how the answer is decided).

    Example::

        judge = HHEMJudge(model="models/hhem-2.1-open", tokenizer="models/flan-t5-base")
        monitor = Monitor(judge=judge)

    Args:
        model: the checkpoint's folder or hub id (``vectara/hallucination_evaluation_model``;
            ``transformers`` on PyTorch: ``groundwatch[detectors-torch]``), or a folder that
            ``groundwatch export-onnx --judge hhem`` wrote (onnxruntime, no PyTorch:
            ``groundwatch[detectors]``).
        mode: ``"answer"`` (default, the published usage) or ``"claims"``.
        revision: the commit, branch or tag of a hub id.
        tokenizer: the foundation model's folder (flan-t5-base's tokenizer files and
            ``config.json``), for offline use; default: the foundation the checkpoint's config
            names, else ``google/flan-t5-base``.
        runtime: ``"torch"`` or ``"onnx"``; ``None`` chooses by the folder.
        threads: onnxruntime's threads (default 1); for PyTorch, when given, the process-wide
            ``torch.set_num_threads``.
        rules_first: the local judge's exact rules decide first (off: the model's verdicts
            alone, so the published accuracy carries over).
        local: the lexical judge that splits claims and finds evidence.
    """

    name = "hhem"
    threshold: ClassVar[float] = THRESHOLD
    rule: ClassVar[str] = "hallucinated when HHEM's probability of 'consistent' is below 0.5"

    def __init__(
        self,
        model: str | Path,
        *,
        mode: str = "answer",
        revision: str | None = None,
        tokenizer: str | Path | None = None,
        runtime: str | None = None,
        threads: int | None = None,
        rules_first: bool = False,
        local: LocalJudge | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        if revision is not None and Path(model).exists():
            raise ValueError(f"revision pins a hub id; {model} is a folder here")
        self.mode = mode
        self._scorer: TorchHHEM | OnnxHHEM | None = None
        super().__init__(
            model,
            runtime=runtime,
            threads=threads,
            rules_first=rules_first,
            local=local,
            mode=mode,
            revision=revision,
            tokenizer=None if tokenizer is None else str(tokenizer),
        )

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.mode = self.options["mode"]
        self._scorer = None

    def _load(self) -> None:
        if self.runtime == "onnx":
            self._scorer = OnnxHHEM(self.model, threads=self.threads or 1)
        else:
            self._scorer = TorchHHEM(
                self.model, revision=self.options["revision"], tokenizer=self.options["tokenizer"]
            )

    @property
    def prompt(self) -> str:
        """The prompt in use: the checkpoint config's, else the authors' default."""
        self._ensure_loaded()
        assert self._scorer is not None
        return self._scorer.prompt

    def consistency(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """For each (premise, hypothesis), the probability that the premise supports it: what
        the authors' ``HHEMv2ForSequenceClassification.predict(pairs)`` returns on the same
        weights."""
        self._ensure_loaded()
        assert self._scorer is not None
        with MODEL_CALLS.call():  # the scorer's tensors are freed before the gate opens
            return self._scorer.consistency(list(pairs))

    def _read(
        self, answer: str, contexts: Sequence[str], question: str | None, claims: Sequence[str]
    ) -> Reading:
        premise = PREMISE_SEPARATOR.join(contexts)
        if self.mode == "claims":
            scores = self.consistency([(premise, c) for c in claims])
            support = min(scores)
            why = f"HHEM, claim by claim: least consistent {support:.0%}"
        else:
            support = self.consistency([(premise, answer)])[0]
            why = f"HHEM: the answer is consistent with the passages at {support:.0%}"
            if support >= THRESHOLD:  # every claim backed: no need to read them one by one
                return Reading(
                    support=support,
                    hallucinated=False,
                    why=why,
                    claims=tuple(ClaimReading(support=support, own=False) for _ in claims),
                )
            scores = self.consistency([(premise, c) for c in claims])  # which it backs least
        return Reading(
            support=support,
            hallucinated=support < THRESHOLD,
            why=why,
            claims=tuple(ClaimReading(support=s) for s in scores),
        )
