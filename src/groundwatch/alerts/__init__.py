"""Alerting on score drops: :mod:`.detector` (the statistics, no I/O) and :mod:`.sinks`
(where alerts go: an OpenTelemetry log event and counter, a log line, a webhook)."""

from ._cusum import MeanDesign, RateDesign, cusum_arl, threshold_for_arl
from .detector import (
    DEFAULT_FLOOR_MARGIN,
    DEFAULT_FLOOR_WINDOW,
    DEFAULT_FLOORS,
    DEFAULT_MAX_ROUTES,
    DEFAULT_MEAN_SHIFT_SIGMAS,
    DEFAULT_MEAN_TARGET_ARL,
    DEFAULT_MIN_RATE_RISE,
    DEFAULT_RATE_RISE,
    DEFAULT_TARGET_ARL,
    DEFAULT_WARMUP,
    SCORE_NAMES,
    Alert,
    DropDetector,
    ScoreName,
)
from .sinks import (
    ALERT_EVENT_NAME,
    ALERTS_METRIC,
    AlertingHook,
    AlertSink,
    OTelAlertEmitter,
    WebhookAlert,
    log_alert,
)

__all__ = [
    "ALERTS_METRIC",
    "ALERT_EVENT_NAME",
    "DEFAULT_FLOORS",
    "DEFAULT_FLOOR_MARGIN",
    "DEFAULT_FLOOR_WINDOW",
    "DEFAULT_MAX_ROUTES",
    "DEFAULT_MEAN_SHIFT_SIGMAS",
    "DEFAULT_MEAN_TARGET_ARL",
    "DEFAULT_MIN_RATE_RISE",
    "DEFAULT_RATE_RISE",
    "DEFAULT_TARGET_ARL",
    "DEFAULT_WARMUP",
    "SCORE_NAMES",
    "Alert",
    "AlertSink",
    "AlertingHook",
    "DropDetector",
    "MeanDesign",
    "OTelAlertEmitter",
    "RateDesign",
    "ScoreName",
    "WebhookAlert",
    "cusum_arl",
    "log_alert",
    "threshold_for_arl",
]
