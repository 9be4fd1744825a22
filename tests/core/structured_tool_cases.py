"""The structured tool-output case set: a tool's JSON output and an answer about it.

``structured_tool_cases.json`` holds 12 scenarios (an order, a flight, an account, rows of
shipments, a product list, an SQL result, a nested invoice, ...), each with six answers: the
faithful one, and one that changes a number, a unit (or currency), a date (a duration where the
output has no date), a name, or adds a claim the output says nothing about. Scenarios alternate
between the ``tune`` split (looked at while building the judge) and the ``held_out`` split (run
only to measure). :func:`measure` prints the accuracy of one split through the real monitor path
(the output becomes a ``tool`` passage exactly as the integrations make it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import groundwatch as gw
from groundwatch._shared.inputs import ToolOutput

CASES: list[dict[str, Any]] = json.loads(
    (Path(__file__).with_name("structured_tool_cases.json")).read_text(encoding="utf-8")
)


def expected(case: dict[str, Any]) -> str:
    """What a right judgement is: ``grounded`` for the faithful answer, ``contradicted`` (the
    label ``hallucinated`` with a contradicted claim) for a change, ``unsupported`` (the label
    ``hallucinated``, a claim unsupported and none contradicted) for an added claim."""
    category = case["category"]
    if category == "faithful":
        return "grounded"
    return "unsupported" if category == "extra" else "contradicted"


def outcome(ev: gw.Evaluation) -> str:
    """The judgement in the terms of :func:`expected`."""
    if ev.label == "grounded":
        return "grounded"
    verdicts = {c.verdict for c in ev.claims}
    if ev.label == "hallucinated" and "contradicted" in verdicts:
        return "contradicted"
    if ev.label == "hallucinated" and "unsupported" in verdicts:
        return "unsupported"
    return ev.label


def judge_case(case: dict[str, Any]) -> gw.Evaluation:
    passage = ToolOutput(case["output"], case["tool"]).passage()
    return gw.evaluate(case["answer"], [passage], question=case["question"])


def measure(split: str, *, verbose: bool = False) -> tuple[float, float, int]:
    """(strict accuracy, grounded-vs-not accuracy, n) on one split."""
    rows = [c for c in CASES if c["split"] == split]
    strict = binary = 0
    for case in rows:
        ev = judge_case(case)
        want, got = expected(case), outcome(ev)
        strict += want == got
        binary += (want == "grounded") == (ev.label == "grounded")
        if verbose and want != got:
            print(f"{case['id']:28} want {want:12} got {got:20} {case['answer']}")
            for c in ev.claims:
                print(f"    {c.verdict:12} {c.text!r}: {c.reason}")
    return strict / len(rows), binary / len(rows), len(rows)


if __name__ == "__main__":  # python tests/core/structured_tool_cases.py tune|held_out [-v]
    import sys

    split = sys.argv[1] if len(sys.argv) > 1 else "tune"
    s, b, n = measure(split, verbose="-v" in sys.argv)
    print(f"{split}: n={n} strict accuracy {s:.3f}, grounded-vs-not accuracy {b:.3f}")
