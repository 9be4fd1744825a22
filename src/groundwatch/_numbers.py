"""Numbers, units and dates in English and Chinese text, normalised so they can be compared.

A :class:`Quantity` is a value with the precision it was written with (``181.7 million`` is
181,700,000 give or take 50,000), a *kind* (what it measures: money, a duration, a percentage, a
calendar year...) and a *unit* within that kind. Two quantities *match* when their units agree
and their values agree within the coarser of the two precisions, so ``$181,674,817`` matches
``$181.7 million`` and ``5,000,000`` = ``5 million`` = ``500万``. Two quantities *conflict* when
they measure the same kind of thing and do not match (``500万`` vs ``800万``, ``3个月`` vs ``3年``).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass

# Scale words after a number, with their multiplier.
_SCALES: dict[str, float] = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "millions": 1e6,
    "mn": 1e6,
    "m": 1e6,
    "mio": 1e6,
    "billion": 1e9,
    "billions": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
    "千": 1e3,
    "万": 1e4,
    "十万": 1e5,
    "百万": 1e6,
    "千万": 1e7,
    "亿": 1e8,
    "万亿": 1e12,
}

# Unit words after a number (or its scale word): word -> (kind, unit).
_UNITS: dict[str, tuple[str, str]] = {}


def _add_units(kind: str, unit: str, words: Iterable[str]) -> None:
    for w in words:
        _UNITS[w] = (kind, unit)


_add_units("percent", "%", ["%", "％", "percent", "per cent", "pct", "percentage points"])
_add_units("duration", "year", ["years", "year", "yrs", "yr", "年", "年间", "周年"])
_add_units("duration", "month", ["months", "month", "个月", "個月"])
_add_units("duration", "week", ["weeks", "week", "周", "星期", "个星期"])
_add_units("duration", "day", ["days", "day", "天"])
_add_units("duration", "hour", ["hours", "hour", "hrs", "hr", "小时", "个小时", "钟头"])
_add_units("duration", "minute", ["minutes", "minute", "mins", "min", "分钟"])
_add_units("duration", "second", ["seconds", "second", "secs", "sec", "秒", "秒钟"])
_add_units("age", "year", ["years old", "year-old", "岁", "周岁"])
_add_units("money", "usd", ["dollars", "dollar", "usd", "美元", "美金"])
_add_units("money", "eur", ["euros", "euro", "eur", "欧元"])
_add_units("money", "gbp", ["pounds sterling", "gbp", "英镑"])
_add_units("money", "cny", ["yuan", "rmb", "cny", "元", "块", "人民币"])
_add_units("money", "jpy", ["yen", "jpy", "日元"])
_add_units("length", "km", ["kilometres", "kilometers", "kilometre", "kilometer", "km", "公里"])
_add_units("length", "m", ["metres", "meters", "metre", "meter", "米"])
_add_units("length", "mile", ["miles", "mile", "英里"])
_add_units("length", "ft", ["feet", "foot", "ft"])
_add_units("mass", "kg", ["kilograms", "kilogram", "kg", "kgs", "公斤", "千克"])
_add_units("mass", "t", ["tonnes", "tons", "tonne", "ton", "吨"])
_add_units("mass", "lb", ["pounds", "pound", "lbs", "lb", "磅"])
_add_units("multiple", "x", ["times", "倍"])
_add_units("date", "month", ["月"])
_add_units("date", "day", ["日", "号"])
_add_units("count", "people", ["people", "persons", "人", "名", "位"])

_CURRENCY_SIGNS: dict[str, str] = {
    "$": "usd",
    "us$": "usd",
    "usd": "usd",
    "€": "eur",
    "£": "gbp",
    "¥": "cny",
    "￥": "cny",
    "rmb": "cny",
}

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        "january february march april may june july august september october november"
        " december".split()
    )
}
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
del _MONTHS["may"]  # "may" is far more often the verb; "May 2020" is caught by the year anyway
_MONTHS.pop("mar", None)  # likewise "mar" (to spoil)

_WORD_NUMBERS = {
    w: float(i)
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
        " fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
_WORD_NUMBERS.update({"thirty": 30.0, "forty": 40.0, "fifty": 50.0, "sixty": 60.0, "seventy": 70.0})
_WORD_NUMBERS.update({"eighty": 80.0, "ninety": 90.0, "hundred": 100.0, "dozen": 12.0})

_CN_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_CN_SMALL = {"十": 10, "百": 100, "千": 1000}
_CN_BIG = {"万": 10_000, "亿": 100_000_000}

_UNIT_ALT = "|".join(
    re.escape(u) for u in sorted(set(_UNITS) | {"个"}, key=len, reverse=True) if u != "个"
)
_SCALE_ALT = "|".join(re.escape(s) for s in sorted(_SCALES, key=len, reverse=True))

# A number written with digits: optional currency sign, digits (with thousands separators or a
# decimal part), optional scale word, optional unit. Not glued to letters on the left, so
# "COVID-19" and "MP3" are not numbers, and citation markers "[3]" are skipped by the caller.
_DIGIT_NUMBER = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\d])"
    r"(?:\s?(?P<scale>" + _SCALE_ALT + r")(?![a-z]))?"
    r"(?:\s?(?P<unit>" + _UNIT_ALT + r")(?![a-z]))?",
    re.IGNORECASE,
)
# A currency sign right before a number (checked backwards from the number's start).
_CURRENCY_BEFORE = re.compile(r"(?:us\$|\$|€|£|¥|￥|usd|rmb)\s?$", re.IGNORECASE)
_CURRENCY_TAIL = frozenset("$€£¥￥DdBb")
_GLUED = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-/")
_CN_NUMBER = re.compile(
    r"(?P<num>[零〇一二两三四五六七八九十百千万亿]+)(?P<unit>" + _UNIT_ALT + r"|个)",
)
_WORD_NUMBER = re.compile(
    r"\b(?P<num>" + "|".join(_WORD_NUMBERS) + r")[\s-]+(?P<scale>thousand|million|billion)?\s?"
    r"(?P<unit>" + _UNIT_ALT + r")\b",
    re.IGNORECASE,
)
# Finds number words fast (a literal alternation, no leading \b); each hit is then checked with
# the full pattern above, which is too slow to run over long passages by itself.
_WORD_NUMBER_HINT = re.compile(
    r"(?<![a-zA-Z])(?:"
    + "|".join(list(_WORD_NUMBERS) + [w.title() for w in _WORD_NUMBERS])
    + r")(?![a-z])"
)
_CITATION = re.compile(r"\[\d+(?:\s*[,\-–]\s*\d+)*\]")


@dataclass(frozen=True)
class Quantity:
    """A number as written, normalised: ``value`` ± ``step / 2``, of ``kind`` in ``unit``.

    ``start``/``end`` are offsets of the whole mention in the text it came from.
    """

    value: float
    step: float
    kind: str
    unit: str | None
    start: int
    end: int

    def matches(self, other: Quantity) -> bool:
        """Same quantity, allowing for rounding and for one side giving no unit."""
        if self.unit is not None and other.unit is not None and self.unit != other.unit:
            return False
        if self.kind != other.kind and "count" not in (self.kind, other.kind):
            return False
        tol = 0.5 * max(self.step, other.step) * (1 + 1e-9) + 1e-9 * abs(self.value)
        return abs(self.value - other.value) <= tol

    def conflicts(self, other: Quantity) -> bool:
        """Measures the same kind of thing as ``other`` but states a different amount or unit."""
        return self.kind == other.kind and not self.matches(other)


def _step_of(digits: str, scale: float, value: float, year_like: bool) -> float:
    """The precision a number was written with: 181.7 million -> 100,000; 500万 -> 1,000,000."""
    if "." in digits:
        decimals = len(digits.split(".", 1)[1])
        return scale * 10.0**-decimals
    if year_like:
        return 1.0
    plain = digits.replace(",", "")
    if value >= 1000:
        zeros = len(plain) - len(plain.rstrip("0"))
        # Keep at least one significant digit: "5,000,000" is 5 million to the nearest million.
        zeros = min(zeros, len(plain) - 1)
        return scale * 10.0**zeros
    return scale


def _cn_value(text: str) -> float | None:
    """Parse a Chinese numeral (三, 十二, 五百万, 两千零五十) into a value."""
    if all(ch in _CN_DIGITS for ch in text) and len(text) > 1:
        # 二〇一九 (a year written digit by digit)
        return float("".join(str(_CN_DIGITS[ch]) for ch in text))
    total = 0.0
    section = 0.0
    digit: float | None = None
    for ch in text:
        if ch in _CN_DIGITS:
            digit = float(_CN_DIGITS[ch])
        elif ch in _CN_SMALL:
            section += (1.0 if digit is None else digit) * _CN_SMALL[ch]
            digit = None
        elif ch in _CN_BIG:
            section += digit or 0.0
            total = (total + section) * _CN_BIG[ch] if ch == "亿" else total + section * _CN_BIG[ch]
            section = 0.0
            digit = None
        else:
            return None
    return total + section + (digit or 0.0)


def _kind_unit(unit_word: str | None, value: float, digits: str) -> tuple[str, str | None]:
    if unit_word is None:
        if "." not in digits and "," not in digits and 1000 <= value <= 2100:
            return "year", "year"
        return "count", None
    return _UNITS.get(unit_word.lower(), ("count", None))


def _glued(text: str, start: int) -> bool:
    if start == 0 or text[start - 1] not in _GLUED:
        return False
    # "-5" after a space is a negative number, not a suffix.
    return not (text[start - 1] == "-" and (start < 2 or text[start - 2] == " "))


def extract_quantities(text: str) -> list[Quantity]:
    """Every number mentioned in ``text`` (digits, Chinese numerals, number words with a unit).

    Citation markers such as ``[3]`` are not numbers.
    """
    if not _MAYBE_NUMBER.search(text):
        return []
    skip = [(m.start(), m.end()) for m in _CITATION.finditer(text)] if "[" in text else []
    out: list[Quantity] = []
    for m in _DIGIT_NUMBER.finditer(text):
        num_start = m.start()
        # Glued to a word ("COVID-19", "MP3") or the tail of another number: not a number.
        if _glued(text, num_start):
            continue
        if skip and any(s <= num_start < e for s, e in skip):
            continue
        digits, scale_word, unit_word = m.groups()
        scale_word = scale_word.lower() if scale_word else ""
        cur_match = None
        if num_start and (
            text[num_start - 1] in _CURRENCY_TAIL
            or (
                text[num_start - 1] == " " and text[num_start - 2 : num_start - 1] in _CURRENCY_TAIL
            )
        ):
            cur_match = _CURRENCY_BEFORE.search(text, max(0, num_start - 4), num_start)
        if not scale_word and unit_word is None and cur_match is None and "," not in digits:
            # The common case (a plain integer or decimal): no unit to resolve.
            base = float(digits)
            kind, unit = _kind_unit(None, base, digits)
            step = _step_of(digits, 1.0, base, kind == "year")
            out.append(Quantity(base, step, kind, unit, num_start, m.end()))
            continue
        try:
            base = float(digits.replace(",", ""))
        except ValueError:  # pragma: no cover - the pattern only admits numbers
            continue
        # "m"/"b" alone are scales only right after a currency sign ("$3m"), never "5 m" (metres).
        if scale_word in ("m", "b") and not cur_match:
            unit_word = unit_word or ("m" if scale_word == "m" else None)
            scale_word = ""
        scale = _SCALES.get(scale_word, 1.0)
        value = base * scale
        cur = cur_match.group(0).strip().lower() if cur_match else ""
        if unit_word in ("年",) and not scale_word:
            # 2019年 is a calendar year, 3年 a duration.
            if "." not in digits and 1000 <= base <= 2100:
                kind, unit = "year", "year"
            else:
                kind, unit = "duration", "year"
        elif unit_word == "月" and not (1 <= base <= 12):
            kind, unit = "count", None
        elif unit_word is not None:
            kind, unit = _kind_unit(unit_word, value, digits)
        elif scale_word in ("%",):
            kind, unit = "percent", "%"
        elif cur:
            kind, unit = "money", _CURRENCY_SIGNS.get(cur, "usd")
        elif scale != 1.0:
            kind, unit = "count", None
        else:
            kind, unit = _kind_unit(None, value, digits)
        if cur and kind == "count":
            kind, unit = "money", _CURRENCY_SIGNS.get(cur, "usd")
        year_like = kind == "year"
        step = _step_of(digits, scale, value, year_like)
        start = cur_match.start() if cur_match else num_start
        out.append(Quantity(value, step, kind, unit, start, m.end()))
    for m in _CN_NUMBER.finditer(text) if _CN_HINT.search(text) else ():
        num = m.group("num")
        unit_word = m.group("unit")
        if num == "一" or (num in ("万", "亿", "千", "百", "十")):
            continue  # 一个/一年: far more often an article than a count worth checking
        parsed = _cn_value(num)
        if parsed is None:
            continue
        if unit_word == "个":
            kind, unit = "count", None
        elif unit_word == "年":
            kind, unit = ("year", "year") if 1000 <= parsed <= 2100 else ("duration", "year")
        else:
            kind, unit = _UNITS.get(unit_word, ("count", None))
        step = 1.0
        if parsed >= 1000:
            s = str(int(parsed))
            zeros = min(len(s) - len(s.rstrip("0")), len(s) - 1)
            step = 10.0**zeros if kind != "year" else 1.0
        out.append(Quantity(parsed, step, kind, unit, m.start(), m.end()))
    for hint in _WORD_NUMBER_HINT.finditer(text):
        wm = _WORD_NUMBER.match(text, hint.start())
        if wm is None:
            continue
        base = _WORD_NUMBERS[wm.group("num").lower()]
        scale = _SCALES.get((wm.group("scale") or "").lower(), 1.0)
        kind, unit = _kind_unit(wm.group("unit"), base * scale, wm.group("num"))
        out.append(Quantity(base * scale, scale, kind, unit, wm.start(), wm.end()))
    return out


_CN_HINT = re.compile("[零〇一二两三四五六七八九十百千万亿]")
_DIGIT_OR_CN = re.compile(r"[\d零〇一二两三四五六七八九十百千万亿]")


class _MaybeNumber:
    """Cheap pre-check: digits, Chinese numerals, or an English number word somewhere."""

    @staticmethod
    def search(text: str) -> bool:
        if _DIGIT_OR_CN.search(text):
            return True
        return bool(_WORD_NUMBER_HINT.search(text))


_MAYBE_NUMBER = _MaybeNumber()


class QuantityIndex:
    """Quantities of a whole context, each with a tag (where it was found), searchable by value.

    Lookups cost O(log n) plus the quantities within rounding reach.
    """

    def __init__(self, items: Iterable[tuple[Quantity, int]]) -> None:
        ordered = sorted(items, key=lambda it: it[0].value)
        self._values = [q.value for q, _ in ordered]
        self._items = ordered
        self._max_step = max((q.step for q, _ in ordered), default=0.0)

    def __len__(self) -> int:
        return len(self._items)

    def find_match(self, q: Quantity) -> tuple[Quantity, int] | None:
        """A quantity of the context that matches ``q`` with its tag, or None."""
        if not self._items:
            return None
        reach = 0.5 * max(q.step, self._max_step) * (1 + 1e-9) + 1e-9 * abs(q.value) + 1e-12
        i = bisect_left(self._values, q.value - reach)
        n = len(self._items)
        while i < n and self._values[i] <= q.value + reach:
            if q.matches(self._items[i][0]):
                return self._items[i]
            i += 1
        return None
