"""Judging: what every judge shares, the judges, and the text toolkit they read answers with.

- :mod:`.scoring` turns a judge's claim verdicts into an :class:`~groundwatch.types.Evaluation`
  under a label policy, checking every quote against its passage (:mod:`.evidence_check`) and
  computing the answer's probability (:mod:`.probability`); :mod:`.evaluate` is the one way to
  score an answer (prepare, call the judge, score); :mod:`.registry` names the judges the
  commands offer.
- :mod:`.judges` holds the judges, one module (or package) each.
- :mod:`.text` reads text: words and their units (:mod:`.text.lexical`), claims
  (:mod:`.text.claims`), quantities (:mod:`.text.numerals`), structured tool outputs
  (:mod:`.text.structured`).
"""
