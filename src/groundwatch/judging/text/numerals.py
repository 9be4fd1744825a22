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

# Units that convert within their kind: (kind, unit) -> size in the kind's base unit, so that
# 0.5克 = 500毫克, 1.5 km = 1500 m and 90 minutes = 1.5 hours compare as the same quantity.
# Currencies never convert (rates change), nor do dates.
_FACTORS: dict[tuple[str, str], float] = {}
# Calendar units are only approximately a number of days (a month is 28-31 of them): values in
# them match within this relative slack once converted ("3 months" ~ "90 days").
_APPROXIMATE = frozenset({("duration", "month"), ("duration", "year")})
_APPROX_SLACK = 0.035


def _add_units(kind: str, unit: str, words: Iterable[str], factor: float | None = None) -> None:
    for w in words:
        _UNITS[w] = (kind, unit)
    if factor is not None:
        _FACTORS[(kind, unit)] = factor


_add_units("percent", "%", ["%", "％", "percent", "per cent", "pct", "percentage points"])
_DAY = 86_400.0
_add_units("duration", "year", ["years", "year", "yrs", "yr", "年", "年间", "周年"], 365.25 * _DAY)
_add_units("duration", "month", ["months", "month", "个月", "個月"], 365.25 / 12 * _DAY)
_add_units("duration", "week", ["weeks", "week", "周", "星期", "个星期"], 7 * _DAY)
_add_units("duration", "day", ["days", "day", "天"], _DAY)
_add_units("duration", "hour", ["hours", "hour", "hrs", "hr", "小时", "个小时", "钟头"], 3600.0)
_add_units("duration", "minute", ["minutes", "minute", "mins", "min", "分钟"], 60.0)
_add_units("duration", "second", ["seconds", "second", "secs", "sec", "秒", "秒钟"], 1.0)
_add_units("age", "year", ["years old", "year-old", "岁", "周岁"])
_add_units("money", "usd", ["dollars", "dollar", "usd", "美元", "美金"])
_add_units("money", "eur", ["euros", "euro", "eur", "欧元"])
_add_units("money", "gbp", ["pounds sterling", "gbp", "英镑"])
_add_units("money", "cny", ["yuan", "rmb", "cny", "元", "块", "人民币"])
_add_units("money", "jpy", ["yen", "jpy", "日元"])
_add_units(
    "length",
    "km",
    ["kilometres", "kilometers", "kilometre", "kilometer", "km", "公里", "千米"],
    1000.0,
)
_add_units("length", "m", ["metres", "meters", "metre", "meter", "m", "米"], 1.0)
_add_units(
    "length", "cm", ["centimetres", "centimeters", "centimetre", "centimeter", "cm", "厘米"], 0.01
)
_add_units(
    "length", "mm", ["millimetres", "millimeters", "millimetre", "millimeter", "mm", "毫米"], 0.001
)
_add_units("length", "mile", ["miles", "mile", "英里"], 1609.344)
_add_units("length", "ft", ["feet", "foot", "ft"], 0.3048)
_add_units("mass", "kg", ["kilograms", "kilogram", "kg", "kgs", "公斤", "千克"], 1000.0)
_add_units("mass", "g", ["grams", "gram", "g", "克"], 1.0)
_add_units("mass", "mg", ["milligrams", "milligram", "mg", "毫克"], 0.001)
_add_units("mass", "t", ["tonnes", "tons", "tonne", "ton", "吨"], 1e6)
_add_units("mass", "lb", ["pounds", "pound", "lbs", "lb", "磅"], 453.59237)
_add_units("multiple", "x", ["times", "倍"])
_add_units("date", "month", ["月"])
_add_units("date", "day", ["号"])
# 日 is a day of the month after 月 (6月16日) and a number of days otherwise (六十日 = 60天);
# extract_quantities decides which.
_add_units("duration", "day", ["日"])
_add_units("count", "people", ["people", "persons", "人", "名", "位"])
# Chinese measure words: a count of things, whatever the word ("12座" = "12个").
_MEASURE_WORDS = (
    "台 辆 件 次 家 所 座 条 只 头 本 张 篇 项 户 套 棵 株 部 架 艘 例 枚 场 届 支 种 批 份 层 间"
    " 门 款 颗 块 片 粒 箱 瓶 袋 包 双 对 组 队 起 轮 笔"
).split()
_add_units("count", "item", [w for w in _MEASURE_WORDS if w not in _UNITS])

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
    r"(?P<pct>百分之)?(?P<num>[零〇一二两三四五六七八九十百千万亿]+(?:点[零〇一二三四五六七八九]+[万亿]?)?)"
    r"(?P<unit>" + _UNIT_ALT + r"|个)?",
)
# Half of a unit (半年 = 6个月, 半小时 = 30分钟); 一个半小时 and the like are left alone.
_CN_HALF = re.compile(
    r"(?<![一二两三四五六七八九十])半(?:个)?(?P<unit>年|月|小时|天|日|分钟|公斤|公里)"
)
_HALF_UNITS = {
    "年": ("duration", "year"),
    "月": ("duration", "month"),
    "小时": ("duration", "hour"),
    "天": ("duration", "day"),
    "日": ("duration", "day"),
    "分钟": ("duration", "minute"),
    "公斤": ("mass", "kg"),
    "公里": ("length", "km"),
}
# Full-width digits and decimal points read as ASCII (one character for one, so offsets hold).
_FULLWIDTH = str.maketrans("０１２３４５６７８９．", "0123456789.")
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

    ``start``/``end`` are offsets of the whole mention in the text it came from. ``base`` is the
    value in its kind's base unit where the unit converts (grams, metres, seconds), else
    ``value``.
    """

    value: float
    step: float
    kind: str
    unit: str | None
    start: int
    end: int

    @property
    def factor(self) -> float | None:
        """Size of the unit in its kind's base unit, or None where it does not convert."""
        if self.unit is None:
            return None
        return _FACTORS.get((self.kind, self.unit))

    @property
    def base(self) -> float:
        """The value in the kind's base unit (the value itself where the unit does not convert)."""
        f = self.factor
        return self.value if f is None else self.value * f

    def matches(self, other: Quantity) -> bool:
        """Same quantity, allowing for rounding, other units of the same dimension, and for one
        side giving no unit."""
        if self.kind != other.kind and "count" not in (self.kind, other.kind):
            return False
        if self.unit is not None and other.unit is not None and self.unit != other.unit:
            fa, fb = self.factor, other.factor
            if fa is None or fb is None or self.kind != other.kind:
                return False
            a, b = self.value * fa, other.value * fb
            # Across units the finer precision decides: "2 hours" is not "90 minutes", though
            # "2 hours" alone could be anything from 1.5 to 2.5.
            tol = 0.5 * min(self.step * fa, other.step * fb) * (1 + 1e-9) + 1e-9 * abs(a)
            if (self.kind, self.unit) in _APPROXIMATE or (other.kind, other.unit) in _APPROXIMATE:
                tol += _APPROX_SLACK * max(abs(a), abs(b))
            return abs(a - b) <= tol
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
    """Parse a Chinese numeral (三, 十二, 五百万, 两千零五十, 三点五) into a value."""
    if "点" in text:
        if text[-1] in _CN_BIG:  # 三点五亿
            head = _cn_value(text[:-1])
            return None if head is None else head * _CN_BIG[text[-1]]
        whole, _, frac = text.partition("点")
        head = _cn_value(whole) if whole else 0.0
        if head is None or not frac or any(ch not in _CN_DIGITS for ch in frac):
            return None
        return head + float("0." + "".join(str(_CN_DIGITS[ch]) for ch in frac))
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
    kind, unit = _UNITS.get(unit_word.lower(), ("count", None))
    return (kind, None) if unit == "item" else (kind, unit)


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
    text = text.translate(_FULLWIDTH)
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
        elif unit_word == "日" and _after_month(text, num_start):
            kind, unit = "date", "day"
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
    for m in _CN_HALF.finditer(text) if "半" in text else ():
        kind, unit = _HALF_UNITS[m.group("unit")]
        out.append(Quantity(0.5, 0.1, kind, unit, m.start(), m.end()))
    for m in _CN_NUMBER.finditer(text) if _CN_HINT.search(text) else ():
        q = _cn_quantity(text, m)
        if q is not None:
            out.append(q)
    for hint in _WORD_NUMBER_HINT.finditer(text):
        wm = _WORD_NUMBER.match(text, hint.start())
        if wm is None:
            continue
        base = _WORD_NUMBERS[wm.group("num").lower()]
        scale = _SCALES.get((wm.group("scale") or "").lower(), 1.0)
        kind, unit = _kind_unit(wm.group("unit"), base * scale, wm.group("num"))
        out.append(Quantity(base * scale, scale, kind, unit, wm.start(), wm.end()))
    return out


