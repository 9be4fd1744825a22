"""The judges' measurements of every labelled answer in ``../shared/data``, cached outside the
repository, for ``training/calibrate_rates.py`` and ``benchmarks/rates.py``.

Measuring a claim is the slow part of the local judge (minutes for the 2,552 answers on two
cores) and does not depend on any fitted model, so it runs once: each answer's claim
measurements (``ClaimFeatures``) and claim labels go to a JSONL cache, and every refit (per
left-out source) decides verdicts from the cache in seconds. With ``--semantic`` each English
claim also gets its meaning match (``SemanticJudge``'s second look), when the ``semantic``
extra is installed.

A *source* is the origin of an answer: AttributionBench's ``source_dataset`` (AttributedQA,
ExpertQA, LFQA, Stanford-GenSearch), UHGEval and FaithBench.

Usage::

    python training/rates_data.py [--data ../shared/data] [--cache /tmp/gw-rates-cache.jsonl]
        [--semantic]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "training"))

from calibrate_local import Row, default_data_dir, load_rows, measure  # noqa: E402

from groundwatch.judging.judges.local._features import ClaimFeatures  # noqa: E402

DATASETS: dict[str, str] = {
    "attributionbench_dev": "en",
    "uhgeval_zh_dev": "zh",
    "faithbench_dev": "en",
}
"""Every labelled file and its language."""

EVALUATION_ONLY = frozenset({"FaithBench"})
"""Sources never fitted on (licence: evaluation use): always measured as left out."""

DEFAULT_CACHE = Path("/tmp/gw-rates-cache.jsonl")
CACHE_VERSION = 1
_CHUNK = 50


@dataclass
class Answer:
    """One labelled answer as the judges measured it."""

    dataset: str
    source: str
    lang: str
    hallucinated: bool
    row: Row
    matches: list[float | None] | None = None
    """The meaning match of each claim (``SemanticJudge``), where measured."""


def source_of(dataset: str, record: dict[str, Any]) -> str:
    """The source an answer counts under: AttributionBench's sub-source, or the set's name."""
    if dataset == "attributionbench_dev":
        return str(record["source_dataset"]).removeprefix("AttributionBench/")
    return {"uhgeval_zh_dev": "UHGEval", "faithbench_dev": "FaithBench"}[dataset]


_TUPLE_FIELDS = {"best_span", "window_span"}


def _features_from(data: dict[str, Any]) -> ClaimFeatures:
    known = {f.name for f in fields(ClaimFeatures)}
    values = {k: v for k, v in data.items() if k in known}
    for name in _TUPLE_FIELDS:
        if values.get(name) is not None:
            values[name] = tuple(values[name])
    values["candidate_windows"] = tuple(tuple(w) for w in values.get("candidate_windows", ()))
    return ClaimFeatures(**values)


def _to_json(answer: Answer) -> dict[str, Any]:
    row = answer.row
    return {
        "v": CACHE_VERSION,
        "dataset": answer.dataset,
        "source": answer.source,
        "lang": answer.lang,
        "hallucinated": answer.hallucinated,
        "index": row.index,
        "substantive": row.substantive,
        "features": [asdict(f) for f in row.features],
        "claim_labels": row.claim_labels,
        "matches": answer.matches,
    }


def _from_json(data: dict[str, Any]) -> Answer:
    row = Row(
        dataset=data["dataset"],
        index=data["index"],
        faithful=not data["hallucinated"],
        source=data["source"],
        substantive=data["substantive"],
        features=[_features_from(f) for f in data["features"]],
        claim_labels=data["claim_labels"],
    )
    return Answer(
        dataset=data["dataset"],
        source=data["source"],
        lang=data["lang"],
        hallucinated=data["hallucinated"],
        row=row,
        matches=data.get("matches"),
    )


def load_cache(path: Path = DEFAULT_CACHE) -> list[Answer]:
    """Every cached answer, in file order."""
    with path.open(encoding="utf-8") as fh:
        return [_from_json(json.loads(line)) for line in fh if line.strip()]


def _chunks(rows: Sequence[dict[str, Any]]) -> Iterator[tuple[int, Sequence[dict[str, Any]]]]:
    for start in range(0, len(rows), _CHUNK):
        yield start, rows[start : start + _CHUNK]


def build(data_dir: Path, cache: Path, semantic: bool) -> int:
    """Measure every answer and write the cache; returns the number of answers."""
    judge = None
    if semantic:
        from calibrate_semantic import measure as measure_with_meaning

        from groundwatch.judging.judges.semantic import SemanticJudge

        judge = SemanticJudge()
    tmp = cache.with_suffix(".partial")
    done = 0
    began = time.monotonic()
    with tmp.open("w", encoding="utf-8") as out:
        for dataset, lang in DATASETS.items():
            records = load_rows(data_dir / f"{dataset}.jsonl")
            for start, chunk in _chunks(records):
                matches: list[list[float | None] | None] = [None] * len(chunk)
                if judge is not None and lang == "en":
                    # The meaning match measures the claims too: one pass gives both.
                    matched = measure_with_meaning(judge, chunk)
                    measured = [
                        Row(dataset, 0, m.faithful, "", m.substantive, m.features, m.claim_labels)
                        for m in matched
                    ]
                    matches = [m.matches for m in matched]
                else:
                    measured = measure(dataset, chunk)
                for i, (record, row) in enumerate(zip(chunk, measured, strict=True)):
                    row.index = start + i
                    row.source = source_of(dataset, record)
                    answer = Answer(
                        dataset=dataset,
                        source=row.source,
                        lang=lang,
                        hallucinated=record["label"] == "hallucinated",
                        row=row,
                        matches=matches[i],
                    )
                    out.write(json.dumps(_to_json(answer), ensure_ascii=False) + "\n")
                done += len(chunk)
                print(
                    f"{dataset}: {start + len(chunk)}/{len(records)} "
                    f"({done} answers, {time.monotonic() - began:.0f} s)",
                    flush=True,
                )
    tmp.replace(cache)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument(
        "--semantic", action="store_true", help="also measure the meaning match of English claims"
    )
    args = parser.parse_args(argv)
    n = build(args.data, args.cache, args.semantic)
    print(f"wrote {n} answers to {args.cache}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
