"""LLM judge benchmark against a local fake OpenAI-compatible server with a fixed reply latency.

Measures, in one run:
  1. calls per answer (first requests; retries reported separately), throughput at the default
     concurrency, with a clean endpoint and with 5% of replies a 429 + Retry-After;
  2. prompt tokens per answer against the size of context + answer, as contexts grow (the
     context budget keeps cost tied to the answer);
  3. the cascade (LocalJudge -> OpenAIJudge) on AttributionBench dev: share of answers escalated,
     and the share at other ``min_confidence`` settings;
  4. cost per 1,000 answers from the measured tokens at assumed list prices.

The "model" is deterministic (lexical alignment, testkit/fake_openai.py), so verdict
quality is not measured here; token counts use the judge's estimator (chars/4, CJK 1/char) on
the server side, as a real tokenizer would count them within about +-30%.

With ``--base-url`` it measures a real model behind a real OpenAI-compatible server instead
(``real_model`` below): balanced accuracy of the label on a balanced sample of AttributionBench
and FaithBench dev rows, the local judge's on the same rows beside it, requests and tokens per
answer, seconds per answer, the share of replies that needed the tolerant parser or a retry,
and the error types. Answers go one at a time (a small local server serves one request at a
time anyway); progress goes to stderr, one line per answer, and every row's result to
``--out`` (JSONL) as it finishes.

Usage:
  PYTHONPATH=src python benchmarks/llm_judge.py [--data ../shared/data] [--limit 400]
  PYTHONPATH=src python benchmarks/llm_judge.py --base-url http://127.0.0.1:8088/v1 \
      --model qwen2.5-coder-1.5b-instruct --limit 60 --faithbench-limit 40 --out rows.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from accuracy import default_data_dir  # noqa: E402

import groundwatch as gw  # noqa: E402
from groundwatch.judging.judges.cascade import DEFAULT_MIN_CONFIDENCE  # noqa: E402
from groundwatch.judging.text.lexical import estimate_tokens  # noqa: E402
from testkit.fake_openai import (  # noqa: E402
    FakeOpenAIServer,
    Recorded,
    Reply,
    honest_model,
    parse_prompt,
)

LATENCY_S = 0.2
REASON = "The passage states this directly, with the same figures and names."  # ~15 tokens

# Assumed list prices, USD per 1M tokens (input, output) — OpenAI's published standard-tier
# prices in 2025; check the provider's pricing page before relying on them.
PRICES = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
}


def load(path: Path, limit: int | None, seed: int = 7) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.open(encoding="utf-8")]
    if limit is not None and limit < len(rows):
        rows = random.Random(seed).sample(rows, limit)
    return rows


def honest(request: Recorded) -> dict[str, Any]:
    return honest_model(parse_prompt(request.user), reason=REASON)


class Flaky:
    """5% of requests (every 20th) get a 429 with Retry-After."""

    def __init__(self) -> None:
        self.n = 0

    def __call__(self, request: Recorded) -> Reply | dict[str, Any]:
        self.n += 1
        if self.n % 20 == 0:
            return Reply(status=429, headers={"Retry-After": "0.2"}, error="rate limited")
        return honest(request)


def _serve(conn: Any, responder: str, latency: float) -> None:
    chosen = {"honest": honest, "flaky": Flaky()}[responder]
    with FakeOpenAIServer(chosen, latency=latency) as srv:
        conn.send(srv.url)
        conn.recv()
        conn.send({"requests": len(srv.completions()), "max_in_flight": srv.max_in_flight})


@contextlib.contextmanager
def server_process(responder: str, latency: float) -> Iterator[tuple[str, dict[str, int]]]:
    """The fake endpoint in its own process, so its CPU does not compete with the judge's
    (a real endpoint is elsewhere too). Yields the URL and a dict filled with its counters
    when the block ends."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_serve, args=(child, responder, latency), daemon=True)
    proc.start()
    stats: dict[str, int] = {}
    try:
        yield parent.recv(), stats
    finally:
        parent.send("stop")
        stats.update(parent.recv())
        proc.join(10)