def _after_month(text: str, start: int) -> bool:
    """Whether the number at ``start`` follows a month (6月16日: a day of the month)."""
    return start > 0 and text[start - 1] == "月"


# Chinese numerals that are words, not numbers, when no unit follows (万一 "in case", 千万
# "by all means"); a unitless numeral counts only with a scale character inside it (两万).
_CN_NOT_NUMBERS = frozenset({"万一", "千万", "一千万"})


def _cn_quantity(text: str, m: re.Match[str]) -> Quantity | None:
    """A quantity from a Chinese numeral match (三天, 两万, 二百零一枚, 百分之二十), or None."""
    num = m.group("num")
    unit_word = m.group("unit")
    if m.group("pct"):
        kind, unit = "percent", "%"
    elif unit_word is None:
        if len(num) < 2 or num[0] in "十百千万亿" or num in _CN_NOT_NUMBERS:
            return None
        if not any(ch in "百千万亿" for ch in num):
            return None
        kind, unit = "count", None
    elif num == "一" or num in ("万", "亿", "千", "百", "十"):
        return None  # 一个/一年: far more often an article than a count worth checking
    elif unit_word == "个":
        kind, unit = "count", None
    elif unit_word == "年":
        kind, unit = "duration", "year"
    elif unit_word == "日" and _after_month(text, m.start("num")):
        kind, unit = "date", "day"
    else:
        kind, unit = _kind_unit(unit_word, 0.0, num)
    parsed = _cn_value(num)
    if parsed is None:
        return None
    if unit_word == "年" and 1000 <= parsed <= 2100 and "点" not in num:
        kind, unit = "year", "year"
    step = 1.0
    if "点" in num:
        frac = num.partition("点")[2]
        scale = _CN_BIG.get(frac[-1], 1)
        step = scale * 10.0 ** -len(frac.rstrip("万亿"))
    elif parsed >= 1000 and kind != "year":
        digits = str(int(parsed))
        step = 10.0 ** min(len(digits) - len(digits.rstrip("0")), len(digits) - 1)
    return Quantity(parsed, step, kind, unit, m.start(), m.end())


