"""Scoring: evidence checking, the two scores and the label rule, for any judge."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest

import groundwatch as gw
from groundwatch.judging.scoring import LabelPolicy, context_is_substantive, locate_quote, score
from groundwatch.types import Claim, Evidence, Judgement, Passage

PASSAGES = [
    Passage(text="Paris is the capital of France.\nIt has   2.1 million inhabitants."),
    Passage(text="The Seine flows through Paris."),
]
ANSWER = "Paris is the capital of France. It has 2.1 million inhabitants. It was founded by Rome."


def _claim(text: str, verdict: str, evidence: list[Evidence] | None = None) -> Claim:
    start = ANSWER.find(text)
    return Claim(
        text=text, start=start, end=start + len(text), verdict=verdict, evidence=evidence or []
    )


class _FixedJudge:
    name = "fixed"

    def __init__(self, judgement: Judgement) -> None:
        self.judgement = judgement

    def judge(self, answer, contexts, question):
        return self.judgement


def test_scores_follow_the_verdict_counts() -> None:
    judgement = Judgement(
        claims=[
            _claim(
                "Paris is the capital of France.",
                "supported",
                [Evidence(passage=0, start=0, end=31, quote="Paris is the capital of France.")],
            ),
            _claim(
                "It has 2.1 million inhabitants.",
                "inferred",
                [Evidence(passage=0, start=-1, end=-1, quote="It has 2.1 million inhabitants.")],
            ),
            _claim("It was founded by Rome.", "unsupported"),
        ]
    )
    ev = score(judgement, ANSWER, PASSAGES, judge_name="fixed")
    assert ev.faithfulness == 1.0
    assert ev.groundedness == pytest.approx(2 / 3)
    assert ev.label == "hallucinated"
    assert ev.verdict_counts == {"supported": 1, "inferred": 1, "unsupported": 1, "contradicted": 0}
    for claim in ev.claims:
        assert ANSWER[claim.start : claim.end] == claim.text
        for e in claim.evidence:
            assert PASSAGES[e.passage].text[e.start : e.end] == e.quote
    # The quote with collapsed whitespace was found and given exact offsets.
    assert ev.claims[1].evidence[0].quote == "It has   2.1 million inhabitants."


def test_evidence_not_in_the_passage_downgrades_to_unsupported() -> None:
    forged = Evidence(passage=1, start=0, end=10, quote="Rome founded Paris in 52 BC.")
    out_of_range = Evidence(passage=7, start=0, end=5, quote="Paris")
    judgement = Judgement(
        claims=[
            _claim("It was founded by Rome.", "supported", [forged]),
            _claim("Paris is the capital of France.", "contradicted", [out_of_range]),
        ]
    )
    ev = score(judgement, ANSWER, PASSAGES)
    assert [c.verdict for c in ev.claims] == ["unsupported", "unsupported"]
    assert ev.evidence_rejected == 2
    assert ev.faithfulness == 1.0 and ev.groundedness == 0.0
    assert all(c.evidence == [] for c in ev.claims)


def test_contradiction_makes_an_answer_hallucinated_at_default_policy() -> None:
    quote = "It has   2.1 million inhabitants."
    judgement = Judgement(
        claims=[
            _claim(
                "It has 2.1 million inhabitants.",
                "contradicted",
                [Evidence(passage=0, start=32, end=32 + len(quote), quote=quote)],
            ),
            _claim(
                "Paris is the capital of France.",
                "supported",
                [Evidence(passage=0, start=0, end=31, quote="Paris is the capital of France.")],
            ),
        ]
    )
    ev = score(judgement, ANSWER, PASSAGES)
    assert ev.faithfulness == 0.5 and ev.groundedness == 0.5
    assert ev.label == "hallucinated"
    lenient = score(judgement, ANSWER, PASSAGES, policy=LabelPolicy(0.5, 0.5))
    assert lenient.label == "grounded"


def test_no_claims_and_error_have_no_scores() -> None:
    ev = score(Judgement(), ANSWER, PASSAGES)
    assert (ev.label, ev.faithfulness, ev.groundedness) == ("no_claims", None, None)
    ev = score(Judgement(error="boom", error_type="timeout"), ANSWER, PASSAGES)
    assert (ev.label, ev.faithfulness, ev.groundedness) == ("error", None, None)
    assert ev.error_type == "timeout"
    # A cause off the documented list is "internal", and stays readable in the message.
    ev = score(Judgement(error="boom", error_type="worker_process_lost"), ANSWER, PASSAGES)
    assert (ev.error_type, ev.error) == ("internal", "worker_process_lost: boom")
    assert score(Judgement(error="x", error_type="http_503"), ANSWER, PASSAGES).error_type == (
        "http_503"
    )


def test_table_of_contents_is_insufficient_context() -> None:
    toc = [
        Passage(text="Contents\n1. Introduction ........ 3\n2. Pricing ........ 7\n3. FAQ ..... 9")
    ]
    assert not context_is_substantive(toc)
    assert not context_is_substantive([])
    assert context_is_substantive(PASSAGES)
    assert context_is_substantive([Passage(text="埃菲尔铁塔位于法国巴黎，于1889年建成，高330米。")])
    judgement = Judgement(claims=[_claim("It was founded by Rome.", "unsupported")])
    ev = score(judgement, ANSWER, toc)
    assert ev.label == "insufficient_context"
    assert ev.groundedness == 0.0  # scores are still reported


def test_locate_quote_ignores_whitespace_case_and_curly_quotes() -> None:
    text = "He said “Hello   World” twice."
    start, end = locate_quote(text, '"hello world"')
    assert text[start:end] == "“Hello   World”"
    assert locate_quote(text, "goodbye") is None
    assert locate_quote(text, "   ") is None


def test_raising_and_wrong_type_judges_give_error_evaluations() -> None:
    class Raising:
        name = "raising"

        def judge(self, answer, contexts, question):
            raise RuntimeError("model exploded")

    ev = gw.evaluate("Paris is in France.", ["Paris is in France."], judge=Raising())
    assert ev.label == "error" and ev.judge == "raising"
    assert "model exploded" in (ev.error or "")
    ev = gw.evaluate("Paris is in France.", ["x"], judge=_FixedJudge("not a judgement"))  # type: ignore[arg-type]
    assert ev.label == "error" and ev.error_type == "internal"
    assert "not a Judgement" in (ev.error or "")


@pytest.mark.parametrize(
    ("answer", "contexts", "question"),
    [
        (None, ["x"], None),
        (42, ["x"], None),
        ("a", None, None),
        ("a", "just a string", None),
        ("a", [1, 2], None),
        ("a", ["x"], 3),
        ("a", {"text": "one passage without its list"}, None),
        ("a", [{"text": "x", "metadata": ["not", "a", "mapping"]}], None),
        ("a", [Passage(text="x"), {"text": "x", "metadata": "source.pdf"}], None),
    ],
)
def test_bad_input_raises_type_error(answer, contexts, question) -> None:
    with pytest.raises(TypeError):
        gw.evaluate(answer, contexts, question=question)


def test_bad_input_errors_name_the_culprit() -> None:
    with pytest.raises(TypeError, match="got dict"):
        gw.evaluate("a", {"text": "one passage"})
    with pytest.raises(TypeError, match=r"contexts\[1\]\.metadata must be a mapping, got str"):
        gw.evaluate("a", ["x", {"text": "x", "metadata": "source.pdf"}])


def test_evaluate_runs_async_judges_inside_a_running_loop() -> None:
    import asyncio

    CONTEXT = "Paris is a big city on the Seine with millions of inhabitants."

    class AsyncJudge:
        name = "async"

        async def judge(self, answer, contexts, question):
            await asyncio.sleep(0)
            return Judgement(claims=[Claim(text=answer, verdict="unsupported")])

    async def inside_loop() -> gw.Evaluation:
        return gw.evaluate("Paris is big.", [CONTEXT], judge=AsyncJudge())

    ev = asyncio.run(inside_loop())
    assert ev.label == "hallucinated" and ev.claims[0].start == 0
    ev2 = asyncio.run(gw.aevaluate("Paris is big.", [CONTEXT], judge=AsyncJudge()))
    assert ev2 == ev


def test_huge_inputs_are_capped_and_marked() -> None:
    ev = gw.evaluate("Paris is big. " * 2_000, ["Paris is big. " * 4_000] * 100)
    assert ev.truncated
    assert ev.label in ("grounded", "hallucinated")


def test_negative_offsets_from_a_judge_are_replaced_by_real_ones() -> None:
    # Python slicing accepts negative indices, so answer[-5:11] == "world" in an 11-character
    # answer; offsets on an Evaluation must still count from the start.
    answer = "hello world"
    claim = Claim(
        text="world",
        start=-5,
        end=11,
        verdict="supported",
        evidence=[Evidence(passage=0, start=-11, end=-6, quote="hello")],
    )
    ev = score(Judgement(claims=[claim]), answer, [Passage(text="hello world")])
    (checked,) = ev.claims
    assert (checked.start, checked.end) == (6, 11)
    assert answer[checked.start : checked.end] == checked.text
    (evidence,) = checked.evidence
    assert (evidence.start, evidence.end, evidence.quote) == (0, 5, "hello")
    rephrased = Claim(text="world", start=-11, end=None, verdict="unsupported")
    assert score(Judgement(claims=[rephrased]), answer, []).claims[0].start == 6
    assert locate_quote("hello world", "hello", hint=-11) == (0, 5)


def test_lone_surrogates_are_replaced_so_the_evaluation_is_json() -> None:
    context = "Paris is a big city in France, with many people living there."
    answer = "Paris is a big city \ud800 in France."
    ev = gw.evaluate(answer, [context + " \udfff"], question="where?\ud83d")
    assert ev.label == "grounded"
    data = json.loads(ev.model_dump_json())
    (claim,) = data["claims"]
    assert claim["text"] == answer.replace("\ud800", "\ufffd")
    assert len(claim["text"]) == len(answer)  # one for one: offsets into the answer hold
    assert (claim["start"], claim["end"]) == (0, len(answer))


def test_passage_metadata_with_non_string_keys_is_kept_with_string_keys() -> None:
    ev = gw.evaluate("Paris is big.", [{"text": "Paris is big.", "metadata": {1: "x", "a": 2}}])
    assert ev.label == "grounded"
    (passage,) = gw.RagRecord(contexts=[{"text": "t", "metadata": {1: "x", "a": 2}}]).passages
    assert passage.metadata == {"1": "x", "a": 2}


def test_a_judges_confidence_is_kept_within_0_and_1() -> None:
    claims = [
        Claim(text=t, verdict="unsupported", confidence=c)
        for t, c in (("Paris", float("nan")), ("is", 1.7), ("big", -0.2), ("city", 0.4))
    ]
    ev = score(Judgement(claims=claims), "Paris is a big city", [Passage(text="Rome.")])
    assert [c.confidence for c in ev.claims] == [None, 1.0, 0.0, 0.4]
    assert json.loads(ev.model_dump_json())["claims"][1]["confidence"] == 1.0


def test_passages_beyond_the_cap_are_not_even_read() -> None:
    from groundwatch._shared.inputs import MAX_PASSAGES

    pulled = 0

    def endless() -> Iterator[str]:
        nonlocal pulled
        while True:
            pulled += 1
            yield "Paris is the capital of France."

    def stop_after_a_while() -> Iterator[str]:
        yield from itertools.islice(endless(), 10 * MAX_PASSAGES)
        raise AssertionError("read every passage")

    ev = gw.evaluate("Paris is the capital of France.", stop_after_a_while())
    assert ev.truncated and ev.label == "grounded"
    assert pulled == MAX_PASSAGES + 1


def test_pydantic_documents_are_read_by_field_property_or_extra_field() -> None:
    import pydantic

    class Doc(pydantic.BaseModel):  # a LangChain Document's shape: page_content, id, metadata
        page_content: str
        id: str | None = None
        metadata: dict[str, object] = {}

    class Node(pydantic.BaseModel):  # a LlamaIndex NodeWithScore's: text and node_id derived
        body: str
        id_: str
        score: float | None = None

        @property
        def text(self) -> str:
            return self.body

        @property
        def node_id(self) -> str:
            return self.id_

    class Loose(pydantic.BaseModel):  # extra="allow": unknown fields are attributes too
        model_config = pydantic.ConfigDict(extra="allow")
        text: str

    class Broken(pydantic.BaseModel):
        page_content: str

        @property
        def metadata(self) -> dict[str, object]:
            raise RuntimeError("metadata store is down")

    doc, node, loose = gw.RagRecord(
        contexts=[
            Doc(page_content="Paris.", id="d1", metadata={"k": 1}),
            Node(body="Rome.", id_="n1", score=0.5),
            Loose(text="Oslo.", id=7, score="0.25", metadata={"a": "b"}),
        ]
    ).passages
    assert (doc.text, doc.id, doc.score, doc.metadata) == ("Paris.", "d1", None, {"k": 1})
    assert (node.text, node.id, node.score, node.metadata) == ("Rome.", "n1", 0.5, {})
    assert (loose.text, loose.id, loose.score, loose.metadata) == ("Oslo.", "7", 0.25, {"a": "b"})
    # A property that raises still raises, as with getattr: the worker counts the record as the
    # caller's invalid input.
    from groundwatch._shared.inputs import prepare

    with pytest.raises(RuntimeError, match="metadata store is down"):
        prepare("Paris.", [Broken(page_content="x")], None)


def test_a_failure_from_the_worker_process_names_its_exception_once() -> None:
    # The process executor reports an exception raised out there (after scoring, while the
    # reply was pickled) as WorkerProcessError, whose text already starts with the class.
    from groundwatch.runtime.pipeline import Prepared, error_evaluation
    from groundwatch.runtime.runners.worker_process import WorkerProcessError

    failure = WorkerProcessError("PicklingError", "Can't pickle <function <lambda>>")
    item = Prepared("a", [Passage(text="c")], None, False)
    ev = error_evaluation(failure.error_type, str(failure), item, "local")
    assert ev.error == "PicklingError: Can't pickle <function <lambda>>"
    assert ev.error_type == "internal"
    # A judge's own message still gets its specific cause in front.
    ev = score(Judgement(error="no reply", error_type="judge_unresponsive"), "a", ["c"])
    assert ev.error == "judge_unresponsive: no reply"


@pytest.mark.parametrize(
    ("answer", "passage"),
    [
        ("Shipping takes 9 days.", "Shipping takes 3 days."),  # a FAQ line
        ("Returns are accepted for 60 days.", "Returns: 30 days."),
        ("The order shipped on May 3.", "Order 123 shipped on May 5"),  # a tool's one line
    ],
)
def test_a_short_passage_that_contradicts_makes_the_answer_hallucinated(
    answer: str, passage: str
) -> None:
    """A contradiction is never a retrieval failure (issue #45 item 5): the local judge end to
    end, on one short passage."""
    assert context_is_substantive([Passage(text=passage)])
    for heading in ("Table of contents:", "Shipping and returns", "FAQ", "Returns"):
        assert not context_is_substantive([Passage(text=heading)]), heading
    ev = gw.evaluate(answer, [passage])
    assert ev.label == "hallucinated", (ev.label, [c.verdict for c in ev.claims])


def test_a_contradicted_claim_is_hallucinated_whatever_the_context() -> None:
    """Even where the context is only headings, a claim it contradicts is the generation's
    fault, not the retrieval's: the rule on the verdicts, for every judge."""
    toc = [Passage(text="Contents\n1. Delivery in 5 days ........ 3\n2. Pricing ........ 7")]
    assert not context_is_substantive(toc)
    answer = "Delivery takes 2 days."
    quote = "Delivery in 5 days"
    start = toc[0].text.index(quote)
    claim = Claim(
        text=answer,
        start=0,
        end=len(answer),
        verdict="contradicted",
        evidence=[Evidence(passage=0, start=start, end=start + len(quote), quote=quote)],
    )
    ev = score(Judgement(claims=[claim]), answer, toc)
    assert ev.claims[0].verdict == "contradicted"
    assert ev.label == "hallucinated"
    # Unsupported alone on such a context is still a retrieval failure.
    unsupported = claim.model_copy(update={"verdict": "unsupported", "evidence": []})
    assert score(Judgement(claims=[unsupported]), answer, toc).label == "insufficient_context"
