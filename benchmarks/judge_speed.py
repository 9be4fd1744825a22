"""Throughput of the judges on one CPU core.

Default: the local judge on AttributionBench dev (one thread), and worst-case inputs. Prints
answers per second, median and p99 milliseconds per answer, for the judge alone
(``LocalJudge.judge``) and for the full ``groundwatch.evaluate`` (input checks, judge, evidence
verification, scoring), then the time of the largest inputs the caps allow.

``--detectors``: the published detectors at their real sizes beside the local judge, on one
answer (a 1,500-character context, a three-claim answer): HHEM-2.1-Open (the flan-t5-base
encoder), MiniCheck (RoBERTa-large, DeBERTa-v3-large, Flan-T5-large) and LettuceDetect
(ModernBERT base and large), each on PyTorch and on onnxruntime (an ONNX export). The models
have random weights of the real configurations (no weights can be downloaded here; speed and
memory depend on the shapes, not the values), and read random token ids of the length their
input has in each judge's layout (``_detector_speed.py`` beside this file says which). Each model
runs in a subprocess of its own on one thread, which reports its answers per second and its
peak resident memory (``ru_maxrss``: the runtime, the weights and the activations).

Times are CPU time of the measuring process (``time.process_time``), so other load on a shared
machine does not inflate them; every measured path runs on one thread, so CPU time is also its
wall time on an idle core.

Usage::

    python benchmarks/judge_speed.py [--data ../shared/data] [--repeat 3]
    python benchmarks/judge_speed.py --detectors [--repeat 3] [--cache /tmp/gw-detectors]
        [--only hhem lettucedetect-base ...] [--int8]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _stats import percentile  # noqa: E402
from accuracy import default_data_dir  # noqa: E402

import groundwatch as gw  # noqa: E402
from groundwatch._shared.inputs import prepare  # noqa: E402


def _huge_inputs() -> list[tuple[str, str, list[str]]]:
    rng = random.Random(0)
    letters = "abcdefghijklmnop"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(5000)]

    def prose(n: int) -> str:
        out: list[str] = []
        size = 0
        while size < n:
            words = " ".join(rng.choice(vocab) for _ in range(12))
            sentence = f"{words.capitalize()} in {rng.randint(1900, 2020)}."
            out.append(sentence)
            size += len(sentence) + 1
        return " ".join(out)[:n]

    return [
        (
            "64 x 50k-char distinct passages, 20k-char answer",
            prose(20_000),
            [prose(50_000) for _ in range(64)],
        ),
        (
            "100 x 56k-char repeated passages (capped to 64 x 50k), 28k-char answer",
            "Paris is big. " * 2_000,
            ["Paris is big. " * 4_000] * 100,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument("--repeat", type=int, default=3, help="passes over the set (best kept)")
    parser.add_argument(
        "--detectors", action="store_true", help="the detectors beside the local judge"
    )
    parser.add_argument(
        "--cache", type=Path, default=Path("/tmp/gw-detectors"), help="ONNX exports (reused)"
    )
    parser.add_argument("--only", nargs="*", help="--detectors: these models only")
    parser.add_argument(
        "--int8", action="store_true", help="--detectors: also the int8-quantised exports"
    )
    args = parser.parse_args(argv)
    if args.detectors:
        from _detector_speed import compare

        return compare(args.repeat, args.cache, args.only, args.int8)
    path = args.data / "attributionbench_dev.jsonl"
    with path.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    items = [prepare(r["answer"], r["context"], r.get("question") or None)[:3] for r in rows]
    ctx_chars = statistics.median(sum(len(p.text) for p in ps) for _, ps, _ in items)
    print(f"AttributionBench dev: {len(items)} answers, median context {ctx_chars:.0f} chars")
    judge = gw.LocalJudge()
    print(f"{'path':<34}{'answers/s':>10}{'median ms':>11}{'p99 ms':>9}")
    for label, run in (
        ("LocalJudge.judge", lambda a, p, q: judge.judge(a, p, q)),
        ("groundwatch.evaluate", lambda a, p, q: gw.evaluate(a, p, q, judge=judge)),
    ):
        best_total = float("inf")
        best_times: list[float] = []
        for _ in range(args.repeat):
            times = []
            start = time.process_time()
            for answer, passages, question in items:
                t0 = time.process_time()
                run(answer, passages, question)
                times.append(time.process_time() - t0)
            total = time.process_time() - start
            if total < best_total:
                best_total, best_times = total, times
        print(
            f"{label:<34}{len(items) / best_total:>10.0f}"
            f"{statistics.median(best_times) * 1000:>11.2f}"
            f"{percentile(best_times, 0.99) * 1000:>9.2f}"
        )
    print()
    print("largest inputs the caps allow (groundwatch.evaluate, one call):")
    for label, answer, contexts in _huge_inputs():
        t0 = time.process_time()
        ev = gw.evaluate(answer, contexts)
        elapsed = time.process_time() - t0
        print(f"  {label:<72}{elapsed:>7.2f} s  ({len(ev.claims)} claims, {ev.label})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