_CN_HINT = re.compile("[零〇一二两三四五六七八九十百千万亿]")
_DIGIT_OR_CN = re.compile(r"[\d零〇一二两三四五六七八九十百千万亿]")


class _MaybeNumber:
    """Cheap pre-check: digits, Chinese numerals, or an English number word somewhere."""

    @staticmethod
    def search(text: str) -> bool:
        if _DIGIT_OR_CN.search(text) or "半" in text:
            return True
        return bool(_WORD_NUMBER_HINT.search(text))


_MAYBE_NUMBER = _MaybeNumber()


class QuantityIndex:
    """Quantities of a whole context, each with a tag (where it was found), searchable by value.

    Lookups cost O(log n) plus the quantities within rounding reach: once by the value as
    written, once by the value in its base unit (so 4000 mg is found for 4 g).
    """

    def __init__(self, items: Iterable[tuple[Quantity, int]]) -> None:
        ordered = sorted(items, key=lambda it: it[0].value)
        self._values = [q.value for q, _ in ordered]
        self._items = ordered
        self._max_step = max((q.step for q, _ in ordered), default=0.0)
        converting = sorted(
            ((q.base, q.step * f, (q, tag)) for q, tag in ordered if (f := q.factor) is not None),
            key=lambda it: it[0],
        )
        self._bases = [b for b, _, _ in converting]
        self._converting = [item for _, _, item in converting]
        self._max_base_step = max((st for _, st, _ in converting), default=0.0)

    def __len__(self) -> int:
        return len(self._items)

    def find_match(self, q: Quantity) -> tuple[Quantity, int] | None:
        """A quantity of the context that matches ``q`` with its tag, or None."""
        if not self._items:
            return None
        reach = 0.5 * max(q.step, self._max_step) * (1 + 1e-9) + 1e-9 * abs(q.value) + 1e-12
        hit = _scan(self._values, self._items, q, q.value, reach)
        factor = q.factor
        if hit is None and factor is not None and self._converting:
            base = q.base
            reach = (
                0.5 * max(q.step * factor, self._max_base_step) * (1 + 1e-9)
                + _APPROX_SLACK * abs(base)
                + 1e-12
            )
            hit = _scan(self._bases, self._converting, q, base, reach)
        return hit


def _scan(
    keys: list[float], items: list[tuple[Quantity, int]], q: Quantity, at: float, reach: float
) -> tuple[Quantity, int] | None:
    """The first item whose key lies within ``reach`` of ``at`` and that matches ``q``."""
    i = bisect_left(keys, at - reach)
    n = len(items)
    while i < n and keys[i] <= at + reach:
        if q.matches(items[i][0]):
            return items[i]
        i += 1
    return None
