"""The HTML report as a file: self-contained, escaped, highlighted by verdict."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

from groundwatch.check.answer_cards import highlight_answer
from groundwatch.check.report import HtmlReportWriter
from groundwatch.check.rows import Row
from groundwatch.check.summary import CheckSummary
from groundwatch.types import Claim, Evaluation

from .report_cases import HOSTILE, build_report


def test_report_is_self_contained_and_escapes_user_text(tmp_path: Path) -> None:
    out, _, code = build_report(tmp_path)
    assert code == 2  # the invalid row
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert '<meta charset="utf-8">' in page
    # Nothing is loaded from elsewhere: no external src/href, no CSS imports or url().
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(" not in page
    # The hostile text shows as text; the only script element is ours.
    assert HOSTILE not in page
    assert "&lt;script&gt;window.__pwned = 1&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=&quot;window.__pwned = 2&quot;&gt;" in page
    assert page.count("<script") == 1
    # The Content-Security-Policy allows exactly that script, by hash.
    script = re.search(r"<script>(.*?)</script>", page, re.S)
    assert script is not None
    digest = base64.b64encode(hashlib.sha256(script.group(1).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in page
    assert "default-src 'none'" in page


def test_report_marks_claims_by_verdict_with_chinese_and_evidence(tmp_path: Path) -> None:
    out, _, _ = build_report(tmp_path)
    page = out.read_text(encoding="utf-8")
    marks = re.findall(r'<mark class="claim v-(\w+)" data-claim="\d+" data-verdict="\w+"', page)
    # Worst first: sales-zh (faithfulness 0.5, groundedness 0.5): 2; mixed-en (0.75, 0.5): 4;
    # hostile (1.0, 0.0): 1; grounded-en: 1 (+ the legend has none with data-claim).
    assert marks == [
        "contradicted",
        "supported",
        "supported",
        "inferred",
        "contradicted",
        "unsupported",
        "unsupported",
        "supported",
    ]
    assert '<article class="case" data-label="hallucinated" data-mismatch="false" lang="zh"' in page
    assert "公司2023年全年销售额为800万元。" in page
    # Evidence quote with its passage number, and the passage with the quote marked.
    assert '“within 5 business days”</span> <span class="pn">(passage 2)</span>' in page
    assert "<mark>全年销售额为500万元</mark>" in page
    assert 'data-label="invalid"' in page and "field answer: missing" in page


def test_highlight_uses_offsets_and_lists_the_rest() -> None:
    answer = "Alpha is one. Beta is two. Gamma <b>."
    claims = [
        Claim(text="Beta is two.", start=14, end=26, verdict="contradicted"),
        Claim(text="Alpha is one.", start=0, end=13, verdict="supported"),
        Claim(text="a rephrased claim", verdict="unsupported"),  # no offsets
        Claim(text="is two. Gamma", start=19, end=32, verdict="inferred"),  # overlaps
    ]
    html, located = highlight_answer(answer, claims)
    assert located == {0, 1}
    assert html.startswith('<mark class="claim v-supported" data-claim="1"')
    assert '>Beta is two.<sup aria-label="contradicted">✗</sup></mark>' in html
    assert html.endswith(" Gamma &lt;b&gt;.")


def test_report_caps_cards_per_label_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    writer = HtmlReportWriter(out, max_cases_per_label=3)
    summary = CheckSummary()
    for n in range(1, 21):
        label = "hallucinated" if n % 10 == 0 else "grounded"
        ev = Evaluation(label=label, faithfulness=1.0, groundedness=1.0 if n % 10 else 0.0)  # type: ignore[arg-type]
        row = Row(n, None, None, ["ctx"], f"answer {n}", None)
        summary.add(row, ev)
        writer.add(row, ev, 0.0)
    writer.close(summary, summary.thresholds(), 0)
    page = out.read_text(encoding="utf-8")
    # 3 grounded cards (of 18) and both hallucinated ones, which grounded answers cannot crowd
    # out; the hallucinated ones first (worst first), each label in input order.
    assert re.findall(
        r'data-label="(\w+)" data-mismatch="false" lang="en" id="row-(\d+)"', page
    ) == [
        ("hallucinated", "10"),
        ("hallucinated", "20"),
        ("grounded", "1"),
        ("grounded", "2"),
        ("grounded", "3"),
    ]
    assert "left out: 15 grounded (every answer is in the --json output)" in page
    assert ">grounded (18)</button>" in page


def test_cards_are_worst_first(tmp_path: Path) -> None:
    out, _, _ = build_report(tmp_path)
    page = out.read_text(encoding="utf-8")
    order = re.findall(r'<article class="case" data-label="(\w+)"[^>]* id="row-(\d+)"', page)
    # hallucinated by faithfulness then groundedness, then invalid, no_claims, grounded.
    assert order == [
        ("hallucinated", "3"),
        ("hallucinated", "1"),
        ("hallucinated", "4"),
        ("invalid", "6"),
        ("no_claims", "5"),
        ("grounded", "2"),
    ]


def test_unsupported_claim_shows_the_closest_sentence_and_the_passages(tmp_path: Path) -> None:
    out, _, _ = build_report(tmp_path)
    page = out.read_text(encoding="utf-8")
    mixed = page.split('id="row-1">', 1)[1].split("</article>", 1)[0]
    hostile = page.split('id="row-4">', 1)[1].split("</article>", 1)[0]
    # "Shipping is free." has no evidence: the nearest passage sentence is pointed at (not
    # claimed as evidence), with the passage around it; where no sentence shares a word, it
    # says so.
    closest = hostile.split('<div class="closest">', 1)[1]
    assert closest.startswith('closest passage sentence (not evidence): <span class="quote">“')
    assert "Shipping is free.”</span> (passage 1)" in closest
    assert "Shipping is free.</mark>" in closest
    assert "&lt;script&gt;" in closest and "<script>window" not in closest
    assert '<div class="closest">no passage sentence shares a word with this claim' in mixed
    # And every retrieved passage, for a reader who wants to look for themselves.
    retrieved = mixed.split('<details class="retrieved">', 1)[1]
    assert retrieved.startswith("<summary>the 2 retrieved passages</summary>")
    assert "Customers may return any unused item within 30 days" in retrieved
    # A grounded answer has neither.
    grounded = page.split('id="row-2">', 1)[1].split("</article>", 1)[0]
    assert "closest" not in grounded and "retrieved" not in grounded


def test_gate_card_shows_why_and_the_rate_card_follows_the_gate(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    writer = HtmlReportWriter(out)
    summary = CheckSummary()
    for n, label in enumerate(["grounded", "hallucinated", "grounded"], start=1):
        ev = Evaluation(label=label, faithfulness=1.0, groundedness=1.0 if n != 2 else 0.0)  # type: ignore[arg-type]
        row = Row(n, None, None, ["ctx"], f"answer {n}", None)
        summary.add(row, ev)
        writer.add(row, ev, 0.0)
    thresholds = summary.thresholds(max_flag_share=0.0)
    writer.close(summary, thresholds, 1)
    page = out.read_text(encoding="utf-8")
    gate = page.split('<div class="card gate-fail"><div class="n">FAIL</div>', 1)[1]
    assert gate.split("</div></div>", 1)[0].endswith(
        '<div class="why">flag share 33.3% &gt; 0.0% (1 of 3 judged answers)'
    )
    assert '<div class="card gate-fail"><div class="n">33.3%</div>' in page
    assert "flag share (1 of 3 judged flagged hallucinated)" in page
    # No audit labels: the rate card says the rate is unknown and which labels it used.
    assert '<div class="n">unknown</div><div class="k">hallucination rate (until an audit)' in page
    assert "labels used: none: no row is labelled" in page


def test_the_card_points_at_the_sentence_the_local_judge_reason_names(tmp_path: Path) -> None:
    """The card's "closest passage sentence" is the one the local judge's reason calls the
    closest (LocalJudge.closest, weighted by the question), not a second, simpler guess."""
    import re

    from groundwatch import LocalJudge
    from groundwatch.check.cli import GateOptions, run_check

    from .conftest import write_jsonl

    contexts = [
        "Gustave Eiffel's company built it. The tower is repainted every seven years.",
        "The Eiffel Tower stands 330 metres tall. It was finished in 1889 for the World's Fair.",
    ]
    row = {
        "id": "weak",
        "question": "Tell me about the Eiffel Tower.",
        "contexts": contexts,
        "answer": "The Eiffel Tower is made of painted iron lattice.",
    }
    data = write_jsonl(tmp_path / "rows.jsonl", [row])
    out = tmp_path / "r.html"
    run_check(data, LocalJudge(), GateOptions(), html_out=out, concurrency=1)
    page = out.read_text(encoding="utf-8")
    reason = re.search(r"closest sentence \(passage (\d+): &#x27;(.*?)&#x27;\)", page)
    assert reason, page
    card = re.search(
        r'closest passage sentence \(not evidence\): <span class="quote">“(.*?)”</span> '
        r"\(passage (\d+)\)",
        page,
    )
    assert card, page
    assert card.group(2) == reason.group(1)
    assert card.group(1).startswith(reason.group(2).removesuffix("..."))


def _rated_report(tmp_path: Path, marked: bool, random_declared: bool = False) -> str:
    """40 judged rows, the first 20 labelled (every 4th hallucinated), marked audit or not."""
    out = tmp_path / f"rate-{marked}-{random_declared}.html"
    writer = HtmlReportWriter(out)
    summary = CheckSummary(labels_are_random=random_declared)
    for n in range(40):
        flagged = n % 4 == 0
        label = ("hallucinated" if flagged else "faithful") if n < 20 else None
        ev = Evaluation(
            label="hallucinated" if flagged else "grounded",  # type: ignore[arg-type]
            faithfulness=1.0,
            groundedness=0.0 if flagged else 1.0,
            hallucination_probability=0.8 if flagged else 0.2,
        )
        row = Row(n + 1, f"r{n}", None, ["ctx"], f"answer {n}", label, audit=marked and n < 20)  # type: ignore[arg-type]
        summary.add(row, ev)
        writer.add(row, ev, 0.0)
    writer.close(summary, summary.thresholds(max_flag_share=1.0), 0)
    return out.read_text(encoding="utf-8")


def test_the_rate_card_says_which_labels_it_used(tmp_path: Path) -> None:
    """As the CLI does: a random audit, labels declared random, or labels left out."""
    audit = _rated_report(tmp_path, marked=True)
    assert "hallucination rate (90% interval" in audit
    assert "20 audit labels of 40 judged answers" in audit
    assert "labels used: the labels of rows marked &quot;audit&quot; (a random audit)" in audit
    declared = _rated_report(tmp_path, marked=False, random_declared=True)
    assert "labels used: every label, declared random (--labels-are-random)" in declared
    left_out = _rated_report(tmp_path, marked=False)
    assert '<div class="n">unknown</div>' in left_out
    assert "labels used: none: the labels were not chosen at random" in left_out
    # The flag share is its own card, under its name, in every case.
    for page in (audit, declared, left_out):
        assert "flag share (10 of 40 judged flagged hallucinated)" in page
