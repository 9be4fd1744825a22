"""The judge registry (groundwatch.judging.registry): every command offers, builds and closes
judges by name through it, so a judge registered once is a ``--judge`` choice everywhere."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import groundwatch
from groundwatch._shared.errors import UsageError
from groundwatch.cli import build_parser
from groundwatch.judging import registry
from groundwatch.types import Claim, Judgement, Passage

REPO = Path(__file__).resolve().parents[2]
COMMANDS = ("check", "serve", "worker")
BUILT_IN = ("local", "semantic", "nli", "hhem", "minicheck", "lettucedetect", "openai", "cascade")


def _judge_action(command: str) -> argparse.Action:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return next(a for a in sub.choices[command]._actions if "--judge" in a.option_strings)


def _groundwatch(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **(env or {})}
    environ["PYTHONPATH"] = os.pathsep.join(
        [*([environ["PYTHONPATH"]] if environ.get("PYTHONPATH") else []), str(REPO / "src")]
    )
    return subprocess.run(
        [sys.executable, "-m", "groundwatch", *args],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environ,
        timeout=120,
    )


class _Unsure:
    """A judge that finds one claim, the whole answer, and backs none of it."""

    name = "unsure"

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        return Judgement(
            claims=[
                Claim(text=answer, start=0, end=len(answer), verdict="unsupported", reason="unsure")
            ]
        )


@pytest.fixture
def unsure() -> Iterator[str]:
    registry.register("unsure", lambda options: _Unsure(), summary="backs no claim")
    try:
        yield "unsure"
    finally:
        registry.unregister("unsure")


def test_the_built_in_judges_are_registered_in_their_order() -> None:
    assert registry.names() == BUILT_IN
    assert isinstance(registry.build("local"), groundwatch.LocalJudge)


def test_every_command_offers_the_registered_judges_with_one_help(unsure: str) -> None:
    actions = {command: _judge_action(command) for command in COMMANDS}
    for command, action in actions.items():
        assert tuple(action.choices or ()) == (*BUILT_IN, unsure), command
        assert action.default == "local", command
        assert action.help == registry.help_text(), command
    assert "or unsure (backs no claim)" in registry.help_text()
    assert "local (embedded, no network; default)" in registry.help_text()


def test_an_unknown_judge_is_the_same_error_from_every_command() -> None:
    seen = set()
    for command in COMMANDS:
        args = ["rows.jsonl"] if command == "check" else []
        proc = _groundwatch(command, *args, "--judge", "nope")
        assert proc.returncode == 2, (command, proc.stderr)
        line = proc.stderr.strip().splitlines()[-1]
        assert "argument --judge: invalid choice: 'nope'" in line, (command, line)
        assert all(repr(name) in line for name in BUILT_IN), (command, line)
        seen.add(line.split(": error: ", 1)[1])
    assert len(seen) == 1, seen
    with pytest.raises(UsageError, match=r"--judge nope: no such judge \(choose from local, "):
        registry.build("nope")


def test_an_llm_judge_without_its_model_is_a_usage_error_naming_the_judge() -> None:
    for name in ("openai", "cascade"):
        with pytest.raises(UsageError, match=f"^--judge {name} needs --model"):
            registry.build(name)


def test_a_cascade_is_built_of_the_local_judge_and_the_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUNDWATCH_TEST_KEY", "sk-test")
    options = registry.JudgeOptions(model="m", api_key_env="GROUNDWATCH_TEST_KEY")
    cascade = registry.build("cascade", options)
    assert isinstance(cascade, groundwatch.CascadeJudge)
    parts = list(registry.parts(cascade))
    assert [type(p) for p in parts] == [
        groundwatch.CascadeJudge,
        groundwatch.LocalJudge,
        groundwatch.OpenAIJudge,
    ]
    asyncio.run(registry.close(cascade))


def test_close_reaches_every_stage_of_a_cascade_and_survives_a_failing_one() -> None:
    closed: list[str] = []

    class Async(_Unsure):
        async def aclose(self) -> None:
            closed.append("async")

    class Sync(_Unsure):
        def close(self) -> None:
            closed.append("sync")

    class Broken(_Unsure):
        def close(self) -> None:
            closed.append("broken")
            raise RuntimeError("cannot close")

    inner = groundwatch.CascadeJudge(first=Broken(), then=Async())
    outer = groundwatch.CascadeJudge(first=inner, then=Sync())
    asyncio.run(registry.close(outer))
    assert sorted(closed) == ["async", "broken", "sync"]


def test_a_registered_judge_is_usable_from_check_without_touching_the_cli(tmp_path: Path) -> None:
    context = "The Eiffel Tower, completed in 1889, stands 330 metres tall."
    row = {"id": "ok", "contexts": [context], "answer": "The Eiffel Tower was completed in 1889."}
    data = tmp_path / "rows.jsonl"
    data.write_text(json.dumps(row) + "\n", encoding="utf-8")
    # A plugin registers its judge before the command line is read (here: at start-up).
    plugin = tmp_path / "sitecustomize.py"
    plugin.write_text(
        "from groundwatch.judging import registry\n"
        "from groundwatch.types import Claim, Judgement\n"
        "class Unsure:\n"
        "    name = 'unsure'\n"
        "    def judge(self, answer, contexts, question):\n"
        "        return Judgement(claims=[Claim(text=answer, start=0, end=len(answer),\n"
        "                                       verdict='unsupported', reason='unsure')])\n"
        "registry.register('unsure', lambda options: Unsure(), summary='backs no claim')\n",
        encoding="utf-8",
    )
    env = {"PYTHONPATH": str(tmp_path)}
    local = _groundwatch("check", str(data), env=env)
    assert local.returncode == 0, local.stdout + local.stderr
    helped = _groundwatch("check", "--help", env=env)
    assert "or unsure (backs no claim)" in " ".join(helped.stdout.split())
    out = tmp_path / "unsure.jsonl"
    proc = _groundwatch("check", str(data), "--judge", "unsure", "--json", str(out), env=env)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the registered judge failed it
    evaluation = json.loads(out.read_text(encoding="utf-8").splitlines()[0])["evaluation"]
    assert evaluation["judge"] == "unsure"
    assert evaluation["label"] == "hallucinated"
    assert [c["verdict"] for c in evaluation["claims"]] == ["unsupported"]
