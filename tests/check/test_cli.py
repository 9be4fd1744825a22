"""``python -m groundwatch check`` end to end: exit codes, summary, JSON Lines and JUnit."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

from ..extras import require_nli_runtime, require_semantic_extra
from ..nli_models import cross_encoder_folder
from .conftest import CONTEXT, GROUNDED, INVENTED, run_cli, write_jsonl


def test_exit_0_when_every_threshold_is_met(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "ok.jsonl", [GROUNDED, {**GROUNDED, "id": "ok2"}])
    proc = run_cli(data, "--min-groundedness", "0.9", "--max-flag-share", "0")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASS  mean groundedness 1.000 >= 0.9" in proc.stdout
    assert "result: PASS, exit 0" in proc.stdout
    # A short run on a pipe prints no progress lines: CI logs stay clean.
    assert proc.stderr == ""


def test_exit_1_when_a_threshold_fails(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mixed.jsonl", [GROUNDED, INVENTED])
    proc = run_cli(data, "--max-flag-share", "0.2", "--min-faithfulness", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  flag share 50.0% > 20.0% (1 of 2 judged answers)" in proc.stdout
    assert "PASS  mean faithfulness 1.000 >= 1.0" in proc.stdout
    # The worst answer is named with its failing claim.
    assert "invented (row 2) hallucinated" in proc.stdout
    assert '? unsupported: "Napoleon lived at the top of the tower' in proc.stdout


def test_a_console_that_cannot_show_chinese_does_not_crash_the_run(tmp_path: Path) -> None:
    row = {
        "contexts": ["埃菲尔铁塔位于法国巴黎，于1889年建成，高330米。"],
        "answer": "铁塔由金条制成。",
    }
    data = write_jsonl(tmp_path / "zh.jsonl", [row])
    proc = run_cli(data, "--max-flag-share", "0", env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 1, proc.stderr
    assert '? unsupported: "????????"' in proc.stdout


def test_exit_2_for_a_missing_file(tmp_path: Path) -> None:
    proc = run_cli(tmp_path / "nope.jsonl", "--json", tmp_path / "out.jsonl")
    assert proc.returncode == 2
    assert "no such file" in proc.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_exit_2_for_bad_rows_names_row_and_field_and_checks_the_rest(tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            GROUNDED,
            {"question": "q", "contexts": ["x"]},  # row 2: no answer
            '{"answer": "a", "contexts": ["x"]',  # row 3: broken JSON
            {**GROUNDED, "contexts": "not a list"},  # row 4
            INVENTED,  # row 5: still checked
        ],
    )
    out = tmp_path / "out.jsonl"
    proc = run_cli(data, "--json", out, "--max-flag-share", "1")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "row 2: field 'answer': missing" in proc.stderr
    assert "row 3: not valid JSON: the line ends before the JSON object is closed" in proc.stderr
    assert "row 4: field 'contexts': expected a list of passages, got a string" in proc.stderr
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["kind"], r["row"]) for r in lines[:-1]] == [
        ("evaluation", 1),
        ("invalid_row", 2),
        ("invalid_row", 3),
        ("invalid_row", 4),
        ("evaluation", 5),
    ]
    assert lines[-1]["kind"] == "summary"
    assert lines[-1]["invalid_rows"] == 3 and lines[-1]["rows"] == 2
    assert lines[-1]["exit_code"] == 2


def test_exit_2_for_an_unavailable_or_unconfigured_llm_judge(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "ok.jsonl", [GROUNDED])
    for kind in ("openai", "cascade"):
        proc = run_cli(data, "--judge", kind, "--api-key-env", "GROUNDWATCH_TEST_UNSET_KEY")
        assert proc.returncode == 2
        assert f"--judge {kind}" in proc.stderr


def test_exit_2_for_an_invalid_threshold(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "ok.jsonl", [GROUNDED])
    proc = run_cli(data, "--min-groundedness", "1.5")
    assert proc.returncode == 2
    assert "must be within [0, 1]" in proc.stderr


def test_json_lines_carry_every_evaluation(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "mixed.jsonl", [GROUNDED, INVENTED])
    out = tmp_path / "evals.jsonl"
    proc = run_cli(data, "--json", out)
    assert proc.returncode == 1, proc.stderr  # the default gate: any hallucinated answer fails
    first, second, summary = (json.loads(x) for x in out.read_text("utf-8").splitlines())
    assert first["id"] == "ok" and first["evaluation"]["label"] == "grounded"
    assert first["evaluation"]["groundedness"] == 1.0
    assert [c["verdict"] for c in first["evaluation"]["claims"]] == ["supported", "supported"]
    evidence = first["evaluation"]["claims"][0]["evidence"][0]
    assert GROUNDED["contexts"][0][evidence["start"] : evidence["end"]] == evidence["quote"]
    assert second["evaluation"]["label"] == "hallucinated" and second["expected"] == "hallucinated"
    assert summary["labels"]["grounded"] == 1 and summary["labels"]["hallucinated"] == 1
    assert summary["flag_share"] == 0.5
    assert summary["confusion"]["hallucinated"]["hallucinated"] == 1
    assert summary["balanced_accuracy"] == 1.0


def test_junit_has_one_case_per_answer_and_failures_list_claims(tmp_path: Path) -> None:
    data = write_jsonl(
        tmp_path / "mixed.jsonl",
        [GROUNDED, INVENTED, {"answer": "I don't know.", "contexts": ["x"]}, {"answer": 3}],
    )
    out = tmp_path / "junit.xml"
    proc = run_cli(data, "--junit", out, "--max-flag-share", "0.1")
    assert proc.returncode == 2  # the invalid row wins over the failed threshold
    root = ET.parse(out).getroot()
    assert root.tag == "testsuites"
    suite = root.find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    assert list(cases) == [
        "ok",
        "invented",
        "row 3",
        "row 4",
        "gate: flag share",
        "gate: judge errors",
        "gate: truncated inputs",
    ]
    assert cases["ok"].find("failure") is None
    failure = cases["invented"].find("failure")
    assert failure is not None and failure.get("type") == "hallucinated"
    message = failure.get("message") or ""
    assert message.startswith("hallucinated: faithfulness 1.00, groundedness 0.00; 1 unsupported")
    assert '\n? unsupported: "Napoleon lived at the top of the tower' in message
    assert "Napoleon lived at the top of the tower" in (failure.text or "")
    assert cases["row 3"].find("skipped") is not None
    error = cases["row 4"].find("error")
    assert error is not None and "field 'answer'" in (error.get("message") or "")
    assert cases["gate: flag share"].find("failure") is not None
    # The counts on the root elements match the cases.
    for element in (root, suite):
        assert element.get("tests") == "7"
        assert element.get("failures") == "2"
        assert element.get("errors") == "1"
        assert element.get("skipped") == "1"


def test_csv_input_with_json_contexts(tmp_path: Path) -> None:
    data = tmp_path / "set.csv"
    data.write_text(
        "id,question,contexts,answer,label\n"
        'a,How tall?,"[""The tower stands 330 metres tall.""]",The tower stands 330 metres tall.,'
        "grounded\n"
        "b,How tall?,The tower stands 330 metres tall.,It is tall.,faithful\n"
        'c,How tall?,"[""The tower stands 330 metres tall.""]",The tower is made of gold bars.,'
        "hallucinated\n",
        encoding="utf-8",
    )
    out = tmp_path / "out.jsonl"
    proc = run_cli(data, "--json", out)
    assert proc.returncode == 2
    assert "row 3: field 'contexts': expected a JSON list in the cell" in proc.stderr
    rows = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    assert [(r["kind"], r.get("id")) for r in rows[:-1]] == [
        ("evaluation", "a"),
        ("invalid_row", "b"),
        ("evaluation", "c"),
    ]
    assert rows[0]["evaluation"]["label"] == "grounded"
    assert rows[2]["evaluation"]["label"] == "hallucinated"


def test_exit_2_for_an_unwritable_output_before_any_work(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "ok.jsonl", [GROUNDED])
    proc = run_cli(data, "--junit", tmp_path / "no" / "such" / "dir" / "junit.xml")
    assert proc.returncode == 2
    assert "cannot write an output" in proc.stderr
    assert "result:" not in proc.stdout


def test_golden_set_gate_from_the_readme(golden_set: Path, tmp_path: Path) -> None:
    # The README's command: the set holds hallucinated answers on purpose, so the gate fails.
    proc = run_cli(
        golden_set,
        "--max-flag-share",
        "0.1",
        "--min-groundedness",
        "0.8",
        "--json",
        tmp_path / "g.jsonl",
        "--junit",
        tmp_path / "g.xml",
        "--html",
        tmp_path / "g.html",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL  flag share" in proc.stdout
    rows = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text("utf-8").splitlines()]
    evaluations = [r for r in rows if r["kind"] == "evaluation"]
    assert len(evaluations) == 12
    assert {r["expected"] for r in evaluations} == {"faithful", "hallucinated"}
    assert sum(any("\u4e00" <= ch <= "\u9fff" for ch in r["answer"]) for r in evaluations) == 5
    assert "balanced accuracy" in proc.stdout
    assert ET.parse(tmp_path / "g.xml").getroot().get("tests") == "16"  # 12 answers + 4 gates
    assert (tmp_path / "g.html").read_text("utf-8").count('<article class="case"') == 12
    # With loose thresholds the same set passes.
    assert run_cli(golden_set, "--max-flag-share", "1").returncode == 0


def test_lone_surrogate_escapes_in_json_input_do_not_break_the_outputs(tmp_path: Path) -> None:
    # json.loads turns "\ud800" into a lone surrogate, which no UTF-8 writer accepts.
    row = {
        "id": "odd\\ud800id",
        "question": "How tall is the Eiffel Tower?\\udfff",
        "contexts": [f"{CONTEXT} \\ud83d", {"text": "\\udc00 The tower is in Paris."}],
        "answer": "The Eiffel Tower \\ud800 stands 330 metres tall.",
    }
    line = json.dumps(row, ensure_ascii=False).replace("\\\\u", "\\u")
    data = write_jsonl(tmp_path / "surrogates.jsonl", [line])
    out = tmp_path / "out.jsonl"
    proc = run_cli(
        data, "--json", out, "--junit", tmp_path / "j.xml", "--html", tmp_path / "r.html"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert first["answer"] == "The Eiffel Tower \ufffd stands 330 metres tall."
    assert first["evaluation"]["label"] == "grounded"
    ET.parse(tmp_path / "j.xml")


def test_judge_flag_selects_the_semantic_judge(tmp_path: Path) -> None:
    require_semantic_extra()
    row = {
        "id": "reworded",
        "contexts": [
            "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a "
            "garage in Seville."
        ],
        "answer": "Ana and Luis Ortega, who are brother and sister, launched Acme in 1998.",
    }
    data = write_jsonl(tmp_path / "reworded.jsonl", [row])
    local_out = tmp_path / "local.jsonl"
    local = run_cli(data, "--max-flag-share", "0", "--json", local_out)
    assert local.returncode == 0, local.stdout + local.stderr
    local_eval = json.loads(local_out.read_text(encoding="utf-8").splitlines()[0])["evaluation"]
    assert local_eval["judge"] == "local"
    out = tmp_path / "semantic.jsonl"
    semantic = run_cli(data, "--judge", "semantic", "--max-flag-share", "0", "--json", out)
    assert semantic.returncode == 0, semantic.stdout + semantic.stderr
    evaluation = json.loads(out.read_text(encoding="utf-8").splitlines()[0])["evaluation"]
    assert evaluation["judge"] == "semantic"
    assert evaluation["claims"][0]["verdict"] == "inferred"


def test_exit_2_when_the_semantic_extra_is_missing(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "ok.jsonl", [GROUNDED])
    # A module set to None in sys.modules cannot be imported: the extra looks uninstalled.
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nsys.modules['onnxruntime'] = None\n", encoding="utf-8")
    proc = run_cli(data, "--judge", "semantic", env={"PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert 'pip install -e models/minilm -e ".[semantic]"' in proc.stderr


def test_check_scores_with_the_model_named_by_judge_nli_and_model(tmp_path: Path) -> None:
    require_nli_runtime()
    folder, _, _ = cross_encoder_folder(
        tmp_path / "m", {0: "entailment", 1: "not_entailment"}, tokenizer=True
    )
    row = {
        "id": "reworded",
        "contexts": ["Acme Corporation was started by the siblings Ana and Luis in Seville."],
        "answer": "A brother and sister founded Acme in Seville.",  # no sentence states it
    }
    data = write_jsonl(tmp_path / "reworded.jsonl", [row])
    out = tmp_path / "out.jsonl"
    done = run_cli(data, "--judge", "nli", "--model", folder, "--max-flag-share", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(judge: nli)" in done.stdout
    done = run_cli(data, "--judge", "nli", "--model", folder, "--json", out)
    evaluation = json.loads(out.read_text(encoding="utf-8").splitlines()[0])["evaluation"]
    assert evaluation["judge"] == "nli"
    assert "entailment" in evaluation["claims"][0]["reason"]  # the model read the claim
    for args, message in (
        ((), "--judge nli needs --model"),
        (("--model", tmp_path / "absent"), "cannot load"),
    ):
        done = run_cli(data, "--judge", "nli", *args)
        assert done.returncode == 2 and message in done.stderr, done.stdout + done.stderr
