"""SemanticJudge behind a Monitor: pickled to the worker process and scored there."""

from __future__ import annotations

import groundwatch as gw
from groundwatch.telemetry import semconv as sc
from groundwatch.testing import GroundwatchTelemetry

from ..extras import require_semantic_extra

require_semantic_extra()

PASSAGE = (
    "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage in "
    "Seville. Today the business employs roughly 400 people."
)
PARAPHRASE = "Ana and Luis Ortega, who are brother and sister, launched Acme in 1998."
INVENTED = "Acme builds rockets for space tourism."


def test_semantic_judge_scores_in_the_worker_process(capgw: GroundwatchTelemetry) -> None:
    monitor = capgw.monitor(judge=gw.SemanticJudge(), executor="process")
    for answer in (PARAPHRASE, INVENTED):
        monitor.record(question="Who founded Acme?", contexts=[PASSAGE], answer=answer)
    results = capgw.results()
    assert [(r.answer, e.label) for r, e in results] == [
        (PARAPHRASE, "grounded"),
        (INVENTED, "hallucinated"),
    ]
    assert results[0][1].judge == "semantic"
    assert results[0][1].claims[0].verdict == "inferred"
    assert capgw.metric_total(sc.METRIC_CLAIMS, groundwatch__verdict="inferred") == 1
    assert capgw.metric_total(sc.METRIC_EVALUATIONS, groundwatch__label="grounded") == 1
