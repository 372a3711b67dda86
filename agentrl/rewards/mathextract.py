"""Find the final answer in a model's response, and only the final answer.

    >>> extract_final_answer("so $x = 3$, and the answer is \\\\boxed{3} \\\\text{ or } \\\\boxed{-3}.")
    '3, -3'
    >>> extract_final_answer("The operating margin was 13.4% in 2023.")
    '13.4%'

The policy, in order (the first rule that finds something wins):

1. ``\\boxed{}`` (or ``\\fbox{}``): the last box. Boxes just before it that are separated from it by
   connectives (",", ";", "and", "or", ``\\quad``, ``\\text{...}``, math delimiters) and at most one other
   word (a unit or label: "\\boxed{1} papers and \\boxed{2} bins") belong to the same answer, a set:
   ``\\boxed{1}, \\boxed{2}`` is "1, 2". A box followed by more prose ("first \\boxed{3}, then corrected:
   \\boxed{4}") is superseded by the later one. An answer marker written after the last box wins over it.
2. An answer marker ("final answer is", "answer is", "Answer:"): the last one. What follows it up to the end
   of the sentence: its first ``$...$`` if it has one, else the text when it is short, else its last number.
3. Otherwise the later of the final math span (``$...$``, ``$$...$$``, ``\\(...\\)``, ``\\[...\\]``; a lone
   letter is not an answer) and the last number written in prose. A response that is one short line of
   mathematics is its own answer. In prose, a year after "in", "since", "by", ... is not the answer, and a
   line of three or more numbers with no "=" is a list of candidates, which is no answer at all.

``final_only=True`` keeps rules 1 and 2 only: a response without a box or a marker has no answer.

Before reading: the prompt is cut out (echoing the question yields no answer), anything after a chat-template
token (``<|im_start|>`` ...) is dropped, and only the tail of a huge response is read. Inline math broken
across lines (``$ \\n 9 \\n $``) is not math. Digits inside a word ("AZYUK2A") are not a number.

A gold answer (``gold_answer``) is read the same way: a gold with several boxes is a set of answers (the
boxes grouped as in rule 1), a gold that is one math span is its content, and one that is plain text is itself.
"""

from __future__ import annotations

import re

TAIL = 4000  # characters of the response that are read
MAX_ANSWER = 300

_BOX = re.compile(r"\\(?:boxed|fbox)\s*")
# "The answer is", "Answer:", GSM8K's "####" and the same in other languages ("Réponse :", "答案是", "Ответ:").
_MARKER = re.compile(
    r"####\s*|(?:final\s+answer|the\s+answer|answer|final\s+choice|correct\s+(?:option|choice)|réponse(?:\s+finale)?|"
    r"respuesta(?:\s+final)?|resposta|risposta|antwort|ответ|答案|最终答案|答|정답|答え)"
    r"\s*(?:is|est|es|ist|è|é|是|为|為|は|:|：|=|\*\*:?|:\*\*)\s*:?\s*", re.I)
_CHAT_TOKEN = re.compile(r"<\|(?:im_start|im_end|endoftext|eot_id|end_of_text|start_header_id|user|assistant)\|>")
_NUMBER = re.compile(
    r"(?<![\d:])\d{1,2}:\d{2}(?::\d{2})?(?:\s*[aApP]\.?\s?[mM]\b\.?)?(?![\d:])|"  # a time of day: 8:34 P.M.
    r"(?<![A-Za-z0-9_.])[-−]?\\?\$?\d+(?:,\d{3})*(?:,\d{1,2}(?![\d,]))?(?:\.\d+)?(?:[eE][-+]?\d+)?(?:\s*/\s*\d+)?"
    r"(?:\s*(?:\\?%|percent\b|thousand\b|million\b|billion\b|trillion\b|[kKMB]\b))?"
    r"|[-−]?\\d?frac\{[^{}]*\}\{[^{}]*\}"
)
# "after 3 days", "d'ici 12 mois", "innerhalb von 6 Monaten": a duration that qualifies the answer, not the answer
_DURATION = re.compile(
    r"(?:\b(?:in|within|after|for|over|during|per|every|each|en|dans|après|pendant|d'ici|durante|después\s+de|"
    r"por|cada|nach|innerhalb\s+von|für|pro|während|binnen)\s+)$", re.I)
