"""Several entailment models on one held-out set drawn from every ``nli-train`` source.

``train_nli.py`` holds out ``--valid`` rows of each source it trains on, but only of those
sources, so its log's accuracies cannot be compared between models trained on different
mixes. This script draws the rows every run holds out (the first ``--valid`` of each source's
seeded shuffle, after the same guards: ``nli_train_data.sample``) from *all* sources, refuses a
model whose manifest lists one of them among its training rows, and prints, per source and
model, the balanced accuracy of "entailed" against the rest (the model's most probable class),
so that a source a model never saw measures transfer. WiCE is left out: its premises are whole
documents, and 3 of its rows fit 128 word pieces. Usage::

    python training/heldout_nli.py --models DIR [DIR ...] [--valid 200] [--max-length 128]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from accuracy import rates  # noqa: E402
from nli_train_data import LONG_DOCUMENT, default_dir, guards, manifest_of, sample  # noqa: E402

from groundwatch.judging.judges._nli_model import NLIEncoder  # noqa: E402

SOURCES = (
    "vitaminc_real",
    "vitaminc_synthetic",
    "docnli_binary_fever",
    "docnli_binary_mnli",
    "summedits",
    "fib",
    "halueval_qa",
    "fever_symmetric",
    "fever_adversarial",
)


def held_out(folder: Path, valid: int, max_length: int, seed: int) -> list[dict[str, Any]]:
    """The rows every run with these settings holds out, ``y`` 0 for entailed, 1 otherwise."""
    keep, window = guards(max_length, True)
    _, held, _ = sample(
        folder,
        dict.fromkeys(SOURCES, 0),
        head=2,
        seed=seed,
        valid=valid,
        keep=keep,
        window=window,
        window_sources=LONG_DOCUMENT,
    )
    return held


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, nargs="+", required=True)
    parser.add_argument("--nli-train", type=Path, default=default_dir())
    parser.add_argument("--valid", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)

    rows = held_out(args.nli_train, args.valid, args.max_length, args.seed)
    ids = {r["id"] for r in rows}
    by_source: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_source.setdefault(r["source"], []).append(r)
    results: dict[str, dict[str, float]] = {}
    for model in args.models:
        manifest = manifest_of(model)
        if manifest.is_file():
            trained = set(json.loads(manifest.read_text("utf-8")).get("train_ids", []))
            if trained & ids:
                sys.exit(f"refused: {model} trained on {len(trained & ids)} held-out rows")
        encoder = NLIEncoder(model, threads=2)
        results[model.name] = {}
        for source, group in by_source.items():
            probs = encoder.probabilities([(r["premise"], r["hypothesis"]) for r in group])
            entailed = [int(p.argmax()) == 0 for p in probs]
            results[model.name][source] = rates(entailed, [r["y"] == 0 for r in group])[0]
        print(f"{model.name}: done", file=sys.stderr, flush=True)

    names = list(results)
    print(f"{'source (held-out rows)':30} " + " ".join(f"{n[:12]:>12}" for n in names))
    for source, group in by_source.items():
        line = " ".join(f"{results[n][source]:12.3f}" for n in names)
        print(f"{source + f' ({len(group)})':30} {line}")
    means = " ".join(f"{sum(results[n].values()) / len(results[n]):12.3f}" for n in names)
    print(f"{'mean of the sources':30} {means}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
