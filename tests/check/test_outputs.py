"""JUnit and JSON Lines writers on hostile text: still valid, still parseable."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import groundwatch as gw
from groundwatch.check.outputs import JsonLinesWriter, JUnitWriter
from groundwatch.check.rows import InvalidRow, Row
from groundwatch.check.summary import CheckSummary

NASTY = 'ctl\x00\x01\x1b "quotes" & <tags> ]]> 汉字 \U0001f600\n'


def test_junit_stays_valid_xml_with_control_characters_and_markup(tmp_path: Path) -> None:
    out = tmp_path / "j.xml"
    writer = JUnitWriter(out, classname="groundwatch.check.t")
    summary = CheckSummary(source=NASTY, judge="local")
    answer = "The tower is made of gold. " + NASTY
    row = Row(1, NASTY, NASTY, ["The tower is 330 metres tall."], answer, None)
    ev = gw.evaluate(answer, row.contexts, judge=gw.LocalJudge())
    summary.add(row, ev)
    writer.add(row, ev, 0.01)
    bad = InvalidRow(2, "answer", NASTY, None)
    summary.add_invalid(bad)
    writer.add_invalid(bad)
    writer.close(summary, summary.thresholds(max_flag_share=0.0), 2)
    root = ET.parse(out).getroot()
    cases = list(root.iter("testcase"))
    expected_name = 'ctl\ufffd\ufffd\ufffd "quotes" & <tags> ]]> 汉字 \U0001f600\n'
    assert cases[0].get("name") == expected_name
    failure = cases[0].find("failure")
    assert failure is not None and "<tags> ]]>" in (failure.text or "")
    assert cases[1].get("name") == "row 2"
    # the answer, the bad row, and three gate cases (hallucination rate failed, judge errors and
    # truncated inputs passed)
    assert root.get("tests") == "5" and root.get("errors") == "1" and root.get("failures") == "2"


def test_json_lines_round_trip_unicode(tmp_path: Path) -> None:
    out = tmp_path / "e.jsonl"
    writer = JsonLinesWriter(out)
    row = Row(3, "r", "问题？", ["铁塔高330米。"], "铁塔高330米。", "faithful")
    ev = gw.evaluate(row.answer, row.contexts, row.question)
    summary = CheckSummary()
    summary.add(row, ev)
    writer.add(row, ev, 0.5)
    writer.close(summary, summary.thresholds(), 0)
    raw = out.read_text(encoding="utf-8")
    assert "铁塔高330米" in raw  # readable, not \\u-escaped
    first, last = (json.loads(line) for line in raw.splitlines())
    assert first["row"] == 3 and first["evaluation"]["label"] == ev.label
    assert gw.Evaluation.model_validate(first["evaluation"]) == ev
    assert last["kind"] == "summary" and last["exit_code"] == 0