_DURATION_UNIT = re.compile(
    r"\s*(?:seconds?|minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|secondes?|heures?|jours?|semaines?|"
    r"mois|ans|années?|segundos?|minutos?|horas?|días?|semanas?|meses|mes|años?|Sekunden|Minuten|Stunden|Tagen?|"
    r"Wochen|Monaten?|Jahren?)\b", re.I)
_YEAR = re.compile(r"(?:\b(?:in|since|by|of|from|until|during|year|FY|Q[1-4])\s+)$", re.I)
_SENTENCE_END = re.compile(r"\n|(?<=[.!?])\s+(?=[A-Z])")
_LIST_RESIDUE = re.compile(r"^[\s,;/|and&\-–.\[\](){}]*$", re.I)
_SPANS = re.compile(
    r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\(([^\n]+?)\\\)|(?<![\\$])\$(?!\$)([^$\n]+?)(?<!\\)\$(?![\d$])", re.S)
_BROKEN = re.compile(r"(?<![\\$])\$(?!\$)[^$]*\n[^$]*?(?<!\\)\$|\\\(.*?\\\)", re.S)
_GAP_DROP = re.compile(r"\\text\s*\{[^{}]*\}|\\(?:quad|qquad|,|;|!|:)|\\[\[\]()]|\$|\b(?:and|or)\b|[\s,;.:&]")
_LATEX_CMD = re.compile(r"\\[a-zA-Z]+")
_WORD = re.compile(r"[a-zA-Z]{3,}")
_WORDS2 = re.compile(r"(?<![A-Za-z0-9\\_^{=])[a-zA-Z]{2,}(?![A-Za-z_^}=(])")  # "AB=4", "S_{ABC}": names, not words
_ENV_OR_TEXT = re.compile(r"\\(?:begin|end)\s*\{\w+\*?\}|\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{[^{}]*\}")
_OTHER_SCRIPT = re.compile(r"[^\W\d_A-Za-z\u0370-\u03ff]")  # letters of other scripts (Greek is mathematics)
_ENV = re.compile(r"\\begin\{(\w+\*?)\}.*?\\end\{\1\}", re.S)
_MATH_WORDS = {"sin", "cos", "tan", "log", "exp", "sqrt", "inf", "and", "infty", "frac", "cot", "sec", "csc", "or",
               "pi", "ln", "lg", "dx", "dy", "dt", "oo"}


def boxes(text: str) -> list[tuple[int, int, str]]:
    """Every ``\\boxed{...}`` in order: (start, end, content); braces balanced."""
    out = []
    for m in _BOX.finditer(text):
        i = m.end()
        if i < len(text) and text[i] == "{":
            depth, j = 0, i
            while j < len(text):
                depth += text[j] == "{"
                depth -= text[j] == "}"
                if depth == 0:
                    out.append((m.start(), j + 1, text[i + 1 : j]))
                    break
                j += 1
        elif i < len(text):
            tok = re.match(r"[^\s$]+", text[i:])
            if tok:
                out.append((m.start(), i + tok.end(), tok.group(0)))
    return out


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}``, or None."""
    found = boxes(text)
    return found[-1][2] if found else None


def _box_group(text: str) -> str | None:
    found = boxes(text)
    if not found:
        return None
    group = [found[-1]]
    for prev in reversed(found[:-1]):
        if len(re.findall(r"[A-Za-z]{2,}", _GAP_DROP.sub(" ", text[prev[1] : group[0][0]]))) > 1:
            break  # prose between two boxes: the later one supersedes
        group.insert(0, prev)
    return ", ".join(b[2].strip() for b in group)


def _span_text(m: re.Match) -> str:
    return next(g for g in m.groups() if g is not None).strip()


def _after_marker(text: str) -> str | None:
    found = list(_MARKER.finditer(text))
    if not found:
        return None
    rest = text[found[-1].end() :].lstrip()
    span = _SPANS.match(rest)
    if span and _span_text(span):
        return _span_text(span)
    line = rest.split("\n", 1)[0]
    line = re.split(r"(?<![\d$])\.(?:\s|$)|\.\s+(?=[A-Z])", line + " ", maxsplit=1)[0]
    line = line.strip().strip("*_`").strip().rstrip(".").strip()
    if not line:
        return None
    first = _NUMBER.match(line)
    found = _whole_line(line) or (first and first.group(0)) or _final_span_or_number(line)  # "the volume of $ABCD$ is 120": what the sentence ends on
    if found is not None:
        return found
    return line if len(line) <= 40 and not re.search(r"\d", line) else None


def _numbers(line: str) -> list[re.Match]:
    nums = [m for m in _NUMBER.finditer(line) if not (_is_year(m) and _YEAR.search(line[: m.start()]))]
    kept = [m for m in nums if not (_DURATION.search(line[: m.start()]) and _DURATION_UNIT.match(line, m.end()))]
    return kept or nums  # "in 3 days" alone is the answer


def _is_year(m: re.Match) -> bool:
    return re.fullmatch(r"(1[5-9]|20)\d\d", m.group(0)) is not None


def _sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) for each line or sentence ("... 91. So there ..." is two)."""
    out, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        out.append((start, text[start : m.start()]))
        start = m.end()
    out.append((start, text[start:]))
    return out


