"""Training pairs from ``shared/nli-train`` (curated fact-verification and consistency sets).

Each source file (gzip JSONL ``{"id", "premise", "hypothesis", "label", "source", "licence"}``,
labels ``entailed`` / ``neutral`` / ``contradicted`` / ``not_entailed``; the set's README has
the licences) is read whole, shuffled with a seed of its own (``"<seed>:<source>"``, so adding
or resizing one source never changes another's sample), and the first rows are taken: a few for
validation (never trained on), then the requested number for training.

Heads:

* ``2``: ``entailment`` (``entailed``) against ``not_entailment`` (everything else), the head
  the issue's probe found best;
* ``3``: ``entailment`` / ``neutral`` / ``contradiction``; binary sources' ``not_entailed`` is
  read as ``neutral`` ("not backed", as ``finetune_nli.py`` maps AttributionBench's labels),
  since those sources do not separate neutral from contradicted.

Guards:

* HaluEval QA's right answers are about 2 words and its hallucinated ones 8-10: left as they
  are, the model learns length. ``length_balanced`` keeps, per hypothesis word count, as many
  entailed as not-entailed rows (so length says nothing about the label), dropping the rest.
* ``--window`` (``aligned_window``): for long-document sources (FIB, SummEdits) the premise is
  cut to the run of adjacent sentences that shares most words with the hypothesis and fits,
  as ``NLIJudge`` gives the model the claim's aligned evidence window at run time. An entailed
  summary drawn from several distant sentences becomes label noise; the rest become pairs the
  model can read.
* ``--fit`` (``fits``): rows whose premise would be cut to fit ``max_length`` word pieces are
  dropped. A summary whose document was cut is no longer backed by what the model reads
  (long-document sources, FIB and SummEdits, would teach noise), and dropping only the
  entailed ones would make "a full-width premise" a cue for the other class.

The ids of the rows a model trained on go to its manifest (``train_nli.py`` writes
``manifest.json`` beside the weights); ``benchmarks/nli.py`` refuses a model whose manifest
holds a row it evaluates.

Usage (statistics of a mix, nothing written)::

    python training/nli_train_data.py --mix vitaminc_real=12000,docnli_binary_fever=4000
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DEFAULT_DIR = Path(__file__).resolve().parents[2] / "shared" / "nli-train"
SOURCES = (
    "vitaminc_real",
    "vitaminc_synthetic",
    "fever_symmetric",
    "fever_adversarial",
    "docnli_binary_fever",
    "docnli_binary_mnli",
    "fib",
    "summedits",
    "halueval_qa",
    "wice",
)
HEADS: dict[int, tuple[str, ...]] = {
    2: ("entailment", "not_entailment"),
    3: ("entailment", "neutral", "contradiction"),
}
"""The classes of each head, in the order of the model's logits (its config's id2label)."""
_LABEL_OF = {
    2: {"entailed": 0, "neutral": 1, "contradicted": 1, "not_entailed": 1},
    3: {"entailed": 0, "neutral": 1, "contradicted": 2, "not_entailed": 1},
}
LENGTH_BIASED = frozenset({"halueval_qa"})
"""Sources whose hypothesis length gives the label away (their README says how)."""


def default_dir() -> Path:
    """``shared/nli-train`` beside the repository (``/work/shared/nli-train`` here)."""
    return DEFAULT_DIR


def parse_mix(text: str) -> dict[str, int | None]:
    """``"vitaminc_real=12000,fib,summedits=all"`` -> rows per source (``None``: all)."""
    mix: dict[str, int | None] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = part.partition("=")
        if name not in SOURCES:
            raise ValueError(f"unknown nli-train source {name!r}; known: {', '.join(SOURCES)}")
        mix[name] = None if count in ("", "all") else int(count)
    return mix


def read_source(folder: Path, source: str) -> list[dict[str, Any]]:
    """Every row of one source file, in file order."""
    with gzip.open(folder / f"{source}.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def length_balanced(rows: Sequence[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """Per hypothesis word count, as many ``entailed`` rows as others (extras dropped at
    random), so that the hypothesis length carries no information about the label."""
    by_length: dict[tuple[int, bool], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_length[(len(r["hypothesis"].split()), r["label"] == "entailed")].append(r)
    out: list[dict[str, Any]] = []
    for words in sorted({w for w, _ in by_length}):
        yes, no = by_length.get((words, True), []), by_length.get((words, False), [])
        keep = min(len(yes), len(no))
        out += rng.sample(yes, keep) + rng.sample(no, keep)
    rng.shuffle(out)
    return out


def sample(
    folder: Path,
    mix: dict[str, int | None],
    *,
    head: int = 2,
    seed: int = 13,
    valid: int = 0,
    keep: Callable[[dict[str, Any]], bool] | None = None,
    window: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    window_sources: frozenset[str] = frozenset(),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, int]]]:
    """``(train, valid, stats)`` for ``mix`` (rows per source; ``None``: all that pass).

    Rows get ``"y"``, their class index in ``HEADS[head]``. ``keep`` filters rows before
    sampling (``fits``), after ``window`` has cut the premises of ``window_sources``
    (``aligned_window``); ``valid`` rows per source are set aside first, never trained on.
    ``stats`` counts, per source, the rows read, kept by the guards, and taken, and the
    taken rows per class.
    """
    labels = _LABEL_OF[head]
    train: list[dict[str, Any]] = []
    held: list[dict[str, Any]] = []
    stats: dict[str, dict[str, int]] = {}
    for source, count in mix.items():
        rng = random.Random(f"{seed}:{source}")
        rows = read_source(folder, source)
        read = len(rows)
        if window is not None and source in window_sources:
            rows = [window(r) for r in rows]
        if keep is not None:
            rows = [r for r in rows if keep(r)]
        if source in LENGTH_BIASED:
            rows = length_balanced(rows, rng)
        else:
            rng.shuffle(rows)
        for r in rows:
            r["y"] = labels[r["label"]]
        held += rows[:valid]
        taken = rows[valid:] if count is None else rows[valid : valid + count]
        train += taken
        classes = Counter(HEADS[head][r["y"]] for r in taken)
        stats[source] = {"read": read, "kept": len(rows), "taken": len(taken), **classes}
    random.Random(seed).shuffle(train)
    return train, held, stats


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[a-z0-9]+")


def aligned_window(
    row: dict[str, Any], pieces: Callable[[str], int], budget: int
) -> dict[str, Any]:
    """``row`` with its premise cut to the adjacent sentences around the one sharing most
    words with the hypothesis, grown to the better-matching neighbour while the window stays
    within ``budget`` word pieces (unchanged when the premise already fits)."""
    if pieces(row["premise"]) <= budget:
        return row
    sentences = [s.strip() for s in _SENTENCE.split(row["premise"]) if s.strip()]
    if not sentences:
        return row
    hyp = set(_WORD.findall(row["hypothesis"].lower()))
    score = [len(hyp & set(_WORD.findall(s.lower()))) for s in sentences]
    cost = [pieces(s) for s in sentences]
    lo = hi = max(range(len(sentences)), key=lambda i: (score[i], -i))
    used = cost[lo]
    while True:
        options = [i for i in (lo - 1, hi + 1) if 0 <= i < len(sentences)]
        options = [i for i in options if used + cost[i] <= budget]
        if not options:
            break
        i = max(options, key=lambda k: (score[k], -k))
        used += cost[i]
        lo, hi = min(lo, i), max(hi, i)
    return {**row, "premise": " ".join(sentences[lo : hi + 1])}


def fits(tokenizer: Any, max_length: int, max_hypothesis: int) -> Callable[[dict[str, Any]], bool]:
    """A ``keep`` filter: the pair's premise is not cut at ``max_length`` word pieces (the
    hypothesis is cut to ``max_hypothesis`` pieces first, as ``_nli_model.encode_pairs``
    does)."""

    def keep(row: dict[str, Any]) -> bool:
        # Characters bound the pieces from above (one piece has at least one character, bar
        # [UNK]): most short pairs are decided without tokenising.
        if len(row["premise"]) + min(len(row["hypothesis"]), max_hypothesis) + 3 <= max_length:
            return True
        prem = len(tokenizer.encode(row["premise"], add_special_tokens=False).ids)
        hyp = len(tokenizer.encode(row["hypothesis"], add_special_tokens=False).ids)
        return prem + min(hyp, max_hypothesis) + 3 <= max_length

    return keep


MANIFEST = "manifest.json"
"""Beside a model's weights and ONNX files: what ``train_nli.py`` trained it on."""


