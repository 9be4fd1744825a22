"""The embedded default judge: deterministic, pure Python, no network."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..claims import split_claims
from ..types import Claim, Evidence, Judgement, Passage

_TOKEN = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]", re.I)
_STOP = frozenset(
    "a an the of to in on at for by with and or is are was were be been it its this that as"
    " from".split()
)


def _tokens(text: str) -> list[str]:
    return [t for t in (m.group(0).lower() for m in _TOKEN.finditer(text)) if t not in _STOP]


class LocalJudge:
    """Lexical alignment of each claim with its best passage sentence."""

    name = "local"

    def __init__(self, support_threshold: float = 0.6) -> None:
        self.support_threshold = support_threshold

    def judge(self, answer: str, contexts: Sequence[Passage], question: str | None) -> Judgement:
        sentences: list[tuple[int, int, int, set[str]]] = []
        for pi, p in enumerate(contexts):
            for m in re.finditer(r"[^.!?。！？\n]+[.!?。！？]?", p.text):
                if m.group(0).strip():
                    sentences.append((pi, m.start(), m.end(), set(_tokens(m.group(0)))))
        claims: list[Claim] = []
        for span in split_claims(answer):
            toks = set(_tokens(span.text))
            best = None
            best_cov = 0.0
            for pi, s, e, stoks in sentences:
                cov = len(toks & stoks) / len(toks) if toks else 0.0
                if cov > best_cov:
                    best, best_cov = (pi, s, e), cov
            if best is not None and best_cov >= self.support_threshold:
                pi, s, e = best
                text = contexts[pi].text
                claims.append(
                    Claim(
                        text=span.text,
                        start=span.start,
                        end=span.end,
                        verdict="supported",
                        evidence=[Evidence(passage=pi, start=s, end=e, quote=text[s:e])],
                        reason=f"{best_cov:.0%} of the claim's words are in the passage",
                    )
                )
            else:
                claims.append(
                    Claim(
                        text=span.text,
                        start=span.start,
                        end=span.end,
                        verdict="unsupported",
                        reason=f"best passage covers {best_cov:.0%} of the claim's words",
                    )
                )
        return Judgement(claims=claims)
