"""Monitor any RAG function: one ``monitor.record()`` call, results on the console exporters.

Run (no API key, no network; from a clone of the repository)::

    pip install -e ".[sdk]"
    python examples/monitor_any_function.py
"""

from __future__ import annotations

from opentelemetry import _logs, metrics, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

import groundwatch as gw

# 1. OpenTelemetry as usual (here: print everything). Set the providers up before the monitor.
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
trace.set_tracer_provider(tracer_provider)
metrics.set_meter_provider(
    MeterProvider(metric_readers=[PeriodicExportingMetricReader(ConsoleMetricExporter())])
)
logger_provider = LoggerProvider()
logger_provider.add_log_record_processor(SimpleLogRecordProcessor(ConsoleLogRecordExporter()))
_logs.set_logger_provider(logger_provider)

# 2. One monitor per process: the embedded judge, every record scored (GROUNDWATCH_SAMPLE_RATE).
monitor = gw.Monitor(route="faq")

DOCS = {
    "eiffel": "The Eiffel Tower, completed in 1889, stands 330 metres (1,083 ft) tall.",
    "louvre": "The Louvre is the world's most-visited museum, in the 1st arrondissement.",
}
tracer = trace.get_tracer("my-rag-app")


def answer_question(question: str) -> str:
    """Your RAG function: retrieve, generate, and hand the three parts to the monitor."""
    with tracer.start_as_current_span("rag.request"):
        passages = [text for key, text in DOCS.items() if key in question.lower()]
        answer = "The Eiffel Tower is 330 metres tall. It was painted gold in 1999."
        monitor.record(question=question, contexts=passages, answer=answer)  # microseconds
        return answer


if __name__ == "__main__":
    answer_question("How tall is the Eiffel tower?")
    # Scoring happens in the background; at exit the monitor flushes by itself. Shut down
    # explicitly to see the spans now.
    monitor.shutdown()
