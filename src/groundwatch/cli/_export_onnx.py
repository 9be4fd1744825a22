"""``groundwatch export-onnx``: a detector judge's checkpoint as an ONNX export that the
``detectors`` extra runs (onnxruntime and tokenizers, no PyTorch), int8 when asked.

The command calls the detector's own ``export_onnx`` (its signature is in the docstring of
:mod:`groundwatch.judging.judges._detectors`), found by the judge's name in :data:`EXPORTERS`;
nothing is imported before the command runs.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

from .._shared.errors import UsageError

EXPORTERS: dict[str, str] = {
    "hhem": "groundwatch.judging.judges.hhem",
    "minicheck": "groundwatch.judging.judges.minicheck",
    "lettucedetect": "groundwatch.judging.judges.lettucedetect",
}
"""Judge name -> the module whose ``export_onnx`` writes its ONNX export."""


def export(
    judge: str,
    model: str | Path,
    out: str | Path,
    *,
    int8: bool = False,
    revision: str | None = None,
    tokenizer: str | Path | None = None,
) -> Path:
    """The ONNX export of ``model`` for the judge named ``judge``, written into ``out``."""
    if judge not in EXPORTERS:
        raise ValueError(f"no ONNX export for judge {judge!r} (one of {', '.join(EXPORTERS)})")
    module = importlib.import_module(EXPORTERS[judge])
    written: Path = module.export_onnx(
        model, out, int8=int8, revision=revision, tokenizer=tokenizer
    )
    return Path(written)


# --- the command ------------------------------------------------------------------------------


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export-onnx",
        help="export a detector judge's model to ONNX (runs without PyTorch)",
        description="Write an ONNX export of an HHEM, MiniCheck or LettuceDetect checkpoint "
        "into a folder that the judge then reads with onnxruntime (groundwatch[detectors]); "
        "the export itself needs groundwatch[detectors-torch].",
    )
    parser.add_argument("--judge", required=True, choices=sorted(EXPORTERS))
    parser.add_argument("--model", required=True, help="the checkpoint folder or hub id")
    parser.add_argument("--out", required=True, help="the folder to write the export into")
    parser.add_argument("--int8", action="store_true", help="quantise the weights to int8")
    parser.add_argument("--revision", help="the commit, branch or tag of a hub id")
    parser.add_argument(
        "--tokenizer", help="the foundation model's folder, for offline use (HHEM: flan-t5-base)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        written = export(
            args.judge,
            args.model,
            args.out,
            int8=args.int8,
            revision=args.revision,
            tokenizer=args.tokenizer,
        )
    except ImportError as exc:
        raise UsageError(f"export-onnx: {exc}") from exc
    print(f"wrote {written}")
    return 0
