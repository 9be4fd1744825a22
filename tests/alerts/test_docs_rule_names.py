"""The docs name the Prometheus records and alerts the shipped rules file defines (issue #45
item 7: docs/alerts.md named records and an alert the file did not have). Read from the file
itself: every ``groundwatch…:…:…`` record name and every alert name the docs and the README
write exists in ``examples/prometheus/groundwatch-alerts.yml``, and docs/alerts.md names every
alert the file ships."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "examples" / "prometheus" / "groundwatch-alerts.yml"
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_RECORD = re.compile(r"\bgroundwatch[a-z_]*:[a-z0-9_]+:[a-z0-9_]+\b")
_ALERT = re.compile(r"\bGroundwatch[A-Z][A-Za-z]+\b")


def _shipped() -> tuple[set[str], set[str]]:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    return {r["record"] for r in rules if "record" in r}, {
        r["alert"] for r in rules if "alert" in r
    }


def _python_names() -> set[str]:
    """Classes named Groundwatch… in the code (the integrations' handlers), not alerts."""
    names: set[str] = set()
    for base in (ROOT / "src", ROOT / "integrations"):
        for path in base.rglob("*.py"):
            names.update(re.findall(r"^class (Groundwatch\w+)", path.read_text(), re.M))
    return names


def test_the_names_in_the_docs_are_the_shipped_ones() -> None:
    records, alerts = _shipped()
    assert records and alerts
    python = _python_names()
    wrong = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        where = page.relative_to(ROOT)
        wrong += [f"{where}: record {n}" for n in set(_RECORD.findall(text)) - records]
        wrong += [f"{where}: alert {n}" for n in set(_ALERT.findall(text)) - alerts - python]
    assert sorted(wrong) == []


def test_the_alerts_page_names_every_shipped_alert() -> None:
    _, alerts = _shipped()
    text = (ROOT / "docs" / "alerts.md").read_text(encoding="utf-8")
    assert sorted(a for a in alerts if a not in text) == []