def _last_number(text: str, with_pos: bool = False):
    for offset, line in reversed(_sentences(text)):
        nums = _numbers(line)
        if not nums:
            continue
        residue = _NUMBER.sub("", line)
        if len(nums) >= 3 and (_LIST_RESIDUE.match(residue) or "=" not in residue):
            return None  # several numbers and no "= result": a list of candidates is not an answer
        return (nums[-1].group(0), offset + nums[-1].start()) if with_pos else nums[-1].group(0)
    return None


def _whole_line(text: str) -> str | None:
    """A short one-line response that is itself the answer: "(x+1)^2", "1 234 567", "[0, \\infty)"."""
    from agentrl.rewards.mathnorm import parse_value

    line = text.strip().rstrip(".").strip()
    if not line or "\n" in line or len(line) > 100 or not any(c.isalnum() for c in line):
        return None
    if parse_value(line) is not None:
        return line
    lhs = line.rsplit("=", 1)[0]
    if "=" in line and not re.search(r"[A-Za-z\\]", lhs) and re.search(r"\d\s*[-+*/×]", lhs):
        line = line.rsplit("=", 1)[1].strip()  # "3 + 4 = 7": the result is what the last "=" gives
        if not line:
            return None
    bare = _ENV_OR_TEXT.sub(" ", line)  # \begin{pmatrix}, \text{Evelyn}: not prose
    words = [w for w in _WORDS2.findall(_LATEX_CMD.sub(" ", bare)) if w.lower() not in _MATH_WORDS]
    nums = _NUMBER.findall(line)
    if words or (len(nums) >= 3 and _LIST_RESIDUE.match(_NUMBER.sub("", line))):
        return None
    if re.search(r"[A-Za-z]\d|\d[A-Za-z]{4,}", line) and not _LATEX_CMD.search(line):
        return None  # "AZYUK2A", "2apples": a word with a digit in it ("3ab" is a product)
    if _OTHER_SCRIPT.search(line):
        return None  # prose in another script ("计划的比例为13/28"): read for its last number instead
    return line


def _final_span_or_number(text: str) -> str | None:
    spans = [m for m in _SPANS.finditer(text) if not re.fullmatch(r"\\?[A-Za-z]", _span_text(m))]
    prose = _SPANS.sub(lambda m: " " * len(m.group(0)), text)
    prose = _BROKEN.sub(lambda m: " " * len(m.group(0)), prose)  # inline math broken across lines
    number = _last_number(prose, with_pos=True)
    if spans and (number is None or spans[-1].start() > number[1]):
        return _span_text(spans[-1]) or None
    if number is None and re.search(r"\$|\\\(", text):
        return None  # math was written, but none that parses as a span (e.g. broken across lines)
    return number[0] if number else None


def prepare(text: str, prompt: str = "") -> str:
    text = str(text)
    prompt = str(prompt or "").strip()
    if len(text) > 4 * TAIL:
        text = text[-TAIL:]
    if len(prompt) >= 10:
        text = text.replace(prompt, "\n")
    cut = _CHAT_TOKEN.search(text)
    if cut and text[: cut.start()].strip():
        text = text[: cut.start()]
    text = re.sub(r"\\\\(?=(?:boxed|frac|dfrac|left|right|le|ge|leq|geq|sqrt|text|pi|infty|cdot)\b)", r"\\", text)
    if "\\begin" in text:  # a matrix written on several lines is one line of mathematics
        text = _ENV.sub(lambda m: re.sub(r"\s*\n\s*", " ", m.group(0)), text)
    return text[-TAIL:]


