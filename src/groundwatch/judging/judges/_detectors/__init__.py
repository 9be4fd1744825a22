"""What the published detector judges share: :class:`~groundwatch.HHEMJudge`,
:class:`~groundwatch.MiniCheckJudge` and :class:`~groundwatch.LettuceDetectJudge`.

This package (``groundwatch/judging/judges/_detectors/``) is private. It holds:

* ``_runtime``: which runtime reads a model folder (PyTorch through ``transformers``, or
  onnxruntime on an ONNX export beside the checkpoint), the imports each needs (lazily, with
  the one line that installs them), onnxruntime sessions and thread counts;
* ``_judge``: :class:`DetectorJudge`, the full judge built around a detector: claims from the
  shared splitter, a verdict with evidence per claim, the answer's label by the model's own
  rule, ``hallucination_probability``, the optional rules-first mode, pickling as the model's
  name;
* ``_export``: the ONNX helpers the detectors' export functions share (:func:`quantize_int8`).
  The command ``groundwatch export-onnx --judge NAME --model DIR --out DIR [--int8]
  [--revision REV] [--tokenizer DIR]`` (:mod:`groundwatch.cli._export_onnx`) calls the
  detector's own ``export_onnx``, found by the judge's name in its ``EXPORTERS`` table.

Nothing here imports numpy, torch, transformers or onnxruntime at import time.

Extras (``pyproject.toml``): ``detectors`` = numpy, onnxruntime and tokenizers (an ONNX export,
no PyTorch in the application); ``detectors-torch`` = ``transformers[torch]`` (a checkpoint as
published, or a hub id; also what ``export-onnx`` needs).

The contract a detector judge fulfils
-------------------------------------

A detector judge ``XJudge`` lives in the package ``groundwatch.judging.judges.x`` (``hhem``,
``minicheck``, ``lettucedetect``), whose ``__init__`` exports:

``class XJudge(DetectorJudge)``
    Its ``__init__`` takes the model (a folder or a hub id) first, then keyword arguments. It
    calls ``DetectorJudge.__init__(self, model, runtime=..., threads=..., rules_first=...,
    local=..., **options)``, where ``options`` are its own loading arguments (``revision``,
    ``tokenizer``...) and must be picklable: the judge pickles as ``model`` and these arguments
    (:meth:`DetectorJudge.__getstate__`), and loads the model again where it is unpickled (the
    Monitor's worker process), as ``NLIJudge`` does. Class attributes: ``name``
    (``name = "hhem"``, without ``ClassVar``: the :class:`~groundwatch.Judge` protocol's
    ``name`` is an instance attribute, and a ``ClassVar`` makes the class no ``Judge`` for
    mypy), ``threshold`` (the authors' default decision threshold, on the probability that the
    answer is supported) and ``rule`` (the authors' decision rule in words, for the docs and
    reasons).
    It implements the two methods of :class:`Detector`:

    ``_load(self) -> None``
        Loads the model for ``self.runtime`` (``"torch"`` or ``"onnx"``) from ``self.model``
        and ``self.options``; raises with a message that says what to fix. Called once at
        construction, and again lazily after unpickling.

    ``_read(self, answer, contexts, question, claims) -> Reading``
        ``contexts`` are the passages' texts and ``claims`` the claims' texts in answer order;
        returns the model's :class:`Reading`: the answer's ``support`` and decision, and one
        :class:`ClaimReading` per claim (its ``support`` and, for a token-level detector, the
        flagged answer spans that fall inside it). Batches the claims. ``judge`` calls it (and
        ``_load``) inside ``groundwatch._shared.model_calls.MODEL_CALLS.call()``, which keeps
        model calls out of the interpreter's exit; a public scoring method of the judge's own
        (``consistency``, ``support``, ``spans``) wraps its model call the same way.

``def export_onnx(model: str | Path, out: str | Path, *, int8: bool = False,
revision: str | None = None, tokenizer: str | Path | None = None) -> Path``
    Writes an ONNX export of ``model`` into the folder ``out``, with everything the ``onnx``
    runtime of ``XJudge`` needs to read it there (config, tokenizer files), quantised to int8
    when asked (:func:`quantize_int8`); returns ``out``. Needs ``detectors-torch``. The export
    command finds it by the judge's name (``EXPORTERS`` in ``groundwatch.cli._export_onnx``).
    An ONNX folder is recognised by :data:`ONNX_NAMES` (:func:`onnx_file`), so the export's
    graph is ``out/model.onnx`` (``out/model.int8.onnx`` with ``int8``).

``groundwatch.judging.registry`` offers each as ``--judge x --model ...``; its builder imports
the judge's package lazily.
"""

from __future__ import annotations

from ._export import quantize_int8
from ._judge import RULES_FIRST, ClaimReading, Detector, DetectorJudge, Reading
from ._runtime import (
    ONNX_NAMES,
    Runtime,
    choose_runtime,
    onnx_file,
    onnx_session,
    require,
    set_torch_threads,
)

__all__ = [
    "ONNX_NAMES",
    "RULES_FIRST",
    "ClaimReading",
    "Detector",
    "DetectorJudge",
    "Reading",
    "Runtime",
    "choose_runtime",
    "onnx_file",
    "onnx_session",
    "quantize_int8",
    "require",
    "set_torch_threads",
]
