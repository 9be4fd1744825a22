"""Where alerts go: sinks are plain callables ``(Alert) -> None``.

:class:`OTelAlertEmitter` (a ``groundwatch.alert`` log event and the ``groundwatch.alerts``
counter), :func:`log_alert` (one ``logging`` line), :class:`WebhookAlert` (an HTTP POST).
:class:`AlertingHook` joins a :class:`~groundwatch.alerts.detector.DropDetector` to its sinks and
is what ``Monitor(on_result=...)`` takes; a sink that raises is logged and counted, and the others
still get the alert.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._shared import guard
from .._version import __version__
from ..telemetry import semconv as sc
from .detector import Alert, DropDetector

if TYPE_CHECKING:
    from opentelemetry._logs import LoggerProvider
    from opentelemetry.metrics import MeterProvider

    from ..types import Evaluation

_logger = logging.getLogger(__name__)

# Telemetry names of alerting (all defined in telemetry/semconv.py).
ALERT_EVENT_NAME = sc.EVENT_ALERT
ALERTS_METRIC = sc.METRIC_ALERTS
ATTR_EVALUATION_NAME = sc.GEN_AI_EVALUATION_NAME
ATTR_ROUTE = sc.GROUNDWATCH_ROUTE
ATTR_ALERT_KIND = sc.GROUNDWATCH_ALERT_KIND
ATTR_ALERT_METHOD = sc.GROUNDWATCH_ALERT_METHOD
ATTR_ALERT_BASELINE = sc.GROUNDWATCH_ALERT_BASELINE
ATTR_ALERT_CURRENT = sc.GROUNDWATCH_ALERT_CURRENT
ATTR_ALERT_EVALUATIONS = sc.GROUNDWATCH_ALERT_EVALUATIONS
ATTR_ALERT_THRESHOLD = sc.GROUNDWATCH_ALERT_THRESHOLD


AlertSink = Callable[[Alert], object]
"""Where alerts go: any callable taking an :class:`Alert`. Its return value is ignored."""


class OTelAlertEmitter:
    """Emits each alert as a ``groundwatch.alert`` log event and counts it (``groundwatch.alerts``).

    Fired and resolved alerts both become log events (``groundwatch.alert.kind`` tells them
    apart, WARN for fired, INFO for resolved); only fired alerts increment the counter, so its
    rate is the number of new episodes.

    Args:
        logger_provider: defaults to the global one (``opentelemetry._logs``).
        meter_provider: defaults to the global one.
    """

    def __init__(
        self,
        logger_provider: LoggerProvider | None = None,
        meter_provider: MeterProvider | None = None,
    ) -> None:
        from opentelemetry import metrics
        from opentelemetry._logs import get_logger

        self._otel_logger = get_logger(
            "groundwatch.alerts", __version__, logger_provider=logger_provider
        )
        meter = metrics.get_meter("groundwatch.alerts", __version__, meter_provider=meter_provider)
        self._counter = meter.create_counter(
            ALERTS_METRIC, unit="{alert}", description="Score-drop alerts fired by groundwatch."
        )

    def __call__(self, alert: Alert) -> None:
        from opentelemetry._logs import SeverityNumber

        attributes: dict[str, Any] = {
            ATTR_EVALUATION_NAME: alert.score,
            ATTR_ALERT_KIND: alert.kind,
            ATTR_ALERT_METHOD: alert.method,
            ATTR_ALERT_CURRENT: alert.current,
            ATTR_ALERT_EVALUATIONS: alert.evaluations,
            ATTR_ALERT_THRESHOLD: alert.threshold,
        }
        if alert.route is not None:
            attributes[ATTR_ROUTE] = alert.route
        if alert.baseline is not None:
            attributes[ATTR_ALERT_BASELINE] = alert.baseline
        fired = alert.kind == "fired"
        self._otel_logger.emit(
            timestamp=int(alert.time * 1e9),
            severity_number=SeverityNumber.WARN if fired else SeverityNumber.INFO,
            severity_text="WARN" if fired else "INFO",
            body=alert.message,
            attributes=attributes,
            event_name=ALERT_EVENT_NAME,
        )
        if fired:
            metric_attrs: dict[str, str] = {ATTR_EVALUATION_NAME: alert.score}
            if alert.route is not None:
                metric_attrs[ATTR_ROUTE] = alert.route
            self._counter.add(1, metric_attrs)


def log_alert(alert: Alert, logger: logging.Logger | None = None) -> None:
    """An ``on_alert`` hook that writes one log line (WARNING when fired, INFO when resolved)."""
    (logger or _logger).log(
        logging.WARNING if alert.kind == "fired" else logging.INFO, "%s", alert.message
    )


class WebhookAlert:
    """An ``on_alert`` hook that POSTs each alert as JSON to a URL (a chat or paging webhook).

    Synchronous with a short timeout, and it never raises: a failed POST is logged and counted
    in :attr:`failures`. Alerts are rare (one per episode), so a blocked worker is bounded by
    ``timeout_s`` per alert.

    Args:
        url: the endpoint; ``http`` or ``https`` only.
        timeout_s: seconds to wait for the server.
        headers: extra headers (e.g. an authorization token; never logged).
        payload: turns an alert into the JSON body; default ``alert.model_dump()`` plus
            ``text`` (the one-line message, which Slack-style webhooks display).
    """

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float = 2.0,
        headers: Mapping[str, str] | None = None,
        payload: Callable[[Alert], Mapping[str, Any]] | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError("webhook url must start with http:// or https://")
        self.url = url
        self.timeout_s = float(timeout_s)
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._payload = payload
        self.sent = 0
        self.failures = 0

    def __call__(self, alert: Alert) -> None:
        # Here, not at the top: urllib.request brings http.client and email (~10 ms), which
        # an application that sends no webhook should not pay for at start-up.
        import urllib.parse
        import urllib.request

        try:
            body = (
                dict(self._payload(alert))
                if self._payload is not None
                else {**alert.model_dump(), "text": alert.message}
            )
            data = json.dumps(body).encode("utf-8")
            req = urllib.request.Request(self.url, data=data, headers=self._headers, method="POST")
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                resp.read(1024)
            self.sent += 1
        except Exception as exc:  # never raise into the worker
            self.failures += 1
            # The URL may carry a token in its query; log only the scheme and host.
            host = urllib.parse.urlparse(self.url).netloc
            _logger.warning("groundwatch alert webhook to %s failed: %s", host, type(exc).__name__)


class AlertingHook:
    """Joins a :class:`DropDetector` to alert sinks; pass it as ``Monitor(on_result=...)``.

    Called as ``hook(record, evaluation)`` on the worker for each scored record; it feeds the
    detector with ``record.route`` and hands every alert to each sink in turn. A failing sink is
    logged (rate-limited) and counted in ``groundwatch.errors{groundwatch.component="on_alert"}``,
    and the other sinks still run; the hook never raises.

    Args:
        detector: the detector; default ``DropDetector()``.
        on_alert: sinks, called in order; default ``[OTelAlertEmitter(), log_alert]``.
    """

    def __init__(
        self,
        detector: DropDetector | None = None,
        on_alert: Sequence[AlertSink] | None = None,
    ) -> None:
        self.detector = detector if detector is not None else DropDetector()
        self.sinks: list[AlertSink] = (
            list(on_alert) if on_alert is not None else [OTelAlertEmitter(), log_alert]
        )
        self.alerts: deque[Alert] = deque(maxlen=100)
        """The most recent alerts (at most 100), newest last."""

    def __call__(self, record: Any, evaluation: Evaluation) -> None:
        try:
            route = getattr(record, "route", None)
            alerts = self.detector.update(evaluation, route=route)
        except Exception as exc:
            # On the worker there is nobody to raise to: count (groundwatch.errors) and log.
            guard.internal_error("alerts", exc, reraise=False)
            return
        for alert in alerts:
            self.alerts.append(alert)
            self.dispatch(alert)

    def dispatch(self, alert: Alert) -> None:
        """Hand one alert to every sink, isolating their failures."""
        for sink in self.sinks:
            try:
                sink(alert)
            except Exception as exc:
                guard.user_error("on_alert", exc)
