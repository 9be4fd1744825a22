"""The prompts LettuceDetect's models read, per language, as their authors format them.

The models were fine-tuned on (prompt, answer) pairs whose prompt is one of these templates
filled with the question and the numbered passages (``lettucedetect``'s ``PromptUtils.
format_context`` and its ``prompts/`` files, MIT licence); the model reads the same text at
inference, so the templates are the models' input format and are kept here character for
character (trailing spaces and newlines included: they change the tokens). Placeholders are
``string.Template``'s: ``$question``, ``$num_passages``, ``$context``; ``$text`` in the
summary templates (no question).
"""

from __future__ import annotations

from collections.abc import Sequence
from string import Template
from typing import NamedTuple


class Prompts(NamedTuple):
    """One language's prompts."""

    passage: str
    """The word before each passage's number: ``passage 1: ...``."""
    qa: str
    """The template with a question."""
    summary: str
    """The template without one (summarisation)."""


PROMPTS: dict[str, Prompts] = {
    "en": Prompts(
        "passage",
        (
            "Briefly answer the following question:\n"
            "${question}\n"
            "Bear in mind that your response should be strictly based on the "
            "following ${num_passages} passages:\n"
            "${context}\n"
            "In case the passages do not contain the necessary information to "
            'answer the question, please reply with: "Unable to answer based on '
            'given passages."\n'
            "output:"
        ),
        "Summarize the following text:\n${text}\noutput:",
    ),
    "de": Prompts(
        "Passage",
        (
            "Beantworte die folgende Frage kurz:\n"
            "${question}\n"
            "Beachte, dass deine Antwort nur auf den folgenden ${num_passages} "
            "Passagen basieren soll:\n"
            "${context}\n"
            "Falls die Passagen nicht die notwendigen Informationen zur "
            'Beantwortung der Frage enthalten, antworte bitte mit: "Kann aufgrund '
            'der gegebenen Passagen nicht beantwortet werden."\n'
            "Ausgabe:"
        ),
        "Fasse den folgenden Text zusammen:\n${text}\nAusgabe:\n",
    ),
    "fr": Prompts(
        "passage",
        (
            "Réponds brièvement à la question suivante :\n"
            "${question}\n"
            "Note que ta réponse doit être basée uniquement sur les "
            "${num_passages} passages suivants :\n"
            "${context}\n"
            "Si les passages ne contiennent pas les informations nécessaires pour "
            "répondre à la question, réponds s'il te plaît par : \"Impossible de "
            'répondre sur la base des passages fournis."\n'
            "Sortie : "
        ),
        "Résume le texte suivant :\n${text}\nSortie : ",
    ),
    "es": Prompts(
        "pasaje",
        (
            "Responde a la siguiente pregunta brevemente:\n"
            "${question}\n"
            "Ten en cuenta que tu respuesta debe basarse únicamente en los "
            "siguientes ${num_passages} pasajes:\n"
            "${context}\n"
            "Si los pasajes no contienen la información necesaria para responder a "
            'la pregunta, por favor responde con: "No se puede responder con base '
            'en los pasajes proporcionados."\n'
            "Salida: "
        ),
        "Resume el siguiente texto:\n${text}\nSalida: ",
    ),
    "it": Prompts(
        "brano",
        (
            "Rispondi alla seguente domanda in modo breve:\n"
            "${question}\n"
            "Tieni presente che la tua risposta deve basarsi solo sui seguenti "
            "${num_passages} passaggi:\n"
            "${context}\n"
            "Se i passaggi non contengono le informazioni necessarie per "
            'rispondere alla domanda, per favore rispondi con: "Non può essere '
            'risposto in base ai passaggi forniti."\n'
            "Risposta:\n"
        ),
        "Riassumi il seguente testo:\n${text}\nRisposta: ",
    ),
    "pl": Prompts(
        "fragment",
        (
            "Zwięźle odpowiedz na następujące pytanie:\n"
            "${question}\n"
            "Pamiętaj, że Twoja odpowiedź powinna opierać się wyłącznie na "
            "następujących ${num_passages} fragmentach:\n"
            "${context}\n"
            "Jeśli fragmenty nie zawierają informacji niezbędnych do udzielenia "
            'odpowiedzi na pytanie, odpowiedz: "Nie można odpowiedzieć na '
            'podstawie podanych fragmentów."\n'
            "output: "
        ),
        "Streść następujący tekst:\n${text}\nWynik: ",
    ),
    "cn": Prompts(
        "段落",
        (
            "请简短回答以下问题：\n"
            "${question}\n"
            "请注意，您的回答应严格基于以下${num_passages}段落：\n"
            "${context}\n"
            '如果段落中不包含回答问题所需的信息，请回复："基于给定段落无法回答。"\n'
            "输出：\n"
        ),
        "请总结以下文本：\n${text}\n输出：\n",
    ),
    "hu": Prompts(
        "szövegrészlet",
        (
            "Röviden válaszolj az alábbi kérdésre:\n"
            "${question}\n"
            "Vedd figyelembe, hogy a válaszod kizárólag az alábbi ${num_passages} "
            "szövegrészletre támaszkodjon:\n"
            "${context}\n"
            "Ha a szövegrészletek nem tartalmazzák a kérdés megválaszolásához "
            'szükséges információt, válaszolj így: "Nem tudok válaszolni a '
            'megadott szövegrészletek alapján."\n'
            "output:"
        ),
        "Foglalja össze az alábbi szöveget:\n${text}\noutput:\n\n\n",
    ),
}
"""By the authors' language codes (``cn`` is Chinese)."""


def format_prompt(contexts: Sequence[str], question: str | None, lang: str) -> str:
    """The prompt for ``contexts`` (numbered from 1) and ``question`` (``None``: the
    summary template), as the model was trained to read it."""
    prompts = PROMPTS[lang]
    block = "\n".join(f"{prompts.passage} {i + 1}: {p}" for i, p in enumerate(contexts))
    if question is None:
        return Template(prompts.summary).substitute(text=block)
    return Template(prompts.qa).substitute(
        question=question, num_passages=len(contexts), context=block
    )


def passage_line(index: int, passage: str, lang: str) -> str:
    """One passage's line in the prompt (``index`` from 0)."""
    return f"{PROMPTS[lang].passage} {index + 1}: {passage}"
