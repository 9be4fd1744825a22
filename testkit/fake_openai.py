"""A real HTTP server on 127.0.0.1 speaking the OpenAI Chat Completions API, scriptable per test.

``FakeOpenAIServer`` answers ``POST /v1/chat/completions`` with JSON like OpenAI's (choices,
usage), records every request, and takes its replies from a per-test script (queued
:class:`Reply` objects: well-formed verdicts, malformed or fenced JSON, truncated text, 429 with
Retry-After, 500s, hangs) or from a responder function that reads the prompt and answers
deterministically (``honest_model``), which the benchmark uses as its "model".

Also used by ``benchmarks/llm_judge.py``; keep it free of pytest imports.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from groundwatch.judging.text.lexical import content_tokens, estimate_tokens


@dataclass
class Reply:
    """One scripted reply: a message ``content`` (HTTP 200) or an error ``status``."""

    content: str | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str = ""
    delay: float = 0.0
    """Seconds to wait before replying (a hang, when longer than the client's timeout)."""
    finish_reason: str = "stop"
    raw: bytes | None = None
    """Send these bytes as the body instead of a JSON completion."""
    refusal: str | None = None
    """OpenAI's ``message.refusal`` (structured outputs' way of declining)."""
    body: dict[str, Any] | None = None
    """The JSON error body to send with a non-200 ``status`` (default: OpenAI's shape)."""


@dataclass
class Recorded:
    """One request the server received."""

    body: dict[str, Any]
    headers: dict[str, str]
    path: str
    at: float

    @property
    def user(self) -> str:
        return str(self.body["messages"][-1]["content"])

    @property
    def system(self) -> str:
        return str(self.body["messages"][0]["content"])

    @property
    def response_format(self) -> str | None:
        rf = self.body.get("response_format")
        return None if rf is None else str(rf.get("type"))


@dataclass
class ParsedPrompt:
    """The data sections of a judge prompt, read back by the fake model."""

    nonce: str
    question: str | None
    passages: dict[int, str]
    answer: str


def parse_prompt(user: str) -> ParsedPrompt:
    """Read the marker code, question, numbered passages and answer out of a judge prompt."""
    m = re.search(r"Marker code: (\S+)", user)
    if not m:
        raise ValueError("no marker code in prompt")
    nonce = re.escape(m.group(1))

    def section(tag: str) -> list[tuple[str, str]]:
        pattern = rf"<{tag}( \d+|) {nonce}>\n(.*?)\n</{tag}\1 {nonce}>"
        return [(n.strip(), body) for n, body in re.findall(pattern, user, re.S)]

    passages = {int(n): body for n, body in section("passage")}
    answers = section("answer")
    questions = section("question")
    return ParsedPrompt(
        nonce=m.group(1),
        question=questions[0][1] if questions else None,
        passages=passages,
        answer=answers[0][1] if answers else "",
    )


_SENT = re.compile(r"[^.!?。！？；\n]+[.!?。！？；]*")


def sentences(text: str) -> list[str]:
    out: list[str] = []
    for chunk in text.split("[...]"):
        out += [s.strip() for s in _SENT.findall(chunk) if s.strip()]
    return out


def honest_model(prompt: ParsedPrompt, threshold: float = 0.6, reason: str = "") -> dict[str, Any]:
    """A deterministic stand-in for an honest LLM: lexical alignment of answer sentences.

    Each answer sentence is a claim; it is ``supported`` by the passage sentence sharing the most
    of its content words when that share reaches ``threshold``, else ``unsupported``. ``reason``
    fills the reason field (the benchmark uses a realistic length for output token counts).
    """
    claims = []
    for sent in sentences(prompt.answer):
        words = content_tokens(sent)
        if not words:
            continue
        best: tuple[float, int, str] = (0.0, 0, "")
        for n, text in prompt.passages.items():
            for ps in sentences(text):
                share = len(words & content_tokens(ps)) / len(words)
                if share > best[0]:
                    best = (share, n, ps)
        share, n, quote = best
        if share >= threshold:
            claims.append(
                {
                    "claim": sent,
                    "passage": n,
                    "quote": quote,
                    "reason": reason,
                    "verdict": "supported",
                }
            )
        else:
            claims.append(
                {
                    "claim": sent,
                    "passage": None,
                    "quote": "",
                    "reason": "",
                    "verdict": "unsupported",
                }
            )
    return {"claims": claims}


Responder = Callable[[Recorded], "Reply | str | dict[str, Any]"]


def honest_responder(request: Recorded) -> dict[str, Any]:
    return honest_model(parse_prompt(request.user))


@dataclass(frozen=True)
class ServerProfile:
    """How one real OpenAI-compatible server treats ``response_format``, reproduced.

    Each profile was read from the server's own request handling (see the comments in
    :data:`PROFILES`): which ``type`` values it enforces, which it refuses and with what status
    and body, which it accepts and ignores, and how its model writes when nothing constrains
    it. ``refuse`` maps a ``response_format`` (as the judge's ladder names them) to the status
    and JSON body of the refusal; types neither enforced nor refused are ignored.
    """

    name: str
    enforces: frozenset[str]
    refuse: Callable[[dict[str, Any]], tuple[int, dict[str, Any]] | None]
    free_style: Callable[[str], str]
    """How the model's JSON comes out when the format is not enforced."""


def format_kind(rf: dict[str, Any] | None) -> str:
    """The judge ladder's name for a request's ``response_format``."""
    if rf is None:
        return "none"
    if rf.get("type") == "json_object":
        return "json_object_schema" if "schema" in rf else "json_object"
    return str(rf.get("type"))


def _llama_cpp_refuse(rf: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    # llama_cpp/server/types.py: response_format is ChatCompletionRequestResponseFormat,
    # type Literal["text", "json_object"] (an optional "schema" key becomes a grammar). The
    # route class RouteErrorHandler (server/errors.py) turns every exception raised while
    # handling the request, the request-validation error included, into HTTP 500
    # {"error": {"message": str(exc), "type": "internal_server_error", ...}}.
    if rf.get("type") in ("text", "json_object"):
        return None
    message = (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        f"'type'), 'msg': \"Input should be 'text' or 'json_object'\", 'input': "
        f"'{rf.get('type')}', 'ctx': {{'expected': \"'text' or 'json_object'\"}}}}\n"
    )
    return 500, {
        "error": {
            "message": message,
            "type": "internal_server_error",
            "param": None,
            "code": None,
        }
    }


def _lm_studio_refuse(rf: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    # LM Studio's server (closed source; its bug tracker, issues 169/189/307, quotes the
    # answer): json_schema is enforced, anything else is a 400 whose "error" is a bare string.
    if rf.get("type") in ("json_schema", "text"):
        return None
    return 400, {"error": "'response_format.type' must be 'json_schema' or 'text'"}


def _vllm_refuse(rf: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    # vllm/entrypoints/openai/protocol.py: ResponseFormat.type is Literal["text",
    # "json_object", "json_schema", "structural_tag"]; extra keys are allowed (logged and
    # ignored). A request-validation error is answered by validation_exception_handler with 400
    # {"error": {"message", "type": "BadRequestError", "param", "code": 400}}.
    if rf.get("type") in ("text", "json_object", "json_schema", "structural_tag"):
        return None
    return 400, {
        "error": {
            "message": f"1 validation error: response_format.type: input '{rf.get('type')}'",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }


def _litellm_refuse(rf: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    # LiteLLM (litellm/utils.py get_optional_params): a parameter the provider's config does not
    # list raises UnsupportedParamsError (status 400) unless drop_params is set; the proxy sends
    # it as {"error": {"message", "type": "None", "param": "None", "code": "400"}}.
    return 400, {
        "error": {
            "message": (
                "litellm.UnsupportedParamsError: ollama does not support parameters: "
                "['response_format'], for model=llama3. To drop these, set "
                "`litellm.drop_params=True` or for proxy:\n\n`litellm_settings:\n "
                "drop_params: true`\n"
            ),
            "type": "None",
            "param": "None",
            "code": "400",
        }
    }


def _never(rf: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    return None


def _fenced(content: str) -> str:
    return f"```json\n{content}\n```"


def _preamble(content: str) -> str:
    return f"Here is my analysis of the answer:\n\n{content}\n\nLet me know if you need more."


def _thinking(content: str) -> str:
    return (
        '<think>\nThe user wants claim verdicts. A draft: {"claims": []}. No, check each '
        f"sentence against the passages first.\n</think>\n\n{content}"
    )


PROFILES: dict[str, ServerProfile] = {
    "llama-cpp-python": ServerProfile(
        "llama-cpp-python",
        frozenset({"json_object_schema", "json_object"}),
        _llama_cpp_refuse,
        _fenced,
    ),
    # ollama/openai/openai.go FromChatRequest: "json_object" -> format "json", "json_schema"
    # -> the schema as format, any other type silently ignored; never an error.
    "ollama": ServerProfile(
        "ollama", frozenset({"json_schema", "json_object_schema", "json_object"}), _never, _fenced
    ),
    # Ollama before structured outputs (0.5): the OpenAI layer knew only "json_object" and
    # dropped "json_schema" without a word; the model then answers in prose.
    "ollama-legacy": ServerProfile(
        "ollama-legacy", frozenset({"json_object_schema", "json_object"}), _never, _preamble
    ),
    "lm-studio": ServerProfile("lm-studio", frozenset({"json_schema"}), _lm_studio_refuse, _fenced),
    "vllm": ServerProfile(
        "vllm",
        frozenset({"json_schema", "json_object_schema", "json_object"}),
        _vllm_refuse,
        _fenced,
    ),
    # A reasoning model (DeepSeek-R1, QwQ, Qwen3) behind a server that neither splits its
    # thoughts into a field of their own (vLLM without --reasoning-parser) nor enforces the
    # format: the thoughts stay in message.content, before the JSON.
    "reasoning-unsplit": ServerProfile("reasoning-unsplit", frozenset(), _never, _thinking),
    "litellm": ServerProfile("litellm", frozenset(), _litellm_refuse, _preamble),
    # LiteLLM with drop_params: true drops response_format and forwards the rest.
    "litellm-drop-params": ServerProfile("litellm-drop-params", frozenset(), _never, _fenced),
}
"""The servers the judge must work on without flags, by name."""


class FakeOpenAIServer:
    """``with FakeOpenAIServer() as server: OpenAIJudge("m", base_url=server.url, ...)``.

    Replies come first from the queue filled by :meth:`push`, then from ``responder`` (default:
    :func:`honest_responder`). A responder may return a :class:`Reply`, a string (the message
    content) or a dict (serialised as the content). ``reject_formats`` lists ``response_format``
    types answered with HTTP 400, like servers without structured output; ``profile`` (a
    :class:`ServerProfile` or its name in :data:`PROFILES`) makes the server refuse, enforce and
    ignore ``response_format`` as that real server does. ``latency`` is added to every reply.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency: float = 0.0,
        reject_formats: set[str] | None = None,
        profile: ServerProfile | str | None = None,
    ) -> None:
        self.responder: Responder = responder or honest_responder
        self.latency = latency
        self.reject_formats = set(reject_formats or ())
        self.profile = PROFILES[profile] if isinstance(profile, str) else profile
        self.requests: list[Recorded] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- scripting ------------------------------------------------------------------------------

    def push(self, *replies: Reply | str | dict[str, Any]) -> None:
        """Queue replies for the next requests, in order."""
        with self._lock:
            for r in replies:
                self._script.append(_as_reply(r))

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def completions(self) -> list[Recorded]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                rec = Recorded(
                    body=body,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    path=self.path,
                    at=time.monotonic(),
                )
                with server._lock:
                    server.requests.append(rec)
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    reply = server._reply_for(rec)
                    wait = reply.delay + server.latency
                    if wait and server._stopping.wait(wait):
                        return
                    self._send(rec, reply)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, rec: Recorded, reply: Reply) -> None:
                if reply.raw is not None:
                    payload = reply.raw
                elif reply.status != 200 and reply.body is not None:
                    payload = json.dumps(reply.body).encode()
                elif reply.status != 200:
                    payload = json.dumps(
                        {"error": {"message": reply.error or "error", "type": "server_error"}}
                    ).encode()
                else:
                    prompt_tokens = sum(
                        estimate_tokens(str(m.get("content", ""))) for m in rec.body["messages"]
                    )
                    completion_tokens = estimate_tokens(reply.content or "")
                    payload = json.dumps(
                        {
                            "id": "chatcmpl-fake",
                            "object": "chat.completion",
                            "created": int(time.time()),
                            "model": rec.body.get("model", "fake"),
                            "choices": [
                                {
                                    "index": 0,
                                    "message": {
                                        "role": "assistant",
                                        "content": reply.content,
                                        **({"refusal": reply.refusal} if reply.refusal else {}),
                                    },
                                    "finish_reason": reply.finish_reason,
                                }
                            ],
                            "usage": {
                                "prompt_tokens": prompt_tokens,
                                "completion_tokens": completion_tokens,
                                "total_tokens": prompt_tokens + completion_tokens,
                            },
                        }
                    ).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to do

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _reply_for(self, rec: Recorded) -> Reply:
        fmt = rec.response_format
        if fmt is not None and fmt in self.reject_formats:
            return Reply(
                status=400,
                error=f"response_format of type '{fmt}' is not supported by this server",
            )
        rf = rec.body.get("response_format")
        if self.profile is not None and rf is not None:
            refused = self.profile.refuse(rf)
            if refused is not None:
                return Reply(status=refused[0], body=refused[1])
        with self._lock:
            scripted = self._script.popleft() if self._script else None
        if scripted is not None:
            return scripted
        reply = _as_reply(self.responder(rec))
        if (
            self.profile is not None
            and reply.content is not None
            and format_kind(rf) not in self.profile.enforces
        ):
            reply = Reply(content=self.profile.free_style(reply.content))
        return reply


def _as_reply(value: Reply | str | dict[str, Any]) -> Reply:
    if isinstance(value, Reply):
        return value
    if isinstance(value, dict):
        return Reply(content=json.dumps(value, ensure_ascii=False))
    return Reply(content=value)
