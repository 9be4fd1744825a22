"""The judges the commands offer by name (``--judge NAME`` of ``check``, ``serve`` and
``worker``): one table, read by every command for its choices, its help and its judge.

A built-in judge is one module under :mod:`groundwatch.judging.judges` and one line of the
table at the end of this file; a plugin or a test registers its own with :func:`register`
before the command line is read, and every command offers it::

    from groundwatch.judging import registry

    registry.register(
        "mine", lambda options: MyJudge(), summary="my judge, for a try-out"
    )

A builder takes the :class:`JudgeOptions` of the command line (``--model``, ``--base-url``,
``--api-key-env``) and returns the judge, or raises :class:`UsageError` (re-exported here)
with the line to show (exit 2). The judge classes are imported when a judge is built, not when
a command starts: ``--judge local`` never loads the LLM judge's module.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .._shared.errors import UsageError
from .judges._base import Judge
from .judges.cascade import CascadeJudge

__all__ = [
    "DEFAULT_API_KEY_ENV",
    "DEFAULT_JUDGE",
    "Entry",
    "JudgeOptions",
    "UsageError",
    "add_judge_options",
    "build",
    "close",
    "entry",
    "help_text",
    "judge_from_args",
    "names",
    "parts",
    "register",
    "unknown_judge_message",
    "unregister",
]

DEFAULT_JUDGE = "local"
DEFAULT_API_KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True)
class JudgeOptions:
    """What a command line says about the judge besides its name."""

    model: str | None = None
    """The LLM judge's model name, or the NLI or detector judge's model (``--model``)."""
    base_url: str | None = None
    """An OpenAI-compatible endpoint (``--base-url``)."""
    api_key_env: str = DEFAULT_API_KEY_ENV
    """The environment variable holding the API key (``--api-key-env``)."""


Builder = Callable[[str, JudgeOptions], Judge]
"""Builds the judge registered under a name (the name comes first, for error messages)."""


@dataclass(frozen=True)
class Entry:
    """One judge the commands offer."""

    name: str
    summary: str
    """What it is, in a few words, for ``--judge``'s help: ``name (summary)``."""
    build: Builder


_entries: dict[str, Entry] = {}


def register(name: str, build: Callable[[JudgeOptions], Judge], *, summary: str) -> None:
    """Offer the judge ``build`` makes as ``--judge NAME`` in every command; a name registered
    again is replaced (in place: the order of the names stays)."""
    _entries[name] = Entry(name, summary, lambda _name, options: build(options))


def unregister(name: str) -> None:
    """Stop offering ``name`` (nothing happens for a name not registered)."""
    _entries.pop(name, None)


def _register(name: str, build: Builder, summary: str) -> None:
    _entries[name] = Entry(name, summary, build)


def names() -> tuple[str, ...]:
    """The registered names, in the order they were first registered (built-ins first)."""
    return tuple(_entries)


def entry(name: str) -> Entry:
    """The entry registered under ``name``.

    Raises:
        UsageError: no judge is registered under ``name``.
    """
    found = _entries.get(name)
    if found is None:
        raise UsageError(unknown_judge_message(name))
    return found


def unknown_judge_message(name: str) -> str:
    """The error line for a judge name nobody registered (a command line never gets this far:
    ``--judge``'s choices are the registered names, and argparse refuses another)."""
    return f"--judge {name}: no such judge (choose from {', '.join(_entries)})"


def help_text() -> str:
    """``--judge``'s help: every registered judge with its summary."""
    parts = [f"{e.name} ({e.summary})" for e in _entries.values()]
    if len(parts) > 1:
        parts[-1] = "or " + parts[-1]
    return ", ".join(parts)


def build(name: str, options: JudgeOptions | None = None) -> Judge:
    """The judge registered under ``name``, built with ``options``.

    Raises:
        UsageError: the name is unknown, or the judge cannot be built with these options (a
            missing extra, a missing ``--model`` or key); the message says which and what to do.
    """
    options = options or JudgeOptions()
    found = entry(name)
    try:
        return found.build(name, options)
    except UsageError:
        raise
    except Exception as exc:
        # The message never carries a key: keys are passed as arguments, not formatted.
        raise UsageError(f"--judge {name}: cannot build the judge: {type(exc).__name__}") from exc


def parts(judge: Any) -> Iterator[Any]:
    """The judge and the judges it runs (a cascade's stages, theirs in turn), each once."""
    seen: set[int] = set()
    todo = [judge]
    while todo:
        part = todo.pop(0)
        if part is None or id(part) in seen:
            continue
        seen.add(id(part))
        yield part
        if isinstance(part, CascadeJudge):
            todo.extend((part.first, part.then))


async def close(judge: Any) -> None:
    """Release the clients and threads of the judge and of every judge it runs (see
    :func:`parts`): each part's ``aclose()`` (awaited) or else its ``close()``. Best effort:
    a part that fails to close does not keep the others open, and nothing raises."""
    for part in parts(judge):
        for method_name in ("aclose", "close"):
            method = getattr(part, method_name, None)
            if callable(method):
                try:
                    result = method()
                    if asyncio.iscoroutine(result):
                        await result
                except Exception:  # closing is best effort at the end of a run
                    pass
                break


# --- the command line -------------------------------------------------------------------------


