"""``groundwatch worker`` processes against a real redis-server, with a real LangChain chain
and the groundwatch callback in the app: every sampled record becomes exactly one evaluation
span in its request's trace, across faults (kill -9, a Redis restart, malformed entries), and
the accounting holds across app and workers: sampled = evaluated + failed + dropped + queued.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

from groundwatch_langchain import GroundwatchCallbackHandler

import groundwatch as gw
from groundwatch.queue import stream_json
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry
from testkit.chains import build

from .conftest import RedisServer, _free_port, metric_sum, wait_for

STREAM = "groundwatch:records"
QUESTIONS = [f"What is the refund policy, case {i}?" for i in range(40)]


def _evaluations(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Evaluation spans by record id; fails on a record scored twice."""
    by_id: dict[str, dict[str, Any]] = {}
    for span in spans:
        if span["name"] != sc.SPAN_EVALUATION:
            continue
        record_id = span["attributes"][sc.GROUNDWATCH_RECORD_ID]
        assert record_id not in by_id, f"record {record_id} scored twice"
        by_id[record_id] = span
    return by_id


def _app(capgw: GroundwatchTelemetry, url: str, rate: float, **queue: Any) -> Any:
    monitor = capgw.monitor(
        sampler=gw.RatioSampler(rate), queue=gw.RedisQueue(url, timeout_millis=300, **queue)
    )
    return monitor, GroundwatchCallbackHandler(monitor, route="faq"), build("lcel")


def _ask(capgw: GroundwatchTelemetry, handler: Any, case: Any, questions: list[str]) -> dict:
    """Run the chain once per question, each in its own request span: {trace_id: span_id}."""
    requests = {}
    for question in questions:
        with capgw.tracer.start_as_current_span("request") as request:
            case.chain.invoke(question, {"callbacks": [handler]})
        ctx = request.get_span_context()
        requests[f"{ctx.trace_id:032x}"] = f"{ctx.span_id:016x}"
    return requests


def _app_counts(capgw: GroundwatchTelemetry) -> tuple[float, float]:
    sampled = capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="sampled")
    return sampled, capgw.metric_total(sc.METRIC_DROPPED)


def _worker_counts(metrics: list[dict[str, Any]]) -> tuple[float, float]:
    evaluations = sum(metric_sum(m, sc.METRIC_EVALUATIONS) for m in metrics)
    dropped = sum(metric_sum(m, sc.METRIC_DROPPED) for m in metrics)
    return evaluations, dropped


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as reply:
            return bool(reply.status == 200)
    except OSError:  # not listening yet, or 503
        return False


def _no_internal_errors(metrics: list[dict[str, Any]]) -> None:
    for m in metrics:
        counted = [p for p in m.get(sc.METRIC_ERRORS, []) if p[1]]  # each component is at 0
        assert not counted, counted


def test_two_workers_score_each_sampled_record_once_in_its_request_trace(
    capgw: GroundwatchTelemetry, redis_server: RedisServer, workers: Any
) -> None:
    ports = [_free_port(), _free_port()]
    slow = {"GW_TEST_JUDGE_SLEEP_S": "0.05"}  # so that one worker cannot take everything
    a, b = (workers(redis_server.url, "--health-port", str(p), env=slow) for p in ports)
    wait_for(lambda: all(_ready(p) for p in ports), 60, "both workers ready")
    monitor, handler, case = _app(capgw, redis_server.url, 0.5)
    # The same chain scored in process too, for comparison (its own telemetry).
    local = GroundwatchTelemetry()
    local_handler = GroundwatchCallbackHandler(local.monitor(sampler=gw.RatioSampler(1.0)))
    requests = {}
    for question in QUESTIONS:
        with capgw.tracer.start_as_current_span("request") as request:
            case.chain.invoke(question, {"callbacks": [handler, local_handler]})
        ctx = request.get_span_context()
        requests[f"{ctx.trace_id:032x}"] = f"{ctx.span_id:016x}"
    assert monitor.force_flush(10_000)
    in_process = {f"{r.trace_id:032x}": e for r, e in local.results()}
    local.close()
    sampled, app_dropped = _app_counts(capgw)
    assert 5 < sampled < len(QUESTIONS) and app_dropped == 0  # the ratio sampler decided

    wait_for(lambda: len(_evaluations(a.spans() + b.spans())) == sampled, 60, "every record")
    spans = _evaluations(a.spans() + b.spans())
    assert a.spans() and b.spans(), "both workers took a share"
    for span in spans.values():
        # In the request's trace, under the request's span, as with in-process scoring.
        assert requests[span["trace_id"]] == span["parent_span_id"]
        assert span["attributes"][sc.GROUNDWATCH_ROUTE] == "faq"
        assert span["attributes"][sc.GROUNDWATCH_SAMPLING_RATE] == 0.5
        # The same judge, the same scores as in process.
        expected = in_process[span["trace_id"]]
        assert span["attributes"][sc.GROUNDWATCH_LABEL] == expected.label
        assert span["attributes"].get(sc.GROUNDWATCH_FAITHFULNESS) == expected.faithfulness
    assert len({s["trace_id"] for s in spans.values()}) == sampled

    metrics = [a.terminate(), b.terminate()]
    _no_internal_errors(metrics)
    evaluations, worker_dropped = _worker_counts(metrics)
    queued = redis_server.client().xlen(STREAM)
    assert sampled == evaluations + app_dropped + worker_dropped + queued
    assert queued == 0


