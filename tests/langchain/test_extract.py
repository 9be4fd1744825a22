"""The default question and answer extractors on the shapes LangChain runs take and return."""

from __future__ import annotations

from typing import Any

import pytest
from groundwatch_langchain._extract import default_answer, default_question, passage_of
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage

CHAT = [SystemMessage("be brief"), HumanMessage("first?"), AIMessage("one"), HumanMessage("why?")]


@pytest.mark.parametrize(
    ("inputs", "question"),
    [
        ("why?", "why?"),
        ({"question": "why?", "context": "x"}, "why?"),
        ({"input": "why?", "chat_history": []}, "why?"),
        ({"query": "why?"}, "why?"),
        ({"q": "why?"}, "why?"),
        ({"question": HumanMessage("why?")}, "why?"),
        (HumanMessage("why?"), "why?"),
        (CHAT, "why?"),
        ({"messages": CHAT}, "why?"),
        ({"other": "why?"}, None),
        (42, None),
    ],
)
def test_default_question(inputs: Any, question: str | None) -> None:
    assert default_question(inputs) == question


@pytest.mark.parametrize(
    ("outputs", "answer"),
    [
        ("because.", "because."),
        (AIMessage("because."), "because."),
        (AIMessageChunk(content="beca") + AIMessageChunk(content="use."), "because."),
        (
            AIMessage(content=[{"type": "text", "text": "be"}, {"type": "text", "text": "cause."}]),
            "because.",
        ),
        ({"answer": "because.", "context": []}, "because."),
        ({"output": AIMessage("because.")}, "because."),
        ({"result": "because."}, "because."),
        ({"messages": [*CHAT, AIMessage("because.")]}, "because."),
        ({"n_docs": 3}, None),
        ([Document(page_content="a doc")], None),
    ],
)
def test_default_answer(outputs: Any, answer: str | None) -> None:
    assert default_answer(outputs) == answer


def test_passage_of_a_document() -> None:
    doc = Document(page_content="text", id="d1", metadata={"relevance_score": 0.7, "src": "a"})
    assert passage_of(doc, ("score", "relevance_score")) == {
        "text": "text",
        "id": "d1",
        "score": 0.7,
        "metadata": {"relevance_score": 0.7, "src": "a"},
    }
    # No id on the document: one in the metadata; booleans are not scores.
    doc = Document(page_content="text", metadata={"id": 7, "score": True})
    passage = passage_of(doc, ("score",))
    assert passage is not None and passage["id"] == "7" and passage["score"] is None
    assert passage_of("not a document", ("score",)) is None
