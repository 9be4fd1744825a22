"""The local judge with an entailment cross-encoder deciding what its rules leave open.

Word overlap cannot tell a fair paraphrase from an invention; an entailment model (natural
language inference, NLI) reads the claim against its evidence and says whether it follows.
groundwatch ships no such model: the ones trained in ``training/`` do not beat
:class:`LocalJudge` by the margin the project requires (``training/README.md``). This judge
runs the model you bring: ``NLIJudge(model="DIR, FILE or hub id")``, any sequence-
classification cross-encoder whose config names its classes (``_nli_model`` says which files it
reads; ``docs/judges.md`` has recipes for common public models).

How a claim is judged:

1. ``LocalJudge`` judges every claim and finds its evidence window: the best-aligned passage
   sentence with its neighbours (``ClaimFeatures.window_span``).
2. Its rules still decide first: a conflicting number, a flipped negation, direction or cause,
   a number or a name the context lacks (``local.rule_of``). A small encoder is bad at exactly
   those, so they veto whatever the model says.
3. Every other claim in Latin script goes to the model as (premise = its evidence window,
   hypothesis = the claim); the model gives the probability of entailment, neutral and
   contradiction (a two-way model: entailment and the rest, read as neutral). An optional
   logistic combiner (``benchmarks/nli.py --combiner-out`` fits one on labelled answers,
   :func:`load_combiner` reads it) turns the lexical measurements and those probabilities
   into the probability that the context backs the claim (without one, the model's
   entailment probability is that probability): backed from ``min_probability`` on,
   ``supported`` when the lexical judge also found one sentence stating it, ``inferred``
   otherwise; ``contradicted`` when it is not backed and the model is at least
   ``contradiction_threshold`` sure of a contradiction; ``unsupported`` otherwise. Evidence is
   the window (or the lexical judge's own evidence), with exact offsets.

If the model cannot be loaded, or fails on a call, the lexical verdicts stand and the failure
is counted (``model_failures``, and the ``groundwatch.errors`` counter) with a rate-limited
warning: a broken model file must not stop scoring. A missing extra is a configuration error
and raises at construction.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..._shared.guard import internal_error
from ..._shared.model_calls import MODEL_CALLS, InterpreterExiting
from ...types import Claim, Evidence, Judgement, Passage
from ._nli_model import (
    MAX_HYPOTHESIS_PIECES,
    MAX_LENGTH,
    NLIEncoder,
    PairClassifier,
    TransformersEncoder,
    require,
    runtime_of,
)
from .local import LocalJudge, rule_of
from .local._calibration import FEATURES, LogisticModel, feature_vector
from .local._features import ClaimFeatures

NLI_FEATURES: tuple[str, ...] = (*FEATURES, "entailment", "contradiction")
"""Inputs of the combiner: the lexical measurements and two of the model's probabilities."""

DEFAULT_CONTRADICTION_THRESHOLD = 0.9
"""Model probability of contradiction from which an unbacked claim is ``contradicted``."""
DEFAULT_MAX_CLAIMS = 64
"""Claims per answer the model reads at most; the rest keep their lexical verdicts."""

_PREMISE_ROOM = MAX_LENGTH - 3 - MAX_HYPOTHESIS_PIECES


def load_combiner(path: str | Path) -> LogisticModel:
    """A combiner that ``benchmarks/nli.py --combiner-out`` wrote (JSON: the feature names and
    a logistic model over them)."""
    data = json.loads(Path(path).read_text("utf-8"))  # its "threshold" is min_probability
    if tuple(data["features"]) != NLI_FEATURES:
        raise ValueError(f"combiner features {data['features']} differ from {NLI_FEATURES}")
    return LogisticModel.from_json(data["model"]).expect(NLI_FEATURES)


def nli_vector(f: ClaimFeatures, entailment: float, contradiction: float) -> list[float]:
    """The combiner's inputs for one claim, in :data:`NLI_FEATURES` order."""
    return [*feature_vector(f), entailment, contradiction]