def manifest_of(model: Path) -> Path:
    """The manifest of a model folder, or of the folder an ONNX file lies in."""
    return (model if model.is_dir() else model.parent) / MANIFEST


def leaked_rows(model: Path, evaluated: set[str]) -> tuple[bool, set[str]]:
    """(whether the model has a manifest, the evaluated row ids it trained on). The ids of
    its validation rows count too: they chose nothing, but they were read."""
    path = manifest_of(model)
    if not path.is_file():
        return False, set()
    data = json.loads(path.read_text("utf-8"))
    read = set(data.get("train_ids", [])) | set(data.get("valid_ids", []))
    return True, read & evaluated


LONG_DOCUMENT = frozenset({"fib", "summedits"})
"""Sources whose premise is a whole document (cut to an aligned window with ``--window``)."""


def guards(
    max_length: int, window: bool
) -> tuple[Callable[[dict[str, Any]], bool], Callable[[dict[str, Any]], dict[str, Any]] | None]:
    """The ``keep`` and ``window`` arguments of ``sample`` for pairs of ``max_length`` pieces,
    with the shared tokenizer of ``groundwatch.judging.judges._nli_model``."""
    import sys

    import tokenizers

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from groundwatch.judging.judges._nli_model import MAX_HYPOTHESIS_PIECES, build_tokenizer

    tok = build_tokenizer(tokenizers)[0]

    def pieces(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    def cut(row: dict[str, Any]) -> dict[str, Any]:
        budget = max_length - 3 - min(pieces(row["hypothesis"]), MAX_HYPOTHESIS_PIECES)
        return aligned_window(row, pieces, budget)

    return fits(tok, max_length, MAX_HYPOTHESIS_PIECES), cut if window else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nli-train", type=Path, default=default_dir())
    parser.add_argument("--mix", required=True)
    parser.add_argument("--head", type=int, choices=sorted(HEADS), default=2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--fit", type=int, default=128, help="drop rows cut at this many pieces")
    parser.add_argument("--window", action="store_true", help="aligned windows, long documents")
    args = parser.parse_args(argv)
    keep, window = guards(args.fit, args.window)
    _, _, stats = sample(
        args.nli_train,
        parse_mix(args.mix),
        head=args.head,
        seed=args.seed,
        keep=keep,
        window=window,
        window_sources=LONG_DOCUMENT,
    )
    for source, counts in stats.items():
        print(source, json.dumps(counts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
