"""Alert sinks: the OTel log event and counter, the log line, the webhook, the on_result hook."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar

import pytest

from groundwatch._shared import guard
from groundwatch.alerts import (
    ALERT_EVENT_NAME,
    ALERTS_METRIC,
    Alert,
    AlertingHook,
    DropDetector,
    OTelAlertEmitter,
    WebhookAlert,
    log_alert,
)
from groundwatch.types import Evaluation, RagRecord


def make_alert(kind: str = "fired", route: str | None = "faq") -> Alert:
    return Alert(
        kind=kind,  # type: ignore[arg-type]
        score="flag_share",
        route=route,
        baseline=0.05,
        current=0.22,
        evaluations=41,
        method="cusum",
        threshold=6.5,
        time=1_700_000_000.5,
    )


def test_otel_emitter_event_and_counter(otel: Any) -> None:
    logger_provider, logs, meter_provider, reader = otel
    emit = OTelAlertEmitter(logger_provider=logger_provider, meter_provider=meter_provider)
    emit(make_alert("fired"))
    emit(make_alert("resolved"))
    emit(make_alert("fired", route=None))

    records = [r.log_record for r in logs.get_finished_logs()]
    assert [r.event_name for r in records] == [ALERT_EVENT_NAME] * 3
    first = records[0]
    assert first.severity_text == "WARN"
    assert first.timestamp == 1_700_000_000_500_000_000
    assert "rose from 0.050 to 0.220 over 41 evaluations" in str(first.body)
    attrs = dict(first.attributes or {})
    assert attrs.pop("gen_ai.evaluation.name") == "flag_share"
    assert attrs.pop("groundwatch.route") == "faq"
    assert attrs.pop("groundwatch.alert.kind") == "fired"
    assert attrs.pop("groundwatch.alert.method") == "cusum"
    assert attrs.pop("groundwatch.alert.baseline") == 0.05
    assert attrs.pop("groundwatch.alert.current") == 0.22
    assert attrs.pop("groundwatch.alert.evaluations") == 41
    assert attrs.pop("groundwatch.alert.threshold") == 6.5
    assert attrs == {}
    assert records[1].severity_text == "INFO"
    assert "groundwatch.route" not in (records[2].attributes or {})

    data = reader.get_metrics_data()
    points = {
        tuple(sorted(p.attributes.items())): p.value
        for rm in data.resource_metrics
        for sm in rm.scope_metrics
        for m in sm.metrics
        if m.name == ALERTS_METRIC
        for p in m.data.data_points
    }
    # Only fired alerts count: the counter's rate is new episodes.
    assert points == {
        (("gen_ai.evaluation.name", "flag_share"), ("groundwatch.route", "faq")): 1,
        (("gen_ai.evaluation.name", "flag_share"),): 1,
    }


def test_log_alert(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="groundwatch.alerts"):
        log_alert(make_alert("fired"))
        log_alert(make_alert("resolved"))
    assert [r.levelno for r in caplog.records] == [logging.WARNING, logging.INFO]
    assert "flag_share on route 'faq' rose from 0.050" in caplog.records[0].getMessage()
    assert "resolved" in caplog.records[1].getMessage()


class _Recorder(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict[str, str], Any]]] = []
    status = 200
    delay = 0.0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        type(self).received.append((dict(self.headers), json.loads(body)))
        if type(self).delay:
            threading.Event().wait(type(self).delay)
        self.send_response(type(self).status)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[tuple[str, type[_Recorder]]]:
    handler = type("Handler", (_Recorder,), {"received": [], "status": 200, "delay": 0.0})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/hook", handler
    httpd.shutdown()
    httpd.server_close()


def test_webhook_posts_json(server: tuple[str, type[_Recorder]]) -> None:
    url, handler = server
    hook = WebhookAlert(url, headers={"Authorization": "Bearer s3cret"})
    hook(make_alert())
    assert hook.sent == 1 and hook.failures == 0
    headers, body = handler.received[0]
    assert headers["Content-Type"] == "application/json"
    assert headers["Authorization"] == "Bearer s3cret"
    assert body["kind"] == "fired" and body["score"] == "flag_share"
    assert body["route"] == "faq" and body["current"] == 0.22 and body["evaluations"] == 41
    assert body["text"].startswith("groundwatch alert: flag_share")


def test_webhook_never_raises(
    server: tuple[str, type[_Recorder]], caplog: pytest.LogCaptureFixture
) -> None:
    url, handler = server
    handler.status = 500
    hook = WebhookAlert(url + "?token=s3cret")
    hook(make_alert())
    handler.status = 200
    handler.delay = 1.0
    slow = WebhookAlert(url, timeout_s=0.2)
    slow(make_alert())
    dead = WebhookAlert("http://127.0.0.1:9/none", timeout_s=0.5)
    dead(make_alert())
    assert (hook.failures, slow.failures, dead.failures) == (1, 1, 1)
    assert "s3cret" not in caplog.text
    with pytest.raises(ValueError):
        WebhookAlert("file:///etc/passwd")


def test_alerting_hook_as_on_result(otel: Any) -> None:
    logger_provider, logs, meter_provider, _ = otel
    errors_before = guard.errors[("on_alert", "RuntimeError")]
    received: list[Alert] = []

    def broken(alert: Alert) -> None:
        raise RuntimeError("user hook bug")

    hook = AlertingHook(
        DropDetector(warmup=50, floors=None, scores=("flag_share",)),
        on_alert=[
            broken,
            OTelAlertEmitter(logger_provider=logger_provider, meter_provider=meter_provider),
            received.append,
        ],
    )
    record = RagRecord(question="q", answer="a", route="support")
    for i in range(100):
        hook(record, Evaluation(label="hallucinated" if i % 25 == 0 else "grounded"))
    assert received == []
    for _ in range(60):
        hook(record, Evaluation(label="hallucinated"))
    assert [(a.kind, a.route) for a in received] == [("fired", "support")]
    assert list(hook.alerts) == received
    assert len(logs.get_finished_logs()) == 1
    # Counted (groundwatch.errors), not raised; the later sinks still ran.
    assert guard.errors[("on_alert", "RuntimeError")] == errors_before + 1


def test_alerting_hook_survives_bad_input() -> None:
    hook = AlertingHook(DropDetector(warmup=5), on_alert=[])
    before = guard.errors[("alerts", "AttributeError")]
    hook(object(), "not an evaluation")  # type: ignore[arg-type]
    assert guard.errors[("alerts", "AttributeError")] == before + 1
    hook(None, Evaluation(label="grounded", groundedness=1.0, faithfulness=1.0))
    assert hook.detector.state()[0]["route"] is None