def extract_final_answer(text: str | None, prompt: str = "", final_only: bool = False) -> str | None:
    """The final answer in ``text``, or None if there is none."""
    if not text:
        return None
    text = prepare(text, prompt)
    found, marker = boxes(text), list(_MARKER.finditer(text))
    answer = None
    if found and not (marker and marker[-1].start() > found[-1][1]):
        answer = _box_group(text)
    if answer is None:  # no box, or an answer marker after the last box
        answer = _after_marker(text)
    if answer is None and not final_only:
        answer = _whole_line(text)
        if answer is None:
            answer = _final_span_or_number(text)
    if answer is None:
        return None
    answer = answer.strip()
    return answer[:MAX_ANSWER] if answer else None


def gold_answer(gold: str) -> str:
    """The answer a gold string states: all its boxes as a set, its one math span, or the text itself."""
    text = prepare(gold)
    group = _box_group(text)
    if group is not None:
        return group
    whole = _SPANS.fullmatch(text.strip().rstrip(".").strip())
    if whole:
        return _span_text(whole)
    if "$" in text or "\\(" in text or "\\[" in text or _MARKER.search(text) or "\n" in text.strip():
        return extract_final_answer(text) or text.strip()
    return text.strip()


# Multiple choice. A gold that is an option letter, alone or with the option's text ("C", "(D) Alina",
# "B. Paris", "Alina and the answer is\n(C) Cecile") makes the response's choice the answer: the letter it
# gives (or the option's text). A letter inside mathematics, or followed by a prime, is no choice.
_GOLD_CHOICE = re.compile(r"^\(?([A-J])\)?[.:]?$|^\(([A-J])\)\s*(\S.*)$|^([A-J])[.):]\s*(\S.*)$|^([A-J])\s+([A-Za-z0-9].*)$")
_LETTER = r"\(?([A-J])\)?(?![A-Za-z0-9'’_^{(=\\])(?![ \t]*[-+*/^<>=\d])"  # not "C + 1", "E'", "D = 4"
_OPENING_LETTER = re.compile(rf"^\s*[*_]*{_LETTER}")
_ANY_LETTER = re.compile(rf"(?<![A-Za-z0-9\\{{_^'’]){_LETTER}")


def gold_choice(gold: str) -> tuple[str, str | None] | None:
    """(letter, option text or None) when the gold names an option of a multiple-choice question."""
    from agentrl.rewards.mathnorm import _unwrap

    text = str(gold).strip()
    found = list(_MARKER.finditer(text))
    if found:
        text = text[found[-1].end():]
    line = next((x for x in text.splitlines() if x.strip()), "")
    line = _unwrap(line).replace("$", "").strip()
    if "=" in line or len(line) > 200:
        return None
    m = _GOLD_CHOICE.match(line)
    if not m:
        return None
    letter = next(g for g in (m.group(1), m.group(2), m.group(4), m.group(6)) if g)
    option = next((g for g in (m.group(3), m.group(5), m.group(7)) if g), None)
    return letter, option.strip().rstrip(".") if option else None


def response_choice(response: str, answer: str | None) -> str | None:
    """The option letter a response chooses: its extracted answer when that is a letter; else, in prose
    without a box, the first letter after the last answer marker, a letter the response opens with, or the
    last letter it names ("A" before a lowercase word is an article, "I" a pronoun)."""
    from agentrl.rewards.mathnorm import _unwrap

    if answer:
        m = _OPENING_LETTER.match(_unwrap(answer).replace("$", ""))
        if m:
            return m.group(1)
    text = prepare(response or "")
    if not text.strip() or boxes(text):
        return None
    prose = _SPANS.sub(lambda m: " " * len(m.group(0)), text)
    found = list(_MARKER.finditer(prose))
    if found:
        letters = _letters(prose[found[-1].end():])
        if letters:
            return letters[0]
    m = _OPENING_LETTER.match(prose)
    if m and not _article(prose, m) and m.group(1) != "I":
        return m.group(1)
    letters = _letters(prose)
    return letters[-1] if letters else None


def _article(text: str, m: re.Match) -> bool:
    return m.group(1) == "A" and re.match(r"[ \t]+[a-z]", text[m.end():]) is not None


def _letters(text: str) -> list[str]:
    return [m.group(1) for m in _ANY_LETTER.finditer(text) if not _article(text, m) and m.group(1) != "I"]
