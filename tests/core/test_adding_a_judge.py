"""Adding a judge is its module and its line in the judges' list, and nothing else of the package.

A copy of the package gets a judge, ``EchoJudge`` in ``judging/judges/echo.py``, and the two
halves of its line in ``judging/judges/__init__.py`` (its import for type checkers, its name in
``__all__``). Then, in a fresh interpreter on that copy, the judge is a public name of
``groundwatch`` itself, loaded on first use like every judge, and judges answers; and mypy, on
that copy, types ``gw.EchoJudge`` as the class. A line in the registry would offer it to the
commands (tests/core/test_registry.py registers judges). Its answer model and its error rates
are entries under its name in two data files: with them its answers get that model's
probability, its flags can be extrapolated and the generated Prometheus rules hold its ranges;
without them, the label policy's probability and a refusal that names the judges measured.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import groundwatch

ECHO = '''"""A test's judge."""

from __future__ import annotations

from collections.abc import Sequence

from ...types import Claim, Evidence, Judgement, Passage


class EchoJudge:
    """Every answer supported, its evidence the whole first passage."""

    name = "echo"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        text = contexts[0].text
        evidence = [Evidence(passage=0, start=0, end=len(text), quote=text)]
        claim = Claim(text=answer, start=0, end=len(answer), verdict="supported", evidence=evidence)
        return Judgement(claims=[claim])
'''

SCRIPT = r"""
import json, sys
import groundwatch as gw
listed = "EchoJudge" in gw.__all__ and "EchoJudge" in dir(gw)
before = "groundwatch.judging.judges.echo" in sys.modules
evaluation = gw.evaluate("Paris is in France.", ["Paris is in France."], judge=gw.EchoJudge())
print(json.dumps([listed, before, gw.EchoJudge.__module__, evaluation.label]))
"""


def _add_judge(root: Path) -> None:
    """The edits a person makes to add ``EchoJudge``: its module and its line in the list."""
    (root / "judging" / "judges" / "echo.py").write_text(ECHO, encoding="utf-8")
    path = root / "judging" / "judges" / "__init__.py"
    text = path.read_text(encoding="utf-8")
    for after, added in (
        ("    from .cascade import CascadeJudge\n", "    from .echo import EchoJudge\n"),
        ('__all__ = [\n    "CascadeJudge",\n', '    "EchoJudge",\n'),
    ):
        assert text.count(after) == 1, after
        text = text.replace(after, after + added)
    path.write_text(text, encoding="utf-8")


@pytest.fixture
def package_with_a_judge(tmp_path: Path) -> Path:
    copy = tmp_path / "src" / "groundwatch"
    shutil.copytree(
        Path(groundwatch.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    _add_judge(copy)
    return copy


def _run(code: str, source: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(source)}
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_judge_added_to_the_list_is_a_public_name_loaded_on_use(
    package_with_a_judge: Path,
) -> None:
    done = _run(SCRIPT, package_with_a_judge.parent)
    assert done.returncode == 0, done.stderr
    listed, loaded_before_use, module, label = json.loads(done.stdout.splitlines()[-1])
    assert listed is True
    assert loaded_before_use is False
    assert module == "groundwatch.judging.judges.echo"
    assert label == "grounded"


def test_without_the_line_the_judge_is_no_name_of_the_package(tmp_path: Path) -> None:
    # The control: the module alone is not enough, so the test above measures the line.
    copy = tmp_path / "src" / "groundwatch"
    shutil.copytree(
        Path(groundwatch.__file__).parent, copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    (copy / "judging" / "judges" / "echo.py").write_text(ECHO, encoding="utf-8")
    done = _run(SCRIPT, copy.parent)
    assert done.returncode != 0
    assert "has no attribute 'EchoJudge'" in done.stderr


def test_type_checkers_see_the_added_judge_on_the_package(package_with_a_judge: Path) -> None:
    mypy = pytest.importorskip("mypy.api")
    user = package_with_a_judge.parent / "user.py"
    user.write_text(
        "import groundwatch as gw\nfrom groundwatch import EchoJudge\n"
        "reveal_type(gw.EchoJudge)\nreveal_type(EchoJudge().name)\n",
        encoding="utf-8",
    )
    out, err, status = mypy.run(
        [
            "--strict",
            "--follow-imports=silent",
            "--config-file",
            os.devnull,
            "--cache-dir",
            os.devnull,
            str(user),
        ]
    )
    assert "groundwatch.judging.judges.echo.EchoJudge" in out, out + err
    assert 'Revealed type is "str"' in out and status == 0, out + err


PROBABILITY_SCRIPT = r"""
import json
import groundwatch as gw
from groundwatch.judging import probability
from groundwatch.rates import RateTotals, extrapolate_rate, judge_error_rates

evaluation = gw.evaluate("Paris is in France.", ["Paris is in France."], judge=gw.EchoJudge())
as_local = probability.hallucination_probability(
    evaluation.label, evaluation.claims, judge="local", cjk=False,
    min_faithfulness=0.0, min_groundedness=0.0,
)
rates = judge_error_rates("echo", "en")
try:
    extrapolated = extrapolate_rate(RateTotals(scored=100, flagged=30), judge="echo") is not None
except ValueError as exc:  # no error rates measured for judge 'echo'
    extrapolated = str(exc)
from groundwatch.alerts.prometheus_rules import render_rules
in_rules = 'groundwatch_judge: "echo"' in render_rules()
print(json.dumps([
    evaluation.hallucination_probability, as_local, rates is not None, extrapolated, in_rules
]))
"""


def _add_models(root: Path) -> None:
    """The judge's answer model and error rates, under its name (here: the local judge's)."""
    for path, key in (
        (root / "judging" / "_answer_probability.json", "local"),
        (root / "rates" / "_judge_error_rates.json", "local"),
    ):
        data = json.loads(path.read_text(encoding="utf-8"))
        data["judges"]["echo"] = data["judges"][key]
        path.write_text(json.dumps(data), encoding="utf-8")


@pytest.mark.parametrize("entries", [True, False])
def test_a_judges_probability_model_and_error_rates_are_its_entries_under_its_name(
    package_with_a_judge: Path, entries: bool
) -> None:
    # docs/judges.md: its answer model in _answer_probability.json and its error rates in
    # _judge_error_rates.json, both under its name; without them, the policy's probability and
    # no extrapolation (the control).
    if entries:
        _add_models(package_with_a_judge)
    done = _run(PROBABILITY_SCRIPT, package_with_a_judge.parent)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    probability, as_local, has_rates, extrapolated, in_rules = out
    assert (probability == as_local) is entries
    assert has_rates is entries
    # The generated rules hold its ranges: the shipped rules file is regenerated with them.
    assert in_rules is entries
    if entries:
        assert extrapolated is True
    else:
        assert "no error rates measured for judge 'echo'" in extrapolated