def add_judge_options(group: Any) -> None:
    """``--judge``, ``--model``, ``--base-url`` and ``--api-key-env`` on a parser or argument
    group: the options every command that scores (check, worker, serve) takes, read back by
    :func:`judge_from_args`. The choices and the help are the registry's as it stands now."""
    group.add_argument("--judge", choices=names(), default=DEFAULT_JUDGE, help=help_text())
    group.add_argument(
        "--model",
        help="the LLM judge's model name; for --judge nli, the entailment model "
        "(a folder, an ONNX file or a Hugging Face Hub id); for hhem, minicheck and "
        "lettucedetect, the model's folder (as published or exported) or hub id",
    )
    group.add_argument(
        "--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1"
    )
    group.add_argument(
        "--api-key-env",
        default=DEFAULT_API_KEY_ENV,
        metavar="VAR",
        help=f"environment variable holding the API key (default: {DEFAULT_API_KEY_ENV})",
    )


def judge_from_args(args: Any) -> Judge:
    """The judge the options of :func:`add_judge_options` ask for.

    Raises:
        UsageError: see :func:`build`.
    """
    options = JudgeOptions(model=args.model, base_url=args.base_url, api_key_env=args.api_key_env)
    return build(args.judge, options)


# --- the built-in judges ----------------------------------------------------------------------


def _local(name: str, options: JudgeOptions) -> Judge:
    from .judges.local import LocalJudge

    return LocalJudge()


def _semantic(name: str, options: JudgeOptions) -> Judge:
    from .judges.semantic import SemanticJudge

    try:
        return SemanticJudge()
    except ImportError as exc:
        raise UsageError(f"--judge {name}: {exc}") from exc


def _nli(name: str, options: JudgeOptions) -> Judge:
    from .judges.nli import NLIJudge

    if not options.model:
        raise UsageError(
            f"--judge {name} needs --model (the entailment model: a folder, an ONNX file or "
            "a Hugging Face Hub id)"
        )
    try:
        judge = NLIJudge(model=options.model)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"--judge {name}: {exc}") from exc
    if judge.load_error is not None:
        # A monitor keeps scoring with the lexical verdicts; a command asked for this model.
        raise UsageError(f"--judge {name}: cannot load {options.model}: {judge.load_error}")
    return judge


def _detector(name: str, options: JudgeOptions, judge_class: Callable[[str], Judge]) -> Judge:
    """A published detector judge (HHEM, MiniCheck, LettuceDetect) on ``--model``."""
    if not options.model:
        raise UsageError(
            f"--judge {name} needs --model (the model's folder, as published or exported by "
            "`groundwatch export-onnx`, or its Hugging Face Hub id)"
        )
    try:
        return judge_class(options.model)
    except (ImportError, ValueError, OSError) as exc:
        raise UsageError(f"--judge {name}: {exc}") from exc


def _hhem(name: str, options: JudgeOptions) -> Judge:
    from .judges.hhem import HHEMJudge

    return _detector(name, options, HHEMJudge)


def _minicheck(name: str, options: JudgeOptions) -> Judge:
    from .judges.minicheck import MiniCheckJudge

    return _detector(name, options, MiniCheckJudge)


def _lettucedetect(name: str, options: JudgeOptions) -> Judge:
    from .judges.lettucedetect import LettuceDetectJudge

    return _detector(name, options, LettuceDetectJudge)


def _llm_arguments(name: str, options: JudgeOptions) -> dict[str, Any]:
    """The LLM judge's arguments from the command line; a missing model or key is an error."""
    if not options.model:
        raise UsageError(f"--judge {name} needs --model (the LLM judge's model name)")
    kwargs: dict[str, Any] = {"model": options.model}
    if options.base_url:
        kwargs["base_url"] = options.base_url
    api_key = os.environ.get(options.api_key_env)
    if api_key:
        kwargs["api_key"] = api_key
    elif not options.base_url:
        # A local server (vLLM, Ollama) may need no key; the hosted API always does.
        raise UsageError(
            f"--judge {name}: the environment variable {options.api_key_env} is not set"
        )
    return kwargs


def _openai(name: str, options: JudgeOptions) -> Judge:
    from .judges.openai import OpenAIJudge

    return OpenAIJudge(**_llm_arguments(name, options))


def _cascade(name: str, options: JudgeOptions) -> Judge:
    from .judges.local import LocalJudge
    from .judges.openai import OpenAIJudge

    llm = OpenAIJudge(**_llm_arguments(name, options))
    return CascadeJudge(first=LocalJudge(), then=llm)


_register("local", _local, "embedded, no network; default")
_register(
    "semantic",
    _semantic,
    "local plus a small embedding model for reworded claims; needs groundwatch[semantic]",
)
_register(
    "nli",
    _nli,
    "local plus an entailment model you bring (--model); needs groundwatch[nli]",
)
_register(
    "hhem",
    _hhem,
    "Vectara's HHEM-2.1-Open (--model); needs groundwatch[detectors] or [detectors-torch]",
)
_register(
    "minicheck",
    _minicheck,
    "a MiniCheck fact checker (--model); needs groundwatch[detectors] or [detectors-torch]",
)
_register(
    "lettucedetect",
    _lettucedetect,
    "a LettuceDetect span detector (--model); needs groundwatch[detectors] or [detectors-torch]",
)
_register("openai", _openai, "an OpenAI-compatible LLM")
_register("cascade", _cascade, "local first, the LLM where the local judge is unsure")
