"""Score a few bundled answers with the embedded local judge (no network, no API key).

Run: python examples/quickstart.py
"""

from __future__ import annotations

import groundwatch as gw

CONTEXT = [
    "The Eiffel Tower, completed in 1889, stands 330 metres tall. It was designed by the "
    "engineering firm of Gustave Eiffel for the 1889 World's Fair in Paris.",
    "埃菲尔铁塔位于法国巴黎，于1889年建成，高330米。",
]

CASES = [
    ("grounded", "The Eiffel Tower was completed in 1889 and is 330 metres tall."),
    ("changed number", "The Eiffel Tower was completed in 1899 and is 330 metres tall."),
    ("made up", "The tower was painted gold by Napoleon, who lived in it until 1850."),
    ("refusal", "I don't know."),
    ("Chinese", "埃菲尔铁塔于1889年建成，高330米。"),
]


def main() -> None:
    for name, answer in CASES:
        ev = gw.evaluate(answer, CONTEXT, question="Tell me about the Eiffel Tower.")
        f = "-" if ev.faithfulness is None else f"{ev.faithfulness:.2f}"
        g = "-" if ev.groundedness is None else f"{ev.groundedness:.2f}"
        print(f"{name:15} {ev.label:21} faithfulness={f:5} groundedness={g:5}  {answer}")
        for claim in ev.claims:
            if claim.evidence:
                # Passages numbered from 1 for people (Evidence.passage is the 0-based index).
                evidence = claim.evidence[0]
                backing = f"<- passage {evidence.passage + 1}: {evidence.quote!r}"
            else:
                backing = f"-- no evidence: {claim.reason}"
            print(f"    {claim.verdict:13} {claim.text!r}  {backing}")


if __name__ == "__main__":
    main()