class NLIJudge:
    """``LocalJudge`` whose open claims are decided by an entailment model you bring.

    The model is any sequence-classification cross-encoder whose ``config.json`` names its
    classes (entailment / neutral / contradiction, or entailment / not entailment):

    * a folder or file with an ONNX graph, run by onnxruntime: ``groundwatch[nli]``;
    * a folder without one (PyTorch or safetensors weights) or a Hugging Face Hub id, run by
      ``transformers``: ``groundwatch[nli-transformers]``. A hub id is read from the local
      cache, and downloaded once where the environment allows it.

    Example::

        judge = NLIJudge(model="models/nli-deberta-v3-base-onnx")
        monitor = Monitor(judge=judge)

    Args:
        model: the ONNX file, the cross-encoder folder or the hub id.
        combiner: the fitted logistic combiner over :data:`NLI_FEATURES`; ``None`` decides by
            the model's entailment probability alone.
        local: the lexical judge that runs first (default ``LocalJudge()``).
        threads: CPU threads of the ONNX runtime (PyTorch's are the application's:
            ``torch.set_num_threads``).
        min_probability: combiner probability from which a claim is backed (chosen with the
            combiner, on answer labels: ``benchmarks/nli.py``).
        contradiction_threshold: model probability of contradiction for ``contradicted``.
        max_claims: claims per answer the model reads at most.
        windows: evidence windows the model reads per claim: the best-aligned one, then the
            windows of the lexical judge's other candidate sentences; the window the model
            finds most entailing decides (1: the aligned window only).
        sha256: the ONNX file's expected checksum (``None`` accepts any file).
        revision: the commit, branch or tag of a hub model (``transformers`` runtime).
    """

    name = "nli"

    def __init__(
        self,
        model: str | Path,
        combiner: LogisticModel | None = None,
        local: LocalJudge | None = None,
        threads: int = 1,
        *,
        min_probability: float = 0.5,
        contradiction_threshold: float = DEFAULT_CONTRADICTION_THRESHOLD,
        max_claims: int = DEFAULT_MAX_CLAIMS,
        windows: int = 1,
        sha256: str | None = None,
        revision: str | None = None,
    ) -> None:
        if threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads!r}")
        if windows < 1:
            raise ValueError(f"windows must be at least 1, got {windows!r}")
        if max_claims < 0:
            raise ValueError(f"max_claims must not be negative, got {max_claims!r}")
        if not 0.0 <= min_probability <= 1.0:
            raise ValueError(f"min_probability must be within [0, 1], got {min_probability!r}")
        if not 0.0 <= contradiction_threshold <= 1.0:
            raise ValueError(
                f"contradiction_threshold must be within [0, 1], got {contradiction_threshold!r}"
            )
        not_found: FileNotFoundError | None = None
        try:
            runtime = runtime_of(model)
        except FileNotFoundError as exc:
            # No model there: a counted load failure below, not a crash.
            runtime, not_found = "onnx", exc
        try:
            require(runtime)  # a missing extra is a configuration error: say so at construction
        except ImportError as exc:
            if runtime == "transformers" and not Path(model).exists():
                # A mistyped folder reads as a hub id: say which it was taken for.
                raise ImportError(f"{model} is no file or folder here, so a hub id: {exc}") from exc
            raise
        if sha256 is not None and runtime == "transformers":
            raise ValueError(
                f"sha256 checks an ONNX file and {model} has none; pin a hub model with revision="
            )
        if revision is not None and runtime == "onnx":
            raise ValueError(f"revision pins a hub model; {model} is an ONNX model")
        self.model = model
        self.runtime = runtime
        """``"onnx"`` or ``"transformers"``: which runtime reads the model."""
        self.combiner = combiner.expect(NLI_FEATURES) if combiner is not None else None
        self.local = copy.copy(local) if local is not None else LocalJudge()
        self.local.candidate_windows = windows if windows > 1 else 0
        self.threads = threads
        self.min_probability = min_probability
        self.contradiction_threshold = contradiction_threshold
        self.max_claims = max_claims
        self.windows = windows
        self.sha256 = sha256
        self.revision = revision
        self.model_failures = 0
        self.load_error: str | None = None
        """Why the model did not load (``None`` once it has): the judge then gives the lexical
        verdicts."""
        self._count_lock = threading.Lock()
        self.encoder = self._load(not_found)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_count_lock"]
        # The encoder pickles as its path and rebuilds its session where it is unpickled.
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._count_lock = threading.Lock()

    def _load(self, not_found: FileNotFoundError | None) -> PairClassifier | None:
        try:
            if not_found is not None:
                raise not_found
            if self.runtime == "onnx":
                return NLIEncoder(self.model, threads=self.threads, sha256=self.sha256)
            return TransformersEncoder(self.model, revision=self.revision)
        except Exception as exc:
            self.load_error = f"{type(exc).__name__}: {exc}"
            self._failed("nli_judge.load", exc)
            return None

    def _failed(self, where: str, exc: BaseException) -> None:
        with self._count_lock:
            self.model_failures += 1
        # Counted in groundwatch.errors and logged at most once a minute; never raised: the
        # lexical verdicts are still a judgement.
        internal_error(where, exc, reraise=False)

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        """Judge with ``LocalJudge``, then decide the claims its rules leave open by entailment."""
        judged = self.local.judge_with_features(answer, contexts, question)
        probs = self.entailment(judged, contexts)
        return Judgement(
            claims=[
                claim if p is None else self.decide(claim, f, p)
                for (claim, f), p in zip(judged, probs, strict=True)
            ]
        )

    def entailment(
        self, judged: Sequence[tuple[Claim, ClaimFeatures]], contexts: Sequence[Passage]
    ) -> list[tuple[float, float, float, Evidence] | None]:
        """For each claim the model reads: (entailment, neutral, contradiction, premise)."""
        out: list[tuple[float, float, float, Evidence] | None] = [None] * len(judged)
        if self.encoder is None:
            return out
        calibrated = self.local.calibration is not None
        chosen = [i for i, (c, f) in enumerate(judged) if _model_decides(c, f, calibrated)]
        chosen = chosen[: self.max_claims]
        if not chosen:
            return out
        try:
            # Inside the exit gate, the tokenizer's calls too (premises are sized in pieces): a
            # call into native code in flight on a daemon thread when the interpreter exits
            # would abort it (groundwatch._shared.model_calls).
            with MODEL_CALLS.call():
                premises = self._premises([judged[i][1] for i in chosen], contexts)
                pairs = [
                    (p.quote, judged[i][0].text)
                    for i, options in zip(chosen, premises, strict=True)
                    for p in options
                ]
                probs = iter(self.encoder.probabilities(pairs))
            for i, options in zip(chosen, premises, strict=True):
                # The window that entails the claim most decides; the first (aligned) on ties.
                rows = [next(probs) for _ in options]
                best = max(range(len(options)), key=lambda k: (float(rows[k][0]), -k))
                row = rows[best]
                out[i] = (float(row[0]), float(row[1]), float(row[2]), options[best])
        except InterpreterExiting:  # the process is ending: nothing failed
            return [None] * len(judged)
        except Exception as exc:
            self._failed("nli_judge.model", exc)
            return [None] * len(judged)
        return out

    def _premises(
        self, features: Sequence[ClaimFeatures], contexts: Sequence[Passage]
    ) -> list[list[Evidence]]:
        """Each claim's premises: its evidence window (its best sentence where the window is
        too long), then up to ``windows - 1`` other candidate windows that fit."""
        assert self.encoder is not None
        spans = [[f.window_span, *f.candidate_windows[1 : self.windows]] for f in features]
        flat = [_span_evidence(s, contexts) for options in spans for s in options]
        sized = iter(zip(flat, self.encoder.pieces([w.quote for w in flat]), strict=True))
        out = []
        for f, options in zip(features, spans, strict=True):
            (first, n), *others = [next(sized) for _ in options]
            premises = [first if n <= _PREMISE_ROOM else _span_evidence(f.best_span, contexts)]
            premises += [w for w, n in others if n <= _PREMISE_ROOM]
            out.append(premises)
        return out

    def decide(
        self,
        claim: Claim,
        f: ClaimFeatures,
        probs: tuple[float, float, float, Evidence],
    ) -> Claim:
        """The claim's verdict from the combiner (``probs`` from :meth:`entailment`)."""
        entail, _, contra, premise = probs
        if self.combiner is None:
            p = entail
        else:
            p = self.combiner.probability(nli_vector(f, entail, contra))
        model = f"entailment {entail:.0%}, contradiction {contra:.0%}"
        if p >= self.min_probability:
            # The lexical judge's evidence stays unless the model found the claim in another
            # window than the aligned one (windows > 1) and that evidence lies outside it.
            aligned = (premise.passage, premise.start, premise.end) in (f.window_span, f.best_span)
            lexical = (
                claim.verdict in ("supported", "inferred")
                and claim.evidence
                and (aligned or all(_inside(e, premise) for e in claim.evidence))
            )
            single = f.sentence_score >= self.local.support_threshold
            verdict = "supported" if single and claim.verdict == "supported" else "inferred"
            return claim.model_copy(
                update={
                    "verdict": verdict,
                    "evidence": claim.evidence if lexical else [premise],
                    "reason": f"the evidence window entails it ({model})",
                    "confidence": round(p, 3),
                }
            )
        if contra >= self.contradiction_threshold:
            return claim.model_copy(
                update={
                    "verdict": "contradicted",
                    "evidence": [premise],
                    "reason": f"the evidence window contradicts it ({model})",
                    "confidence": round(min(1.0 - p, contra), 3),
                }
            )
        return claim.model_copy(
            update={
                "verdict": "unsupported",
                "evidence": [],
                "reason": f"the evidence window does not entail it ({model})",
                "confidence": round(1.0 - p, 3),
            }
        )


def _model_decides(claim: Claim, f: ClaimFeatures, calibrated: bool) -> bool:
    """Whether the model reads this claim: no rule decided it, it has an evidence window, and
    it is in Latin script (the base model is English)."""
    if (
        f.window_span is None
        or f.best_span is None
        or rule_of(f, calibrated=calibrated) is not None
    ):
        return False
    letters = [ch for ch in claim.text if ch.isalpha()]
    return bool(letters) and sum(ch.isascii() for ch in letters) >= 0.8 * len(letters)


def _span_evidence(span: tuple[int, int, int] | None, contexts: Sequence[Passage]) -> Evidence:
    assert span is not None
    p, start, end = span
    return Evidence(passage=p, start=start, end=end, quote=contexts[p].text[start:end])


def _inside(evidence: Evidence, window: Evidence) -> bool:
    return (
        evidence.passage == window.passage
        and window.start <= evidence.start
        and evidence.end <= window.end
    )
