"""A known report: every verdict, Chinese text, hostile HTML, an invalid row, human labels."""

from __future__ import annotations

from pathlib import Path

from groundwatch.check.cli import GateOptions, run_check
from groundwatch.check.summary import CheckSummary

from .conftest import ScriptedJudge, write_jsonl

EN_CONTEXT = [
    "Refund policy. Customers may return any unused item within 30 days of delivery.",
    "Refunds are paid to the original payment method within 5 business days.",
]
ZH_CONTEXT = ["公司2023年全年销售额为500万元，比上年增长20%。新产品线贡献了三分之一的收入。"]
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

ROWS = [
    {
        "id": "mixed-en",
        "question": "Can I get my money back?",
        "contexts": EN_CONTEXT,
        "answer": (
            "You can return an unused item within 30 days. "
            "Refunds arrive within a week. "
            "Refunds are paid within 10 business days. "
            "Shipping is free."
        ),
        "label": "hallucinated",
    },
    {
        "id": "grounded-en",
        "question": "How is the refund paid?",
        "contexts": EN_CONTEXT,
        "answer": "Refunds are paid to the original payment method within 5 business days.",
        "label": "faithful",
    },
    {
        "id": "sales-zh",
        "question": "公司去年的销售额是多少？",
        "contexts": ZH_CONTEXT,
        "answer": "公司2023年全年销售额为800万元。新产品线贡献了三分之一的收入。",
        "label": "hallucinated",
    },
    {
        "id": "hostile",
        "question": HOSTILE,
        "contexts": [HOSTILE + " Shipping is free."],
        "answer": "Shipping is free. " + HOSTILE,
        "label": "faithful",
    },
    {"id": "refusal", "contexts": EN_CONTEXT, "answer": "I don't know.", "label": "faithful"},
    {"id": "broken", "contexts": EN_CONTEXT},  # no answer: an invalid row
]

VERDICTS: dict[str, tuple[str, str | None]] = {
    "You can return an unused item within 30 days.": (
        "supported",
        "return any unused item within 30 days",
    ),
    "Refunds arrive within a week.": ("inferred", "within 5 business days"),
    "Refunds are paid within 10 business days.": ("contradicted", "within 5 business days"),
    "Shipping is free.": ("unsupported", None),
    "Refunds are paid to the original payment method within 5 business days.": (
        "supported",
        "Refunds are paid to the original payment method within 5 business days.",
    ),
    "公司2023年全年销售额为800万元。": ("contradicted", "全年销售额为500万元"),
    "新产品线贡献了三分之一的收入。": ("supported", "新产品线贡献了三分之一的收入。"),
}


def build_report(tmp_path: Path, baseline: Path | None = None) -> tuple[Path, CheckSummary, int]:
    data = write_jsonl(tmp_path / "report_cases.jsonl", ROWS)
    out = tmp_path / "report.html"
    code, summary, _ = run_check(
        data,
        ScriptedJudge(VERDICTS),
        GateOptions(max_flag_share=0.5),
        html_out=out,
        concurrency=2,
        baseline=baseline,
    )
    return out, summary, code


def all_grounded_baseline(tmp_path: Path) -> Path:
    """A previous run's ``--json`` in which every row passed: the hallucinated rows of
    :func:`build_report` are then newly failing."""
    lines = [
        {"kind": "evaluation", "row": i, "id": row["id"], "evaluation": {"label": "grounded"}}
        for i, row in enumerate(ROWS, start=1)
    ]
    lines.append({"kind": "summary"})
    return write_jsonl(tmp_path / "baseline.json", lines)


__all__ = ["HOSTILE", "ROWS", "all_grounded_baseline", "build_report"]
