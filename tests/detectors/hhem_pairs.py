"""The (premise, hypothesis) pairs the HHEM fixtures were recorded on (``fixtures/hhem/``)."""

from __future__ import annotations

PAIRS: list[tuple[str, str]] = [
    # The model card's own examples.
    ("The capital of France is Berlin.", "The capital of France is Paris."),
    ("I am in California", "I am in United States."),
    ("I am in United States", "I am in California."),
    # Grounded, changed numbers, an unknown name, a long premise: lengths differ, so the batch
    # is padded.
    (
        "The Eiffel Tower was built in 1889 and is 330 metres tall. It was designed by the "
        "company of Gustave Eiffel and is made of wrought iron.",
        "The Eiffel Tower is 330 metres tall.",
    ),
    ("The Eiffel Tower was built in 1889.", "The Eiffel Tower was built in 1998."),
    (
        "Acme Corporation was started in 1998 by the siblings Ana and Luis Ortega in a garage "
        "in Seville; today it employs 250 people and sells olives in 12 countries.",
        "Acme was founded by Luis Ortega, it sells olives in 12 countries.",
    ),
    ("Acme employs 250 people.", "Acme employs 12 people!"),
    # Characters outside the vocabulary (<unk>), braces that must reach the model as text,
    # line breaks and a run of spaces.
    ("Le café {x} est à Paris.", "The café is in Paris {0}."),
    ("It is made of iron.\n\nIt is    tall.", "It is not made of iron."),
]

CUSTOM_PROMPT = "<pad> Premise: {text1}\nHypothesis: {text2}\nIs it true?"
"""A prompt of a checkpoint's own (in its ``config.json``), to show that it is read."""