def test_kill_9_a_worker_holding_entries_and_the_other_scores_them(
    capgw: GroundwatchTelemetry, redis_server: RedisServer, workers: Any
) -> None:
    client = redis_server.client()
    monitor, handler, case = _app(capgw, redis_server.url, 1.0)
    requests = _ask(capgw, handler, case, QUESTIONS[:6])
    assert monitor.force_flush(10_000)
    stuck = workers(
        redis_server.url, "--visibility-timeout-ms", "1500", env={"GW_TEST_JUDGE_SLEEP_S": "60"}
    )

    def held() -> list[Any]:
        try:
            return client.xpending_range(STREAM, "scorers", "-", "+", 100)
        except Exception:  # the group does not exist yet
            return []

    wait_for(lambda: held(), 30, "the first worker to hold entries")
    time.sleep(0.5)
    taken = {p["message_id"] for p in held()}
    held_ids = {
        stream_json.decode(fields[b"record"]).record_id
        for entry_id, fields in client.xrange(STREAM)
        if entry_id in taken
    }
    assert held_ids
    stuck.kill()  # SIGKILL: no release, no acknowledgement
    survivor = workers(redis_server.url, "--visibility-timeout-ms", "1500")
    wait_for(lambda: len(_evaluations(survivor.spans())) == 6, 60, "all six records")
    spans = _evaluations(survivor.spans())
    assert held_ids <= set(spans)  # the killed worker's entries were taken over
    assert stuck.spans() == []
    for span in spans.values():
        assert requests[span["trace_id"]] == span["parent_span_id"]
    metrics = [survivor.terminate()]
    _no_internal_errors(metrics)
    evaluations, worker_dropped = _worker_counts(metrics)
    sampled, app_dropped = _app_counts(capgw)
    assert sampled == 6 == evaluations + app_dropped + worker_dropped + client.xlen(STREAM)
    assert client.xpending(STREAM, "scorers")["pending"] == 0


def test_redis_restart_while_the_app_records(
    capgw: GroundwatchTelemetry, redis_server: RedisServer, workers: Any
) -> None:
    worker = workers(redis_server.url)
    monitor, handler, case = _app(capgw, redis_server.url, 1.0, send_timeout_millis=1000)
    _ask(capgw, handler, case, QUESTIONS[:10])
    assert monitor.force_flush(10_000)
    wait_for(lambda: len(_evaluations(worker.spans())) == 10, 60, "the first ten records")

    redis_server.stop()
    slowest = 0.0
    for i in range(60):  # recorded while Redis is down: never raises, never blocks
        start = time.perf_counter()
        _ask(capgw, handler, case, [f"outage question {i}"])
        slowest = max(slowest, time.perf_counter() - start)
        time.sleep(0.03)
    redis_server.start()  # empty: persistence is off
    _ask(capgw, handler, case, QUESTIONS[10:20])
    assert monitor.force_flush(15_000)

    sampled, app_dropped = _app_counts(capgw)
    wait_for(lambda: len(_evaluations(worker.spans())) >= sampled - app_dropped, 60, "the rest")
    metrics = [worker.terminate()]
    _no_internal_errors(metrics)
    evaluations, worker_dropped = _worker_counts(metrics)
    queued = redis_server.client().xlen(STREAM)
    transport = capgw.metric_total(sc.METRIC_DROPPED, error__type="transport")
    full = capgw.metric_total(sc.METRIC_RECORDS, groundwatch__decision="queue_full")
    assert transport + full > 0, "the outage was felt"
    assert len(_evaluations(worker.spans())) == evaluations
    assert sampled == evaluations + app_dropped + worker_dropped + queued
    assert sampled + full == 80
    assert slowest < 0.5, f"one request took {slowest * 1000:.0f} ms during the outage"


def test_malformed_entries_are_dead_lettered_and_the_worker_goes_on(
    capgw: GroundwatchTelemetry, redis_server: RedisServer, workers: Any
) -> None:
    client = redis_server.client()
    monitor, handler, case = _app(capgw, redis_server.url, 1.0)
    _ask(capgw, handler, case, QUESTIONS[:3])
    assert monitor.force_flush(10_000)
    client.xadd(STREAM, {"record": b"{not json"})
    client.xadd(STREAM, {"record": json.dumps({"version": 7, "record_id": "x"}).encode()})
    _ask(capgw, handler, case, QUESTIONS[3:6])
    assert monitor.force_flush(10_000)
    worker = workers(redis_server.url)
    wait_for(lambda: client.xlen(STREAM) == 0, 60, "the stream to drain")
    metrics = [worker.terminate()]
    _no_internal_errors(metrics)
    assert len(_evaluations(worker.spans())) == 6
    assert len(client.xrange(f"{STREAM}:dead")) == 2
    assert metric_sum(metrics[0], sc.METRIC_DROPPED, error__type="invalid_input") == 2
    evaluations, worker_dropped = _worker_counts(metrics)
    sampled, app_dropped = _app_counts(capgw)
    injected = 2
    assert sampled + injected == evaluations + app_dropped + worker_dropped + client.xlen(STREAM)


def test_probes_without_redis_live_but_not_ready_then_sigterm_exits_cleanly(
    workers: Any,
) -> None:
    port = _free_port()
    worker = workers(f"redis://127.0.0.1:{_free_port()}/0", "--health-port", str(port))

    def status(path: str) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0  # not listening yet

    wait_for(lambda: status("/livez") == 200, 60, "the health endpoint")
    assert status("/readyz") == 503  # Redis is not there: no traffic for this pod
    assert status("/nothing") == 404
    metrics = worker.terminate()
    _no_internal_errors([metrics])
