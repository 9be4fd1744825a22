"""The full judge around a detector: from the model's reading of an answer to a ``Judgement``.

How an answer is judged (every detector judge, the same way):

1. The shared claim splitter (:func:`groundwatch.judging.text.claims.split_claims`, through
   :meth:`LocalJudge.judge_with_features`, which also finds each claim's evidence window: the
   best-aligned passage sentence with its neighbours) cuts the answer into claims.
2. The detector reads the answer, the passages and the claims (:meth:`Detector._read`): the
   answer's probability of being supported and its decision by the model's own rule at its
   authors' default threshold, and each claim's probability of being supported (for a
   token-level detector, with the answer spans it flags inside the claim).
3. Verdicts follow the answer's decision, so that the label scoring gives is the model's:

   * the model finds the answer supported: every claim is ``inferred`` (``supported`` where the
     local judge also found one sentence stating it), its evidence the local judge's evidence
     or the claim's evidence window;
   * the model finds it hallucinated: every claim the model does not back on its own (support
     below the judge's ``threshold``, or a flagged span inside it) is ``unsupported``, with the
     flagged spans quoted in its reason; if that leaves the label ``grounded`` under the default
     :class:`~groundwatch.judging.scoring.LabelPolicy`, the claims with the least support are
     made ``unsupported`` too, until it does not (the reason says so).

   Each claim's ``confidence`` is how sure the model is of its verdict (its support, or one
   minus it). ``Judgement.hallucination_probability`` is one minus the answer's support.
4. Rules first (``rules_first=True``, off by default): the local judge's exact rules (a number
   that conflicts with the evidence, a flipped negation, direction or cause:
   :data:`RULES_FIRST`) decide the claims they fire on before the model (``contradicted``); the
   answer is then hallucinated, with probability at least the rule's confidence. Off, the
   verdicts and the probability are the model's alone, so its published accuracy carries over.

One case still differs from the model's label: scoring's evidence check
(:mod:`groundwatch.judging.evidence_check`) makes a backed claim ``unsupported`` when a number or
name of the claim is in none of its evidence's passages.

A claim without an evidence window (nothing in the passages aligns with it) is quoted against
the first sentence of the first passage with text.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

from ...._shared.guard import internal_error
from ...._shared.model_calls import MODEL_CALLS, InterpreterExiting
from ....types import Claim, Evidence, Judgement, Passage
from ...scoring import DEFAULT_MIN_GROUNDEDNESS
from ...text.claims import sentence_spans
from ..local import LocalJudge, rule_of
from ..local._features import ClaimFeatures
from ._runtime import Runtime, choose_runtime, require, set_torch_threads

RULES_FIRST: tuple[str, ...] = ("conflict", "negation", "direction", "causal")
"""The local judge's rules that decide before the model in ``rules_first`` mode: the exact ones
(a conflicting number, a flipped negation, direction or cause), which give ``contradicted``."""


@dataclass(frozen=True)
class ClaimReading:
    """What the model says of one claim."""

    support: float
    """Probability, in [0, 1], that the passages support the claim."""
    flagged: tuple[tuple[int, int], ...] = ()
    """Answer offsets ``(start, end)`` the model marks unsupported inside this claim (token-level
    detectors; empty for the others)."""
    own: bool = True
    """Whether the model read this claim on its own; ``False`` when ``support`` is the answer's
    (a detector that scores the whole answer and did not need the claims scored)."""
    evidence: tuple[tuple[int, int, int], ...] = ()
    """Where in the passages ``(passage, start, end)`` the model read what backs the claim
    (MiniCheck: the chunk that gave its probability); quoted, when the claim is backed, where
    the local judge found no sentence stating it (empty: the claim's evidence window)."""


@dataclass(frozen=True)
class Reading:
    """What the model says of one answer."""

    support: float
    """Probability, in [0, 1], that the passages support the answer."""
    hallucinated: bool
    """The model's own decision at its authors' default threshold."""
    why: str
    """The decision in words, for the claims' reasons, e.g. ``"HHEM: consistent 31%"``."""
    claims: tuple[ClaimReading, ...]
    """One per claim given to :meth:`Detector._read`, in the same order."""


class Detector(Protocol):
    """The two methods a detector judge implements (the package docstring has the contract)."""

    def _load(self) -> None: ...

    def _read(
        self, answer: str, contexts: Sequence[str], question: str | None, claims: Sequence[str]
    ) -> Reading: ...


class DetectorJudge:
    """The judge around a published detector (module doc: how an answer is judged).

    Subclasses set ``name``, ``threshold`` and ``rule`` and implement :class:`Detector`.

    Args:
        model: the model's folder (as published, or an ONNX export) or its hub id.
        runtime: ``"torch"`` or ``"onnx"``; ``None`` chooses by the folder (an ONNX export is
            read by onnxruntime).
        threads: onnxruntime's intra-op threads (default 1); for PyTorch, when given, the
            process-wide ``torch.set_num_threads``.
        rules_first: the local judge's exact rules decide the claims they fire on first.
        local: the lexical judge that splits claims and finds evidence (default
            ``LocalJudge()``).
        options: the subclass's own loading arguments (picklable).

    Raises:
        ImportError: the runtime's extra is missing (the message has the line that installs it).
        ValueError, OSError: the model cannot be loaded (the message says what to fix).
    """

    name: str = "detector"
    threshold: ClassVar[float] = 0.5
    rule: ClassVar[str] = ""

    def __init__(
        self,
        model: str | Path,
        *,
        runtime: str | None = None,
        threads: int | None = None,
        rules_first: bool = False,
        local: LocalJudge | None = None,
        **options: Any,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads!r}")
        self.model = str(model)
        self.runtime: Runtime = choose_runtime(model, runtime)
        self.threads = threads
        self.rules_first = rules_first
        self.local = copy.copy(local) if local is not None else LocalJudge()
        self.options = dict(options)
        self.model_failures = 0
        self._lock = threading.Lock()
        self._loaded = False
        self._prepare()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, runtime={self.runtime!r})"

    # --- loading and pickling ------------------------------------------------------------

    def _prepare(self) -> None:
        require(self.runtime, type(self).__name__)
        if self.runtime == "torch":
            set_torch_threads(self.threads)
        self._load()
        self._loaded = True

    def _load(self) -> None:
        """Load the model (:class:`Detector`); each detector implements it."""
        raise NotImplementedError

    def _read(
        self, answer: str, contexts: Sequence[str], question: str | None, claims: Sequence[str]
    ) -> Reading:
        """The model's reading of one answer (:class:`Detector`); each detector implements it."""
        raise NotImplementedError

    def _state(self) -> dict[str, Any]:
        """The loading arguments: what the judge pickles as."""
        return {
            "model": self.model,
            "runtime": self.runtime,
            "threads": self.threads,
            "rules_first": self.rules_first,
            "local": self.local,
            "options": self.options,
        }

    def __getstate__(self) -> dict[str, Any]:
        return self._state()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.model_failures = 0
        self._lock = threading.Lock()
        self._loaded = False  # loaded on first use, in the process that unpickled it

    def _ensure_loaded(self) -> None:
        with self._lock:
            if not self._loaded:
                with MODEL_CALLS.call():
                    self._prepare()

    def _failed(self, where: str, exc: BaseException) -> None:
        with self._lock:
            self.model_failures += 1
        internal_error(where, exc, reraise=False)

    # --- judging -------------------------------------------------------------------------

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        """Split ``answer`` into claims and judge them with the model (module doc)."""
        judged = self.local.judge_with_features(answer, contexts, question)
        if not judged:
            return Judgement(claims=[], model=self.model)
        try:
            self._ensure_loaded()
            # Inside the exit gate: a model call in flight on a daemon thread when the
            # interpreter exits would abort the process (groundwatch._shared.model_calls).
            with MODEL_CALLS.call():
                reading = self._read(
                    answer, [p.text for p in contexts], question, [c.text for c, _ in judged]
                )
        except InterpreterExiting as exc:  # no failure: the process is ending
            return Judgement(error=str(exc), model=self.model)
        except Exception as exc:
            self._failed(f"{self.name}_judge.model", exc)
            return Judgement(error=f"{type(exc).__name__}: {exc}"[:500], model=self.model)
        if len(reading.claims) != len(judged):
            raise RuntimeError(f"{self.name}: {len(reading.claims)} readings for {len(judged)}")
        return self.assemble(answer, judged, contexts, reading)

    def assemble(
        self,
        answer: str,
        judged: Sequence[tuple[Claim, ClaimFeatures]],
        contexts: Sequence[Passage],
        reading: Reading,
    ) -> Judgement:
        """The judgement from the local judge's claims and the model's reading (module doc)."""
        calibrated = self.local.calibration is not None
        ruled = [
            self.rules_first
            and claim.verdict == "contradicted"
            and rule_of(f, calibrated=calibrated) in RULES_FIRST
            for claim, f in judged
        ]
        claims: list[Claim] = []
        for (claim, f), cr, by_rule in zip(judged, reading.claims, ruled, strict=True):
            if by_rule:
                claims.append(claim)
            elif not reading.hallucinated or self._backs(cr):
                claims.append(self._backed(claim, f, contexts, cr, reading))
            else:
                claims.append(self._unbacked(claim, answer, cr, reading))
        probability = 1.0 - reading.support
        if any(ruled):
            probability = max(
                probability, *(c.confidence or 0.0 for c, r in zip(claims, ruled, strict=True) if r)
            )
        elif reading.hallucinated:
            self._enough_unsupported(claims, judged, contexts, reading)
        return Judgement(
            claims=claims, model=self.model, hallucination_probability=round(probability, 6)
        )

    def _backs(self, cr: ClaimReading) -> bool:
        return cr.support >= self.threshold and not cr.flagged

    def _backed(
        self,
        claim: Claim,
        f: ClaimFeatures,
        contexts: Sequence[Passage],
        cr: ClaimReading,
        reading: Reading,
    ) -> Claim:
        lexical = claim.verdict in ("supported", "inferred") and claim.evidence
        if lexical:
            evidence: list[Evidence | None] = list(claim.evidence)
        elif cr.evidence:
            evidence = [
                Evidence(passage=p, start=s, end=e, quote=contexts[p].text[s:e])
                for p, s, e in cr.evidence
            ]
        else:
            evidence = [_window(f, contexts)]
        return claim.model_copy(
            update={
                "verdict": "supported" if claim.verdict == "supported" else "inferred",
                "evidence": [e for e in evidence if e is not None],
                "reason": reading.why + _own(cr),
                "confidence": round(max(cr.support, reading.support), 3),
            }
        )

    def _unbacked(self, claim: Claim, answer: str, cr: ClaimReading, reading: Reading) -> Claim:
        quoted = "; ".join(repr(answer[s:e]) for s, e in cr.flagged)
        reason = reading.why + _own(cr)
        if quoted:
            reason += f"; unsupported: {quoted}"
        return claim.model_copy(
            update={
                "verdict": "unsupported",
                "evidence": [],
                "reason": reason,
                "confidence": round(1.0 - cr.support, 3),
            }
        )

    def _enough_unsupported(
        self,
        claims: list[Claim],
        judged: Sequence[tuple[Claim, ClaimFeatures]],
        contexts: Sequence[Passage],
        reading: Reading,
    ) -> None:
        """Make the least-supported backed claims ``unsupported`` until the default label
        policy calls the answer hallucinated, as the model did."""
        order = sorted(range(len(claims)), key=lambda i: reading.claims[i].support)
        for i in order:
            backed = sum(c.verdict in ("supported", "inferred") for c in claims)
            if backed / len(claims) < DEFAULT_MIN_GROUNDEDNESS:
                return
            if claims[i].verdict in ("supported", "inferred"):
                claims[i] = claims[i].model_copy(
                    update={
                        "verdict": "unsupported",
                        "evidence": [],
                        "reason": f"{reading.why}; of its claims this one has the least "
                        f"support ({reading.claims[i].support:.0%})",
                        "confidence": round(1.0 - reading.support, 3),
                    }
                )


def _own(cr: ClaimReading) -> str:
    """The claim's own support for its reason, when the model read the claim on its own."""
    return f"; this claim: supported {cr.support:.0%}" if cr.own else ""


def _window(f: ClaimFeatures, contexts: Sequence[Passage]) -> Evidence | None:
    """The claim's evidence window, else its best sentence, else the first sentence of the
    first passage with text."""
    span = f.window_span or f.best_span
    if span is None:
        for p, passage in enumerate(contexts):
            sentences = sentence_spans(passage.text)
            if sentences:
                span = (p, *sentences[0])
                break
    if span is None:
        return None
    p, start, end = span
    return Evidence(passage=p, start=start, end=end, quote=contexts[p].text[start:end])
