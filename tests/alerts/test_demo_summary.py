"""The demo's closing lines: the worst answers, contradicted first, and which alerts are still
firing when the run ends (built from real Evaluations and Alerts, no subprocess)."""

from __future__ import annotations

from groundwatch import Claim, Evaluation
from groundwatch.alerts import Alert
from groundwatch.demo import cli as demo_cli


def _scored(request: int, verdicts: list[str], g: float, f: float) -> demo_cli.Scored:
    claims = [Claim(text=f"claim {i}.", verdict=v) for i, v in enumerate(verdicts)]  # type: ignore[arg-type]
    evaluation = Evaluation(label="hallucinated", groundedness=g, faithfulness=f, claims=claims)
    return demo_cli.Scored(request, f"q{request}", f"a{request}", evaluation)


def _worst_requests(lines: list[str]) -> list[int]:
    at = lines.index("Worst answers:")
    return [int(line.split()[1]) for line in lines[at + 1 :] if line.startswith("  request ")]


def test_worst_answers_list_contradicted_answers_before_unsupported_ones() -> None:
    results = [
        _scored(10, ["unsupported"], 0.0, 1.0),  # nothing backs it, nothing contradicts it
        _scored(20, ["supported", "contradicted"], 0.5, 0.5),
        _scored(30, ["unsupported", "unsupported"], 0.0, 1.0),
        _scored(40, ["contradicted"], 0.0, 0.0),
    ]
    lines = demo_cli.summary(results, drift_at=5, sampled=4, requests=50)
    assert _worst_requests(lines) == [41, 21]  # two shown: contradicted ones first


def _alert(kind: str, score: str) -> Alert:
    return Alert(
        kind=kind,  # type: ignore[arg-type]
        score=score,  # type: ignore[arg-type]
        route="help-centre",
        baseline=1.0,
        current=0.5,
        evaluations=4,
        method="cusum",
        threshold=3.0,
        time=0.0,
    )


def test_the_alerts_still_firing_at_the_end_are_named_with_the_request_that_fired_them() -> None:
    alerts = [
        (146, _alert("fired", "groundedness")),
        (151, _alert("fired", "flag_share")),
        (158, _alert("fired", "faithfulness")),
        (209, _alert("resolved", "groundedness")),
    ]
    assert demo_cli.still_firing(alerts) == (
        "Still firing at the end: flag_share (since request 152), "
        "faithfulness (since request 159), on route 'help-centre'."
    )
    alerts.append((250, _alert("resolved", "flag_share")))
    alerts.append((260, _alert("resolved", "faithfulness")))
    assert demo_cli.still_firing(alerts) == "No alert is firing at the end: every one resolved."
    assert demo_cli.still_firing([]) == "No alert is firing at the end."
