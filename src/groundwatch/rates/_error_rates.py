"""The judges' measured error rates (sensitivity and specificity), shipped beside the judges.

``_judge_error_rates.json`` holds, per judge (as ``Evaluation.judge`` names it) and language, the
sensitivity and specificity measured on public human-labelled data, their spread across sources
(each source measured with a judge fitted without it) and how they were measured;
``docs/rates.md`` describes the measurement.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["JudgeErrorRates", "judge_error_rates", "shipped_error_rates"]

_logger = logging.getLogger(__name__)

_SHIPPED = Path(__file__).with_name("_judge_error_rates.json")


@dataclasses.dataclass(frozen=True)
class JudgeErrorRates:
    """How often a judge's flag agrees with people, measured on labelled data.

    Attributes:
        sensitivity: P(judge flags | a person says hallucinated).
        specificity: P(judge does not flag | a person says faithful).
        sensitivity_low, sensitivity_high: the spread of the sensitivity across sources, each
            measured on a source the judge was not fitted on.
        specificity_low, specificity_high: the same for the specificity.
        labelled: labelled answers behind the measurement.
        measured: how they were measured, one sentence.
        sources: per source, ``{"sensitivity": ..., "specificity": ..., "labelled": ...}``.
    """

    sensitivity: float
    specificity: float
    sensitivity_low: float
    sensitivity_high: float
    specificity_low: float
    specificity_high: float
    labelled: int = 0
    measured: str = ""
    sources: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("sensitivity", "specificity"):
            low, point, high = (
                getattr(self, f"{name}_low"),
                getattr(self, name),
                getattr(self, f"{name}_high"),
            )
            if not 0.0 <= low <= point <= high <= 1.0:
                raise ValueError(
                    f"{name} must satisfy 0 <= low <= value <= high <= 1, "
                    f"got {low!r}, {point!r}, {high!r}"
                )


def judge_error_rates(
    judge: str, language: str = "en", *, path: str | os.PathLike[str] | None = None
) -> JudgeErrorRates | None:
    """The shipped error rates of ``judge`` in ``language``, or ``None`` where none were measured.

    Args:
        judge: the judge's name, as ``Evaluation.judge`` gives it.
        language: the answers' language.
        path: a JSON file in the shipped format to read instead of the shipped one.

    Returns:
        The rates, or ``None`` when the file, the judge or the language is missing, or the
        entry is malformed (logged once per file): a missing measurement means no correction,
        never made-up numbers.
    """
    table = _load(str(path) if path is not None else str(_SHIPPED))
    entry = table.get("judges", {}).get(judge, {}).get(language)
    if not isinstance(entry, dict):
        return None
    try:
        return JudgeErrorRates(
            sensitivity=float(entry["sensitivity"]),
            specificity=float(entry["specificity"]),
            sensitivity_low=float(entry["sensitivity_low"]),
            sensitivity_high=float(entry["sensitivity_high"]),
            specificity_low=float(entry["specificity_low"]),
            specificity_high=float(entry["specificity_high"]),
            labelled=int(entry.get("labelled", 0)),
            measured=str(table.get("measured", "")),
            sources=dict(entry.get("sources", {})),
        )
    except (KeyError, TypeError, ValueError) as exc:
        _logger.warning("judge error rates for %s/%s are malformed: %s", judge, language, exc)
        return None


def shipped_error_rates(judge: str, language: str = "en") -> JudgeErrorRates:
    """The shipped error rates of ``judge`` in ``language``, asked for by name.

    Raises:
        ValueError: nothing was measured for that judge or language; the message names what
            was (judges by ``Evaluation.judge``'s name: ``local``, not ``LocalJudge``).
    """
    judges = _load(str(_SHIPPED)).get("judges", {})
    languages = judges.get(judge) if isinstance(judges, dict) else None
    if not isinstance(languages, dict):
        known = ", ".join(sorted(judges)) if isinstance(judges, dict) else ""
        raise ValueError(
            f"no error rates measured for judge {judge!r}: measured for {known or 'none'} "
            "(the judge's name as Evaluation.judge gives it); pass error_rates= for another"
        )
    rates = judge_error_rates(judge, language)
    if rates is None:
        known = ", ".join(sorted(languages))
        raise ValueError(
            f"no error rates measured for judge {judge!r} in language {language!r}: measured "
            f"in {known or 'none'}; pass error_rates= for another"
        )
    return rates


@functools.lru_cache(maxsize=8)
def _load(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as file:
            table = json.load(file)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _logger.warning("cannot read judge error rates from %s: %s", path, exc)
        return {}
    return table if isinstance(table, dict) else {}