async def run_all(judge: Any, rows: list[dict[str, Any]]) -> tuple[list[gw.Evaluation], float]:
    started = time.perf_counter()
    results = await asyncio.gather(
        *(gw.aevaluate(r["answer"], r["context"], r["question"] or None, judge=judge) for r in rows)
    )
    return list(results), time.perf_counter() - started


def throughput(rows: list[dict[str, Any]], flaky: bool) -> dict[str, Any]:
    with server_process("flaky" if flaky else "honest", LATENCY_S) as (url, srv):
        judge = gw.OpenAIJudge("bench", base_url=url, api_key="unused", cache_size=0)
        try:
            asyncio.run(run_all(judge, rows[:8]))  # warm up connections; not counted
            before = judge.stats.requests, judge.stats.retries, judge.stats.evaluations
            results, wall = asyncio.run(run_all(judge, rows))
            s = judge.stats
            requests = s.requests - before[0]
            retries = s.retries - before[1]
            n = s.evaluations - before[2]
            errors = sum(r.label == "error" for r in results)
            usage = [r.usage for r in results if r.usage]
        finally:
            judge.close()
    return {
        "endpoint": "5% 429 (Retry-After 0.2 s)" if flaky else "clean",
        "answers": n,
        "calls_per_answer": (requests - retries - s.reply_retries - s.format_fallbacks) / n,
        "retries_per_answer": retries / n,
        "errors": errors,
        "evals_per_s": n / wall,
        "concurrency": judge.concurrency,
        "in": statistics.mean(u.input_tokens for u in usage),
        "out": statistics.mean(u.output_tokens for u in usage),
        "max_in_flight": srv["max_in_flight"],
    }


def raw_client_rate(rows: list[dict[str, Any]], concurrency: int) -> float:
    """The bare ``AsyncOpenAI`` client against the same server at the same concurrency: the
    ceiling for any judge built on it (same prompts, no groundwatch code around them)."""
    import openai

    from groundwatch.judging.judges._prompt import build_prompt

    prompts = [
        build_prompt(
            r["answer"],
            [gw.Passage(text=p) for p in r["context"]],
            r["question"],
            max_context_tokens=3000,
        ).messages
        for r in rows
    ]

    async def go(url: str) -> float:
        client = openai.AsyncOpenAI(api_key="unused", base_url=url, max_retries=0)
        sem = asyncio.Semaphore(concurrency)

        async def one(messages: Any) -> None:
            async with sem:
                await client.chat.completions.create(model="bench", messages=messages)

        await asyncio.gather(*(one(m) for m in prompts[:8]))
        started = time.perf_counter()
        await asyncio.gather(*(one(m) for m in prompts))
        rate = len(prompts) / (time.perf_counter() - started)
        await client.close()
        return rate

    with server_process("honest", LATENCY_S) as (url, _srv):
        return asyncio.run(go(url))


