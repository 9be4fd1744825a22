"""Fine-tune the trained cross-encoder on AttributionBench dev claim labels, one model per fold.

The step after ``train_nli.py`` (which never shows the encoder an AttributionBench label): a
copy of that model is fine-tuned on the labelled claims of four of the five folds of
``benchmarks/nli.py`` (``accuracy.folds_of``, the folds of ``benchmarks/semantic.py
--calibrated``), for each held-out fold, and one more copy on all of AttributionBench dev (the
model FaithBench and SNLI test are judged with). Pairs are built exactly as ``NLIJudge`` reads a
claim: premise = the claim's evidence window (``NLIJudge.entailment``), hypothesis = the claim,
for the claims the model decides and ``calibrate_local._claim_labels`` labels; backed ->
entailment, not backed -> neutral (the labels say "not backed", not "contradicted").

Each model goes to ``OUT/fold<k>/`` or ``OUT/all/`` (``save_pretrained`` files, the ONNX fp32
and int8 graphs of ``export_nli.export``) with ``fine_tune.json``: the ids of the rows it was
trained on, which ``benchmarks/nli.py --fold-models OUT`` checks against the fold it measures.
FaithBench is never read here.

Training is ``train_nli.train``: seeded, AdamW, linear warm-up over the first tenth of the
steps and linear decay to zero by the last; ``--max-minutes`` only caps a model whose run the
shared machine slows to a crawl (it also shortens the schedule then, so it sits well above the
few minutes a model takes).

Needs ``pip install -r training/requirements.txt``. Usage::

    python training/finetune_nli.py --base /work/nli-run/model --out /work/nli-run/folds \\
        [--epochs 3] [--lr 2e-5] [--only fold0] [--probe STEPS]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import tokenizers  # noqa: E402
import torch  # noqa: E402
from accuracy import folds_of  # noqa: E402
from calibrate_local import default_data_dir, load_rows  # noqa: E402
from calibrate_nli import FIT_SET, NLIRow, labelled_claims, measure, placeholder_combiner  # noqa: E402
from export_nli import export  # noqa: E402
from train_nli import encode, train  # noqa: E402

from groundwatch.judging.judges._nli_model import LABELS, MAX_LENGTH, build_tokenizer  # noqa: E402
from groundwatch.judging.judges.nli import NLIJudge  # noqa: E402

FOLDS = 5
MANIFEST = "fine_tune.json"
BACKED, NOT_BACKED = LABELS.index("entailment"), LABELS.index("neutral")


def model_names(folds: int = FOLDS) -> list[str]:
    """``fold<k>`` (trained without fold k) for each fold, then ``all``."""
    return [f"fold{k}" for k in range(folds)] + ["all"]


def training_rows(rows: Sequence[NLIRow], name: str, folds: int = FOLDS) -> list[NLIRow]:
    """The rows the model ``name`` is fine-tuned on."""
    if name == "all":
        return list(rows)
    held_out = int(name.removeprefix("fold"))
    return [r for r, f in zip(rows, folds_of(len(rows), folds), strict=True) if f != held_out]


def claim_pairs(rows: Sequence[NLIRow]) -> list[dict[str, Any]]:
    """(premise, hypothesis, label) of every labelled claim the model reads in ``rows``."""
    return [
        {
            "premise": probs[3].quote,
            "hypothesis": claim.text,
            "label": BACKED if backed else NOT_BACKED,
        }
        for claim, _, probs, backed in labelled_claims(rows)
    ]


def fine_tune(
    base: Path, rows: Sequence[NLIRow], out: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Fine-tune a copy of ``base`` on the claims of ``rows``, save and export it to ``out``."""
    from transformers import AutoModelForSequenceClassification

    random.seed(args.seed)
    torch.manual_seed(args.seed)
    tok, cls, sep = build_tokenizer(tokenizers)
    pairs = claim_pairs(rows)
    encoded = encode(tok, cls, sep, pairs, MAX_LENGTH)
    model = AutoModelForSequenceClassification.from_pretrained(base)
    start = time.monotonic()
    steps = train(
        model,
        encoded,
        random.Random(args.seed),
        batch=args.batch,
        lr=args.lr,
        warmup=args.warmup,
        epochs=args.epochs,
        max_minutes=args.max_minutes,
        probe=args.probe,
    )
    minutes = (time.monotonic() - start) / 60
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    export(out)
    manifest = {
        "base": str(base),
        "fitted_on": FIT_SET,
        "train_ids": sorted(r.id for r in rows),
        "pairs": len(pairs),
        "backed": sum(p["label"] == BACKED for p in pairs),
        "steps": steps,
        "train_minutes": round(minutes, 1),
        "hyper": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="train_nli.py output folder")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--data", type=Path, default=None)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--warmup", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--max-minutes", type=float, default=20.0, help="per model: a safety cap, not the schedule"
    )
    parser.add_argument("--only", nargs="*", default=None, help="e.g. fold0 all")
    parser.add_argument("--probe", type=int, default=0, help="only this many steps per model")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    data = default_data_dir() if args.data is None else args.data

    print(f"measuring {FIT_SET} (premises of the claims the model reads) ...", flush=True)
    judge = NLIJudge(args.base / "model.int8.onnx", placeholder_combiner())
    rows = measure(judge, load_rows(data / f"{FIT_SET}.jsonl"))
    for name in args.only or model_names():
        print(f"== {name}", flush=True)
        manifest = fine_tune(args.base, training_rows(rows, name), args.out / name, args)
        print(
            f"{name}: {manifest['pairs']} pairs ({manifest['backed']} backed) from "
            f"{len(manifest['train_ids'])} rows, {manifest['steps']} steps in "
            f"{manifest['train_minutes']} min",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
