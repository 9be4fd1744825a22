"""Every Python block in the README and docs/ runs as written.

A page is read top to bottom, so its blocks run in order in one namespace, in a fresh
interpreter per page (top-level ``await`` allowed, as in a notebook). The names a block takes
from the reader's own app (``rag_chain``, ``index``, an agent's ``model`` and tools, the
request's ``q``, ``docs``, ``a``) are defined first by the page's setup below, with real
LangChain and LlamaIndex objects on their fake models; a name the page itself should define
(the ``scrub_pii`` that ``redact=`` was given) fails the test. What a block cannot do on this
machine is listed in :data:`CANNOT_RUN_HERE` with the reason, and still runs where it can.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^( *)```python\n(.*?)^\1```", re.S | re.M)

LANGCHAIN_APP = """
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

_store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
_store.add_documents([Document(page_content="Refunds take 5 business days.")])
rag_chain = (
    {"context": _store.as_retriever(), "question": RunnablePassthrough()}
    | ChatPromptTemplate.from_messages([("human", "{context}\\n{question}")])
    | FakeListChatModel(responses=["Refunds take 5 business days."])
    | StrOutputParser()
)
"""

LLAMAINDEX_APP = """
from llama_index.core import Document, Settings, VectorStoreIndex
from tests.llamaindex._fakes import BagOfWordsEmbedding, ContextAnswerLLM

Settings.llm = ContextAnswerLLM()
index = VectorStoreIndex.from_documents(
    [Document(text="The Eiffel Tower is 330 metres tall.")], embed_model=BagOfWordsEmbedding()
)
"""

AGENT_APP = """
from langgraph.checkpoint.memory import InMemorySaver
from llama_index.core.llms.mock import MockFunctionCallingLLM
from tests.langchain.agents import call, tools_then

# Plain functions: both frameworks take them as tools.
def lookup_policy(topic: str = "returns") -> str:
    \"\"\"The store's policy on a topic.\"\"\"
    return "Returns are accepted within 30 days of delivery."

def get_order(order_id: str = "A-1") -> str:
    \"\"\"The order's status.\"\"\"
    return "Order A-1 was delivered on 2 May."

def search_handbook(query: str) -> str:
    \"\"\"Search the handbook.\"\"\"
    return "Returns are accepted within 30 days."

model = tools_then("Yes, within 30 days.", call("lookup_policy", {"topic": "returns"}))
saver = InMemorySaver()
llm = MockFunctionCallingLLM()
research_agent = researcher = None  # the page's sub-agents: only defined, never called there
"""

REQUEST = """
q, docs, a = "Can I return it?", ["Returns are accepted within 30 days."], "Within 30 days."
user_text = "It says 60 days on the box."
def retrieve(question): return ["The tower is 330 metres tall."]
def generate(question, passages): return "It is 330 metres tall."
"""

SETUP = {
    "README.md": LANGCHAIN_APP + LLAMAINDEX_APP + "import groundwatch as gw\nmonitor = None\n",
    "agents.md": AGENT_APP,
    "check.md": "",
    "feedback.md": REQUEST,
    "langchain.md": LANGCHAIN_APP,
    "llamaindex.md": LLAMAINDEX_APP,
    # The reader's environment: MLflow's own variables (a closed port: nothing is sent; an
    # experiment id needs no lookup). tests/dashboards/test_mlflow.py runs it against a server.
    "mlflow.md": "import os\nos.environ['MLFLOW_TRACKING_URI'] = 'http://127.0.0.1:9'\n"
    "os.environ['MLFLOW_EXPERIMENT_ID'] = '0'\n",
    "runtime.md": REQUEST,
}
"""The reader's own objects, per page (a page missing here needs none)."""

AFTER = {
    # Blocks that define a test: run it, with the reader's fixture.
    "check.md": """
class _App:
    def ask(self, question):
        class Result:
            answer = "Refunds are accepted within 30 days."
            contexts = ["Refunds are accepted within 30 days of purchase."]
        return Result()
test_refund_answer(_App())
""",
    "runtime.md": """
from groundwatch.testing import GroundwatchTelemetry
class MyJudge(gw.LocalJudge): pass
def answer_question(question, monitor):
    monitor.record(question=question, contexts=retrieve(question), answer=generate(question, []))
fixture = GroundwatchTelemetry()
test_answers_are_monitored(fixture)
fixture.close()
""",
}
"""Run after the page's blocks."""

CANNOT_RUN_HERE = {
    ("README.md", "OTLPSpanExporter"): "sends to an OTLP endpoint: tests/otel/test_readme_otlp.py "
    "runs this block against a local receiver",
    ("judges.md", "nli-deberta-v3-base-onnx"): "needs the NLI model folder training/ builds",
    ("judges.md", "models/hhem-onnx"): "needs HHEM-2.1-Open's weights, downloaded with network "
    "(tests/detectors/test_hhem.py runs these calls on a tiny checkpoint)",
}
"""Blocks (page, a string in the block) left out, and why."""


def page_blocks(page: Path) -> list[str]:
    found = []
    for indent, body in BLOCK.findall(page.read_text(encoding="utf-8")):
        code = textwrap.dedent(body) if indent else body
        skipped = any(p == page.name and s in code for (p, s) in CANNOT_RUN_HERE)
        if skipped and not (page.name == "judges.md" and (ROOT / _nli_folder()).is_dir()):
            continue
        found.append(code)
    return found


def _nli_folder() -> str:
    return "models/nli-deberta-v3-base-onnx"


RUNNER = """
import ast, asyncio, sys, types
namespace = {"__name__": "__docs__"}
exec(compile(SETUP, "<setup>", "exec"), namespace)
for i, code in enumerate(BLOCKS):
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    compiled = compile(code, f"<{PAGE} block {i + 1}>", "exec", flags=flags)
    result = eval(compiled, namespace)
    if asyncio.iscoroutine(result):
        asyncio.run(result)
exec(compile(AFTER, "<after>", "exec"), namespace)
print("ran", len(BLOCKS), "blocks")
"""


@pytest.mark.parametrize("page", [p for p in PAGES if page_blocks(p)], ids=lambda p: p.name)
def test_every_python_block_of_the_page_runs(page: Path, tmp_path: Path) -> None:
    blocks = page_blocks(page)
    script = (
        f"SETUP = {SETUP.get(page.name, '')!r}\nBLOCKS = {blocks!r}\n"
        f"AFTER = {AFTER.get(page.name, '')!r}\nPAGE = {page.name!r}\n" + RUNNER
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GROUNDWATCH_", "OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(
        [
            str(ROOT / "src"),
            str(ROOT / "integrations" / "langchain" / "src"),
            str(ROOT / "integrations" / "llamaindex" / "src"),
            str(ROOT),
        ]
    )
    # Nothing leaves the machine: the SDK's exporters and the LLM judge stay unconfigured.
    env["OTEL_SDK_DISABLED"] = "false"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,  # files a block writes (flagged.jsonl) land here
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"ran {len(blocks)} blocks" in done.stdout


def test_what_cannot_run_here_is_still_in_the_docs() -> None:
    # An entry whose block is gone would skip nothing and hide nothing: keep the list true.
    for page, marker in CANNOT_RUN_HERE:
        path = ROOT / page if page == "README.md" else ROOT / "docs" / page
        assert marker in path.read_text(encoding="utf-8"), (page, marker)