def context_scaling(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Grow each answer's context with other rows' passages; measure prompt tokens."""
    pool = [p for r in rows for p in r["context"]]
    rng = random.Random(3)
    sample = rows[:40]
    out = []
    with FakeOpenAIServer(honest, latency=0.0) as srv:
        judge = gw.OpenAIJudge("bench", base_url=srv.url, api_key="unused", cache_size=0)
        try:
            for target in (0, 2_000, 8_000, 32_000):
                padded = []
                for r in sample:
                    ctx = list(r["context"])
                    while sum(estimate_tokens(p) for p in ctx) < target:
                        ctx.append(rng.choice(pool))
                    rng.shuffle(ctx)
                    padded.append({**r, "context": ctx})
                results, _ = asyncio.run(run_all(judge, padded))
                size = [
                    sum(estimate_tokens(p) for p in r["context"]) + estimate_tokens(r["answer"])
                    for r in padded
                ]
                prompt = [ev.usage.input_tokens for ev in results if ev.usage]
                out.append(
                    {
                        "target": target,
                        "context_answer": statistics.mean(size),
                        "prompt": statistics.mean(prompt),
                        "ratio": statistics.mean(p / s for p, s in zip(prompt, size, strict=True)),
                    }
                )
        finally:
            judge.close()
    return out


def cascade(rows: list[dict[str, Any]]) -> dict[str, Any]:
    with server_process("honest", LATENCY_S) as (url, _srv):
        llm = gw.OpenAIJudge("bench", base_url=url, api_key="unused", cache_size=0)
        judge = gw.CascadeJudge(first=gw.LocalJudge(), then=llm)
        try:
            results, wall = asyncio.run(run_all(judge, rows))
        finally:
            llm.close()
        # The same rule at other thresholds, from the local judge's own confidences.
        local = gw.LocalJudge()
        firsts = [
            local.judge(r["answer"], [gw.Passage(text=p) for p in r["context"]], r["question"])
            for r in rows
        ]
        confidences = [
            c.confidence for j in firsts if isinstance(j, gw.Judgement) for c in j.claims
        ]
        sweep = {}
        for t in (0.5, 0.6, DEFAULT_MIN_CONFIDENCE, 0.7, 0.8, 0.9):
            probe = gw.CascadeJudge(first=local, then=llm, min_confidence=t)
            sweep[t] = sum(probe.should_escalate(j) for j in firsts if isinstance(j, gw.Judgement))
        return {
            "answers": judge.total,
            "escalated": judge.escalated,
            "rate": judge.escalation_rate,
            "wall": wall,
            "requests": llm.stats.requests,
            "sweep": {t: n / len(rows) for t, n in sweep.items()},
            "claims": len(confidences),
            "unknown_confidence": sum(c is None for c in confidences),
            "errors": sum(r.label == "error" for r in results),
        }


def balanced_sample(path: Path, n: int, seed: int = 11) -> list[dict[str, Any]]:
    """``n`` rows, faithful and hallucinated alternating (as far as the set has them).

    Each label's rows are shuffled once with ``seed`` and taken from the front, so a smaller
    ``n`` gives a prefix of a larger one: a quick run is the start of the full run.
    """
    rows = [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]
    pools = []
    for label in ("faithful", "hallucinated"):
        pool = [r for r in rows if r["label"] == label]
        random.Random(f"{seed}-{label}").shuffle(pool)
        pools.append(pool)
    out: list[dict[str, Any]] = []
    for pair in zip(*pools, strict=False):
        out.extend(pair)
    return out[:n]


def predicted_grounded(label: str) -> bool:
    """benchmarks/accuracy.py's mapping: grounded and no_claims count as grounded."""
    return label in ("grounded", "no_claims")


def balanced_accuracy(pairs: list[tuple[bool, bool]]) -> float:
    """Mean recall of the two classes over ``(predicted grounded, gold grounded)`` pairs."""
    pos = [p for p, g in pairs if g]
    neg = [p for p, g in pairs if not g]
    r_pos = sum(pos) / len(pos) if pos else 0.0
    r_neg = sum(not p for p in neg) / len(neg) if neg else 0.0
    return (r_pos + r_neg) / 2


def real_model(args: argparse.Namespace) -> int:
    """Accuracy, cost and reply quality of a real model through a real server."""
    from groundwatch.judging.judges._prompt import PROMPT_VERSION

    sets = [("attributionbench_dev", args.limit), ("faithbench_dev", args.faithbench_limit)]
    picked = [
        [(name, r) for r in balanced_sample(args.data / f"{name}.jsonl", n)]
        for name, n in sets
        if n
    ]
    # Interleaved in proportion, so a run stopped by --max-seconds still covers both sets.
    order = [((k + 0.5) / len(p), item) for p in picked for k, item in enumerate(p)]
    rows = [item for _, item in sorted(order, key=lambda pair: pair[0])]
    total = len(rows)
    judge = gw.OpenAIJudge(
        args.model,
        base_url=args.base_url,
        api_key=args.api_key,
        timeout_seconds=args.timeout,
        max_output_tokens=args.max_output_tokens,
        cache_size=0,
        concurrency=1,
    )
    local = gw.LocalJudge()
    replies = record_replies()
    out = args.out.open("w", encoding="utf-8") if args.out else None
    results: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        for i, (name, r) in enumerate(rows, start=1):
            if args.max_seconds and time.perf_counter() - started > args.max_seconds:
                print(f"--max-seconds reached: stopping after {i - 1} of {total}", file=sys.stderr)
                break
            before = dict(vars(judge.stats))
            replies.clear()
            t0 = time.perf_counter()
            ev = gw.evaluate(r["answer"], r["context"], r["question"] or None, judge=judge)
            seconds = time.perf_counter() - t0
            after = vars(judge.stats)
            delta = {k: after[k] - before[k] for k in after}
            lev = gw.evaluate(r["answer"], r["context"], r["question"] or None, judge=local)
            row = {
                "set": name,
                "id": r["id"],
                "gold": r["label"],
                "label": ev.label,
                "local_label": lev.label,
                "error_type": ev.error_type,
                "seconds": round(seconds, 2),
                "requests": delta["requests"],
                "input_tokens": delta["input_tokens"],
                "output_tokens": delta["output_tokens"],
                "tolerant": delta["tolerant_replies"],
                "retried": delta["reply_retries"] + delta["length_retries"] + delta["retries"],
                "format_fallbacks": delta["format_fallbacks"],
                "evidence_rejected": ev.evidence_rejected,
                "verdicts": [c.verdict for c in ev.claims],
                "reasons": [c.reason[:160] for c in ev.claims],
                "label_no_snap": label_without_snapping(replies, r),
                "replies": list(replies),
            }
            results.append(row)
            if out:
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
                out.flush()
            print(
                f"[{i}/{len(rows)}] {name} gold={r['label']} llm={ev.label}"
                f"{'/' + str(ev.error_type) if ev.error_type else ''} local={lev.label} "
                f"{seconds:.1f}s req={delta['requests']} rejected={ev.evidence_rejected}",
                file=sys.stderr,
                flush=True,
            )
    finally:
        judge.close()
        if out:
            out.close()
    wall = time.perf_counter() - started
    print(f"# LLM judge, real model: {args.model} at {args.base_url}")
    print(
        f"prompt {PROMPT_VERSION}; negotiated response_format: {judge.negotiated_format}; "
        f"max_output_tokens {args.max_output_tokens}; {len(results)} answers in {wall:.0f} s\n"
    )
    report(results)
    return 0


def record_replies() -> list[str | None]:
    """The raw content of every reply the judge reads, for the per-row record."""
    from groundwatch.judging.judges.openai import _judge as judge_module

    seen: list[str | None] = []
    original = judge_module.read_reply

    def recording(text: str | None) -> Any:
        seen.append(text)
        return original(text)

    judge_module.read_reply = recording  # type: ignore[assignment]
    return seen


def label_without_snapping(replies: list[str | None], row: dict[str, Any]) -> str | None:
    """The label the same reply gets when quotes not found verbatim are not snapped to their
    passage sentence (``Checks.min_snap_coverage=0``): the effect of snapping, reply for reply."""
    from groundwatch.judging.judges._reply import Checks, parse_reply, to_claims

    items = parse_reply(replies[-1]) if replies else None
    if items is None:
        return None
    passages = [gw.Passage(text=t) for t in row["context"]]
    claims = to_claims(items, row["answer"], passages, Checks(min_snap_coverage=0.0)).claims
    return gw.scoring.score(gw.Judgement(claims=claims), row["answer"], passages).label


def report(results: list[dict[str, Any]]) -> None:
    """The tables of :func:`real_model` from its per-row results (also from a saved --out)."""
    print(
        "| set | answers | BA LLM (errors as wrong) | BA LLM (answered) | BA local, same rows "
        "| errors | LLM says grounded | local says grounded |"
    )
    print("|---|---|---|---|---|---|---|---|")
    names = [*sorted({r["set"] for r in results}), "all"]
    for name in names:
        rs = [r for r in results if name in ("all", r["set"])]
        gold = [r["gold"] == "faithful" for r in rs]
        llm = [
            (not g) if r["label"] == "error" else predicted_grounded(r["label"])
            for r, g in zip(rs, gold, strict=True)
        ]
        answered = [
            (predicted_grounded(r["label"]), g)
            for r, g in zip(rs, gold, strict=True)
            if r["label"] != "error"
        ]
        loc = [predicted_grounded(r["local_label"]) for r in rs]
        errors = sum(r["label"] == "error" for r in rs)
        print(
            f"| {name} | {len(rs)} | {balanced_accuracy(list(zip(llm, gold, strict=True))):.3f} "
            f"| {balanced_accuracy(answered):.3f} "
            f"| {balanced_accuracy(list(zip(loc, gold, strict=True))):.3f} | {errors} "
            f"| {sum(predicted_grounded(r['label']) for r in rs) / len(rs):.0%} "
            f"| {sum(loc) / len(rs):.0%} |"
        )
    with_replies = [r for r in results if r.get("label_no_snap")]
    if with_replies:
        gold = [r["gold"] == "faithful" for r in with_replies]
        snap = [predicted_grounded(r["label"]) for r in with_replies]
        no_snap = [predicted_grounded(r["label_no_snap"]) for r in with_replies]
        ba_snap = balanced_accuracy(list(zip(snap, gold, strict=True)))
        ba_no_snap = balanced_accuracy(list(zip(no_snap, gold, strict=True)))
        print(
            f"\nsame replies, {len(with_replies)} answers: BA {ba_snap:.3f} with quotes snapped "
            f"to their passage sentence, {ba_no_snap:.3f} without"
        )
    n = len(results)
    print("\n| per answer | mean | median |")
    print("|---|---|---|")
    for key in ("seconds", "requests", "input_tokens", "output_tokens"):
        values = [r[key] for r in results]
        print(f"| {key} | {statistics.mean(values):.1f} | {statistics.median(values):.1f} |")
    tolerant = sum(r["tolerant"] > 0 for r in results)
    retried = sum(r["retried"] > 0 for r in results)
    print(
        f"\nreplies needing the tolerant parser: {tolerant}/{n} = {tolerant / n:.0%}; answers "
        f"with a retry (unusable or cut reply, transient error): {retried}/{n} = {retried / n:.0%}"
    )
    verdicts = Counter(v for r in results for v in r["verdicts"])
    rejected = sum(r["evidence_rejected"] for r in results)
    print(
        f"claim verdicts: {dict(sorted(verdicts.items()))}; verdicts downgraded by evidence "
        f"checks in scoring: {rejected}"
    )
    errors = Counter(r["error_type"] for r in results if r["error_type"])
    print(f"error types: {dict(errors) or 'none'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=default_data_dir())
    parser.add_argument(
        "--limit", type=int, default=400, help="answers for throughput (random sample)"
    )
    parser.add_argument(
        "--cascade-limit", type=int, default=None, help="answers for the cascade (default: all)"
    )
    parser.add_argument("--base-url", help="a real OpenAI-compatible endpoint (real-model mode)")
    parser.add_argument("--model", default="local-model", help="model name for --base-url")
    parser.add_argument("--api-key", default=None)
    parser.add_argument(
        "--faithbench-limit", type=int, default=None, help="FaithBench rows (default: --limit)"
    )
    parser.add_argument("--max-output-tokens", type=int, default=1024)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    parser.add_argument("--out", type=Path, default=None, help="per-row results (JSONL)")
    parser.add_argument(
        "--max-seconds", type=float, default=None, help="start no new answer after this long"
    )
    parser.add_argument("--report", type=Path, default=None, help="print the tables of an --out")
    args = parser.parse_args()
    if args.report:
        report([json.loads(line) for line in args.report.open(encoding="utf-8")])
        return 0
    if args.base_url:
        if args.faithbench_limit is None:
            args.faithbench_limit = args.limit
        return real_model(args)
    path = args.data / "attributionbench_dev.jsonl"
    rows = load(path, args.limit)
    all_rows = load(path, args.cascade_limit)
    started = time.perf_counter()

    print(f"# LLM judge vs fake OpenAI-compatible server, {LATENCY_S * 1000:.0f} ms per reply")
    print(f"data: {path} ({len(rows)} answers sampled for throughput, seed 7)\n")
    print("## Calls and throughput at the default concurrency")
    print(
        "| endpoint | answers | calls/answer | retries/answer | errors | evaluations/s "
        "| concurrency | max in flight | input tok/answer | output tok/answer |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for flaky in (False, True):
        t = throughput(rows, flaky)
        print(
            f"| {t['endpoint']} | {t['answers']} | {t['calls_per_answer']:.2f} "
            f"| {t['retries_per_answer']:.3f} | {t['errors']} | {t['evals_per_s']:.1f} "
            f"| {t['concurrency']} | {t['max_in_flight']} | {t['in']:.0f} | {t['out']:.0f} |"
        )
        if not flaky:
            clean = t
    raw = raw_client_rate(rows, clean["concurrency"])
    print(
        f"| bare AsyncOpenAI client, same prompts (ceiling) | {len(rows)} | 1.00 | 0 | - "
        f"| {raw:.1f} | {clean['concurrency']} | - | - | - |"
    )
    print(f"\nLLM judge / bare client throughput: {clean['evals_per_s'] / raw:.2f}")

    print("\n## Prompt tokens per answer as the context grows (budget 3,000 context tokens)")
    print(
        "| context padded to | context+answer tokens | prompt tokens | prompt / (context+answer) |"
    )
    print("|---|---|---|---|")
    scaling = context_scaling(rows)
    for row in scaling:
        print(
            f"| {row['target']:,} | {row['context_answer']:,.0f} | {row['prompt']:,.0f} "
            f"| {row['ratio']:.2f} |"
        )

    print(
        f"\n## Cascade LocalJudge -> OpenAIJudge on AttributionBench dev ({len(all_rows)} answers)"
    )
    c = cascade(all_rows)
    print(
        f"escalated {c['escalated']} of {c['answers']} answers = {c['rate']:.1%} "
        f"(min_confidence {DEFAULT_MIN_CONFIDENCE}; LLM requests {c['requests']}; "
        f"errors {c['errors']}; {c['wall']:.1f} s)"
    )
    print(
        f"local judge claims: {c['claims']}, without a confidence: {c['unknown_confidence']} "
        "(a claim without confidence always escalates)"
    )
    print("| min_confidence | " + " | ".join(f"{t}" for t in c["sweep"]) + " |")
    print("|---|" + "---|" * len(c["sweep"]))
    print("| escalated | " + " | ".join(f"{v:.1%}" for v in c["sweep"].values()) + " |")

    print("\n## Cost per 1,000 answers (measured tokens x assumed list prices, USD)")
    print(
        f"tokens per answer: {clean['in']:.0f} in, {clean['out']:.0f} out "
        "(fake model's replies: claim + quote + a ~15-token reason per claim)"
    )
    long_in = scaling[-1]["prompt"]
    print(
        f"long contexts ({scaling[-1]['context_answer']:,.0f} tokens, trimmed to the budget): "
        f"{long_in:,.0f} in"
    )
    print(
        "| model | $/1M in | $/1M out | AttributionBench-size contexts | 32k-token contexts "
        "| cascade at measured escalation (AttributionBench) |"
    )
    print("|---|---|---|---|---|---|")
    for model, (pin, pout) in PRICES.items():
        per_1k = 1000 * (clean["in"] * pin + clean["out"] * pout) / 1e6
        per_1k_long = 1000 * (long_in * pin + clean["out"] * pout) / 1e6
        print(
            f"| {model} | {pin:.2f} | {pout:.2f} | {per_1k:.3f} | {per_1k_long:.3f} "
            f"| {per_1k * c['rate']:.3f} |"
        )
    print(f"\ntotal benchmark time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
