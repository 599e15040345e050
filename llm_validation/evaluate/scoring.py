r"""Answer extraction and scoring for the six math benchmarks (MAmmoTH's rules, deviations stated).

No model and no I/O; the public functions:

* :func:`extract_answer` ``(dataset, completion, *, execute=True) -> str | None``
* :func:`extract_answers` ``(dataset, completions, *, execute=True, ...) -> list`` (programs run
  in parallel)
* :func:`is_correct` ``(dataset, prediction, gold) -> bool``
* :func:`is_program` ``(completion) -> bool`` and :func:`program_source` ``(completion) -> str``
* :func:`program_outputs` ``(completions, ...) -> list[str | None]`` (what each program printed)

``dataset`` is one of ``gsm8k``, ``math``, ``numglue``, ``svamp``, ``deepmind``, ``mmlu_math``.
The reference is MAmmoTH's ``math_eval`` (Yue et al., 2023: ``run_open.py``, ``run_choice.py``,
``utils.answer_clean``, ``utils.compare_both_string_and_number_format``), which the main paper
uses (Section 6, "Consistent with Yue et al. (2023)").

**Where we follow MAmmoTH**

* **Program of thought**: a completion containing ``print(`` is a program. It is cut at
  ``### Instruction``, run (5 s timeout) and scored on what it prints, as
  ``"The answer is " + output`` through the dataset's extraction; a program that fails or times
  out prints nothing and scores wrong. It runs in :mod:`llm_validation.execution`'s sandbox
  (MAmmoTH ``exec``\ s it in a child process with a timeout and no other limit).
  ``execute=False`` scores the program's text instead (the answer is then usually a number in
  the code: wrong).
* **MATH**: the text after the last "The answer is" (or "the answer is"), else the last
  ``\boxed{...}`` (nested braces), else the last number; a trailing ``.``/``/`` dropped;
  Hendrycks' normalization (``\left``/``\right``, ``tfrac``/``dfrac``, ``\frac12``, ``\sqrt3``,
  units after ``\text{ ``, degrees, ``\%``, ``\$``, spaces, ``a/b`` -> ``\frac{a}{b}``,
  ``x = 5`` -> ``5``); correct when the normalized strings are equal, or the gold is a number
  and the prediction rounds to an integer gold / is within 4 % of a non-integer gold.
* **Other datasets**: split on the answer triggers; several occurrences of a trigger (a model
  continuing with new problems) keep only the text before the first blank line; the text after
  the last trigger, then after its last ``=``; candidates are numbers (commas dropped,
  trailing zeros removed) or letters; the **first** candidate after a trigger, else the
  **last** candidate in the completion.

**Where we deliberately differ** (each is a test case in ``tests/llm_validation/test_scoring.py``)

1. Triggers: ``####``, "The answer is" (as MAmmoTH) **and** "The answer is:" and the lowercase
   "the answer is" (a model that writes "so the answer is 7" is not scored on its last number).
2. Multiple choice (``mmlu_math``, and letters in ``numglue``): MAmmoTH upper-cases the text and
   takes any standalone A-E, so the article "a" is the choice (A) and an option named in the
   reasoning can beat the final "Answer: B" when no trigger is present. We never upper-case:
   after a trigger the first letter; else the **last stated answer** ("answer: b", "the correct
   option is (C)", "I choose D") wins; else the last letter in parentheses (any case) or
   standing alone in capitals. A lowercase letter counts only in parentheses, as the whole
   completion, or stated (after a trigger or "answer:"...) and followed by punctuation or the
   end ("the answer is a prime" is not (A)). MAmmoTH's second
   model call that maps a non-letter answer to the closest option is not reproduced; instead
   :func:`choice_of_value` maps a completion that names no letter but states the value of
   exactly one option to that option (issue 36), and evaluation reports both scorings.
3. Numeric datasets compare **values**, not strings: ``"36/2"`` = ``"18"``, ``"1/2"`` =
   ``"0.5"`` (MAmmoTH: wrong). A gold that is not a terminating decimal (``275/3``) accepts
   its decimal rounding or truncation to 2 or more places (``91.67``, ``91.666``; not
   ``91.7``, not ``91.68``); a prediction with 12 or more significant digits (a float a program
   printed: ``33.300000000000004``) is accepted within a relative 1e-9 of the gold. MAmmoTH
   compares the strings exactly outside MATH.
4. MATH: plain ``%`` is stripped as well as ``\%``, and enclosing ``$...$`` are dropped
   (MAmmoTH keeps both, which only makes a correct answer fail the string match); and
   ``math_verify`` may **add** correct verdicts for provably equal expressions (``\frac{\sqrt3}2``
   vs ``\frac12\sqrt3``, reordered sums, intervals). An answer MAmmoTH accepts stays accepted.
5. Programs: the code of a fenced block (````` ```python ... ``` `````) is run when there is one
   (MAmmoTH runs everything before the closing fence, prose included: a syntax error); the
   code is not wrapped in a function (a ``return`` at top level is a syntax error for us); the
   prelude is ``import math`` and ``from math import *``, plus ``import numpy as np`` only when
   the code names ``np`` (MAmmoTH always imports numpy and hashlib).

**Agreement** on the table of 234 hand-adjudicated completions in the tests (all six formats,
64 of them programs; each with the verdict a careful grader gives and why): our scorer
agrees with the careful verdict on 227, MAmmoTH's rules (re-implemented in the test from
their public code) on 196; the two scorers agree with each other on 203. Our 7 misses are
completions whose answer is stated before a later number with no trigger (MAmmoTH misses them
too), a mixed number, and code without ``print(``; MAmmoTH's further misses are the
deviations above.

Examples:
    >>> extract_answer("gsm8k", "She has 3 + 4 = 7 apples.\n#### 7")
    '7'
    >>> extract_answer("gsm8k", "eggs = 16 - 3 - 4\nprint(eggs * 2)")  # run: prints 18
    '18'
    >>> extract_answer("mmlu_math", "Option (A) fails the check, so the answer: b.")
    'B'
    >>> is_correct("gsm8k", "91.67", "275/3"), is_correct("math", "0.5", r"\frac{1}{2}")
    (True, True)
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from fractions import Fraction

__all__ = [
    "extract_answer",
    "extract_answers",
    "is_correct",
    "is_program",
    "program_source",
    "program_outputs",
    "choice_of_value",
    "parse_choices",
]

_DATASETS = ("gsm8k", "math", "numglue", "svamp", "deepmind", "mmlu_math")
_NUMERIC = ("gsm8k", "svamp", "deepmind", "numglue")
_TRIGGERS = ("####", "The answer is:", "The answer is", "the answer is")
_TRIGGER_RE = re.compile("|".join(re.escape(t) for t in _TRIGGERS))
_NUMBER_RE = re.compile(r"-?\d+/?\.?\d*")  # MAmmoTH's candidate pattern (e.g. "3", "-2.5", "3/4")
_MATH_NUMBER_RE = re.compile(r"-?\d*\.?\d+")
_TOLERANCE = 0.04  # MAmmoTH's relative tolerance for non-integer numeric MATH answers
_FLOAT_DIGITS = 12  # a prediction with this many significant digits is a float's print-out
_FLOAT_RTOL = 1e-9
# A choice letter: in parentheses (any case), a capital standing alone, or a lowercase letter
# followed by punctuation or the end of a line.
_PAREN = r"\(([A-Ea-e])\)"
_CAPITAL = r"(?<![A-Za-z0-9])([A-E])(?![A-Za-z0-9])"
_LOWER = r"(?<![A-Za-z0-9])([a-e])(?=\s*(?:[.,;:!?)]|$))"
_LETTER = f"(?:{_PAREN}|{_CAPITAL}|{_LOWER})"
_LETTER_RE = re.compile(_LETTER, re.M)
_LOOSE_RE = re.compile(f"(?:{_PAREN}|{_CAPITAL})")  # no lowercase letter standing alone
_PAREN_RE = re.compile(r"\(([A-Ea-e])\)")
_ONLY_RE = re.compile(r"\s*\(?([A-Ea-e])\)?[.!]?\s*")
_STATED_RE = re.compile(
    r"(?:[Aa]nswer|[Oo]ption|[Cc]hoice|[Cc]hoose|[Ss]elect|[Pp]ick)\s*"
    r"(?:(?:is|would be|should be|must be)\s*|[:=]\s*)?(?:(?:[Oo]ption|[Cc]hoice)\s*)?:?\s*"
    + _LETTER,
    re.M,
)
# The program prelude (MAmmoTH imports math and numpy for every program; numpy only when used).
_PRELUDE = "import math\nfrom math import *\n"
_NUMPY = "import numpy as np\n"


def _check_dataset(dataset: str) -> None:
    if dataset not in _DATASETS:
        raise ValueError(f"unknown dataset {dataset!r}; choose from {', '.join(_DATASETS)}.")


# ------------------------------------------------------------------------- number helpers


def _strip_zeros(s: str) -> str:
    """Drop commas and trailing decimal zeros (``"1,200.50"`` -> ``"1200.5"``)."""
    s = s.replace(",", "").strip()
    if re.fullmatch(r"-?\d+\.\d*", s):
        s = s.rstrip("0").rstrip(".")
        if s in ("-0", "", "-"):
            s = "0"
    return s


def _exact_value(s: str) -> Fraction | None:
    """The exact rational value of ``"12"``, ``"-2.50"``, ``"3/4"``, ``".5"`` (else ``None``)."""
    s = s.replace(",", "").strip().rstrip(".")
    if not s:
        return None
    try:
        if re.fullmatch(r"-?\d+/-?\d+", s):
            num, den = s.split("/")
            return Fraction(int(num), int(den)) if int(den) != 0 else None
        if re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", s):
            return Fraction(s)
    except (ValueError, ZeroDivisionError):
        return None
    return None


# ------------------------------------------------------------------------- MATH normalization


def _last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (nested braces matched), or of ``\boxed x``."""
    pos = text.rfind("boxed")
    if pos < 0:
        return None
    rest = text[pos + len("boxed") :]
    if not rest:
        return ""
    if rest[0] != "{":
        return rest.split("$")[0].strip()
    depth, out = 0, []
    for ch in rest:
        if ch == "{":
            depth += 1
            if depth == 1:
                continue
        elif ch == "}":
            depth -= 1
            if depth == 0:
                break
        out.append(ch)
    return "".join(out)


def _fix_fracs(s: str) -> str:
    r"""``\frac12`` -> ``\frac{1}{2}``, ``\frac1{72}`` -> ``\frac{1}{72}``."""
    parts = s.split("\\frac")
    out = parts[0]
    for sub in parts[1:]:
        out += "\\frac"
        if not sub or sub[0] == "{":
            out += sub
            continue
        if len(sub) < 2:
            return s
        a, b, post = sub[0], sub[1], sub[2:]
        out += "{" + a + "}" + (b + post if b == "{" else "{" + b + "}" + post)
    return out


def _fix_sqrt(s: str) -> str:
    r"""``\sqrt3`` -> ``\sqrt{3}``."""
    parts = s.split("\\sqrt")
    out = parts[0]
    for sub in parts[1:]:
        out += "\\sqrt" + (("{" + sub[0] + "}" + sub[1:]) if sub and sub[0] != "{" else sub)
    return out


def _fix_a_slash_b(s: str) -> str:
    m = re.fullmatch(r"(-?\d+)/(\d+)", s)
    return f"\\frac{{{m.group(1)}}}{{{m.group(2)}}}" if m else s


def _normalize_math(s: str) -> str:
    """Hendrycks' ``_strip_string`` as MAmmoTH applies it (plus enclosing ``$`` removed)."""
    s = s.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = s.strip()
    if len(s) >= 2 and s[0] == "$" and s[-1] == "$":
        s = s.strip("$")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "")
    s = s.replace("\\$", "")
    if "\\text{ " in s:  # units on the right
        s = s.split("\\text{ ")[0]
    s = s.replace("\\%", "").replace("%", "")
    s = s.replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    if len(s.split("=")) == 2 and len(s.split("=")[0]) <= 2:  # "x = 5" -> "5"
        s = s.split("=")[1]
    s = _fix_sqrt(s)
    s = s.replace(" ", "")
    s = _fix_fracs(s)
    return _fix_a_slash_b(s)


def _extract_math(completion: str) -> str | None:
    if "The answer is " in completion:
        pred = completion.split("The answer is ")[-1].strip()
    elif "the answer is " in completion:
        pred = completion.split("the answer is ")[-1].strip()
    elif "boxed" in completion:
        pred = _last_boxed(completion) or ""
    else:
        nums = _MATH_NUMBER_RE.findall(completion)
        pred = nums[-1] if nums else ""
    pred = pred.rstrip(".").rstrip("/") if pred else pred
    pred = _normalize_math(pred)
    if "boxed" in pred:
        pred = _normalize_math(_last_boxed(pred) or "")
    if ".the" in pred.lower():  # "5.The next ..." after a run-on sentence
        pred = pred[: pred.lower().index(".the")].strip()
    return pred or None


# ------------------------------------------------------------------------- programs


def is_program(completion: str) -> bool:
    r"""Whether ``completion`` is program-of-thought (MAmmoTH's test: it contains ``print(``).

    Examples:
        >>> is_program("x = 3\nprint(x + 1)"), is_program("3 + 1 = 4. The answer is 4.")
        (True, False)
    """
    return isinstance(completion, str) and "print(" in completion


def program_source(completion: str) -> str:
    r"""The Python source run for a program-of-thought ``completion`` (prelude included).

    The completion is cut at ``### Instruction`` (a model going on to a new prompt, as MAmmoTH);
    when it holds a fenced code block containing ``print(``, only that block is kept.

    Examples:
        >>> print(program_source("Let's compute.\n```python\nprint(2 ** 10)\n```\nDone."))
        import math
        from math import *
        print(2 ** 10)
        <BLANKLINE>
    """
    code = completion.split("### Instruction")[0]
    blocks = re.findall(r"```[ \t]*(?:python|py|Python)?[ \t]*\n(.*?)(?:```|$)", code, re.S)
    code = next((b for b in blocks if "print(" in b), code)
    prelude = _PRELUDE + (_NUMPY if re.search(r"\bnp\.", code) else "")
    return prelude + code


def program_outputs(
    completions: Sequence[str],
    *,
    timeout_s: float = 5.0,
    workers: int | None = None,
    progress: bool = False,
) -> list[str | None]:
    """Run every program-of-thought completion in the sandbox; what each printed.

    Returns:
        Per completion: ``None`` when it is not a program; else its standard output when the
        program exited cleanly within its limits, and ``""`` when it failed, timed out or
        printed too much (MAmmoTH's executor also returns ``""`` then).
    """
    from llm_validation.execution import run_programs

    idx = [i for i, c in enumerate(completions) if is_program(c)]
    out: list[str | None] = [None] * len(completions)
    if idx:
        res = run_programs([program_source(completions[i]) for i in idx], timeout_s=timeout_s,
                           workers=workers, progress=progress)  # fmt: skip
        for i, r in zip(idx, res, strict=True):
            out[i] = r.stdout if r.ok else ""
    return out


# ------------------------------------------------------------------------- other datasets


def _letter_of(m: re.Match) -> str:
    return next(g for g in m.groups() if g).upper()


def _choice(text: str, triggered: bool, *, bare: bool = True) -> str | None:
    """The choice letter of ``text`` (see the module docstring, deviation 2)."""
    if triggered:
        m = _LETTER_RE.search(text) if bare else _PAREN_RE.search(text)
        return (_letter_of(m) if bare else m.group(1).upper()) if m else None
    only = _ONLY_RE.fullmatch(text)
    if only:  # the whole text is one letter
        return only.group(1).upper()
    stated = list(_STATED_RE.finditer(text))
    if stated:
        return _letter_of(stated[-1])
    found = list(_LOOSE_RE.finditer(text)) if bare else list(_PAREN_RE.finditer(text))
    if not found:
        return None
    return _letter_of(found[-1]) if bare else found[-1].group(1).upper()


def _numbers(text: str) -> list[str]:
    text = text.replace(",", "")
    return [_strip_zeros(n) for n in _NUMBER_RE.findall(text)]


def _extract_text(dataset: str, completion: str) -> str | None:
    if dataset == "math":
        return _extract_math(completion) if completion else None
    text = completion
    if any(text.count(t) > 1 for t in _TRIGGERS):  # the model went on to new problems
        text = text.split("\n\n")[0]
    pieces = _TRIGGER_RE.split(text)
    triggered = len(pieces) > 1
    tail = pieces[-1]
    if "=" in tail:
        tail = tail.split("=")[-1].strip()
    if dataset == "mmlu_math":
        return _choice(tail if triggered else text, triggered)
    if dataset == "numglue":
        letter = _choice(tail if triggered else text, triggered, bare=triggered)
        if letter is not None:
            return letter
    cands = _numbers(tail)
    if not cands:
        return None
    pred = cands[0] if triggered else cands[-1]
    pred = pred.rstrip(".").rstrip("/")
    return pred or None


def extract_answer(
    dataset: str, completion: str, *, execute: bool = True, program_output: str | None = None
) -> str | None:
    r"""Extract the final answer from a model's ``completion``.

    Args:
        dataset: ``gsm8k``, ``math``, ``numglue``, ``svamp``, ``deepmind`` or ``mmlu_math``.
        completion: the generated text after the prompt.
        execute: run a program-of-thought completion in the sandbox and score what it prints
            (MAmmoTH); ``False`` scores its text.
        program_output: what the program printed, when already run (see
            :func:`program_outputs`); ignored for a completion that is not a program.

    Returns:
        The answer string (a normalized number, a letter A–E, or a normalized LaTeX expression
        for MATH), or ``None`` when the completion holds no candidate.

    Raises:
        ValueError: for an unknown ``dataset``.
        TypeError: when ``completion`` is not a string.

    Examples:
        >>> extract_answer("svamp", "There are 5 boxes with 3 each, so 15 in all.")
        '15'
        >>> extract_answer("gsm8k", "The answer is 1,250 dollars. Then 30 more.")
        '1250'
        >>> extract_answer("math", r"Thus $\boxed{\dfrac{\sqrt{3}}{2}}$") == r"\frac{\sqrt{3}}{2}"
        True
        >>> extract_answer("numglue", "I am not sure.") is None
        True
        >>> extract_answer("gsm8k", "x = 5\nprint(x * 3)", execute=False)  # the text: last number
        '3'
    """
    _check_dataset(dataset)
    if not isinstance(completion, str):
        raise TypeError(f"`completion` must be a str; got {type(completion).__name__}.")
    if execute and is_program(completion):
        if program_output is None:
            program_output = program_outputs([completion])[0]
        return _extract_text(dataset, "The answer is " + program_output.strip("\n"))
    return _extract_text(dataset, completion)


_CHOICES_RE = re.compile(r"\(([A-E])\)\s*(.*?)\s*(?=\([A-E]\)|$)")


def parse_choices(question: str) -> dict[str, str]:
    r"""The options of a multiple-choice question as shown: ``{letter: text}`` (``{}``: none).

    Examples:
        >>> parse_choices("What is 2 + 3?\nAnswer Choices: (A) 4 (B) 5 (C) 6 (D) 1/2")
        {'A': '4', 'B': '5', 'C': '6', 'D': '1/2'}
    """
    _, sep, tail = question.rpartition("Answer Choices:")
    return dict(_CHOICES_RE.findall(tail.strip())) if sep else {}


def choice_of_value(completion: str, choices: dict[str, str]) -> str | None:
    """The choice letter of a multiple-choice ``completion``, mapping a stated value to its option.

    A completion whose letter :func:`extract_answer` finds keeps that letter. Otherwise its
    stated number (the first after an answer trigger, else the last, as for the numeric
    datasets) is compared by exact value with every option: when exactly one option has that
    value, its letter is the answer (MAmmoTH maps non-letter answers to an option too, with a
    second model call); else ``None``.

    Args:
        completion: the generated text.
        choices: ``{letter: option text}`` (:func:`parse_choices`).

    Examples:
        >>> opts = {"A": "12", "B": "15", "C": "18", "D": "21"}
        >>> choice_of_value("5 * 3 = 15. The answer is 15.", opts)
        'B'
        >>> choice_of_value("The answer is (C).", opts), choice_of_value("It is 16.", opts)
        ('C', None)
    """
    if not isinstance(completion, str):
        raise TypeError(f"`completion` must be a str; got {type(completion).__name__}.")
    letter = _extract_text("mmlu_math", completion)
    if letter is not None:
        return letter
    stated = _extract_text("svamp", completion)
    value = _exact_value(stated) if stated is not None else None
    if value is None:
        return None
    hits = [k for k, v in choices.items() if _exact_value(v) == value]
    return hits[0] if len(hits) == 1 else None


def extract_answers(
    dataset: str,
    completions: Sequence[str],
    *,
    execute: bool = True,
    timeout_s: float = 5.0,
    workers: int | None = None,
) -> list[str | None]:
    """:func:`extract_answer` for many completions; their programs run in parallel."""
    _check_dataset(dataset)
    outs = program_outputs(completions, timeout_s=timeout_s, workers=workers) if execute else None
    return [
        extract_answer(dataset, c, execute=execute, program_output=outs[i] if outs else None)
        for i, c in enumerate(completions)
    ]


# ------------------------------------------------------------------------- correctness


def _mammoth_number(s: str) -> float | None:
    r"""MAmmoTH's ``number_it``: a float from ``"3"``, ``"1,000"``, ``"\frac{1}{2}"``."""
    s = s.strip()
    m = re.fullmatch(r"(-?)\\frac\{([^{}]+)\}\{([^{}]+)\}", s)
    if m:
        num, den = _exact_value(m.group(2)), _exact_value(m.group(3))
        if num is None or den is None or den == 0:
            return None
        return float((-1 if m.group(1) else 1) * num / den)
    v = _exact_value(s)
    return float(v) if v is not None else None


def _math_verify(pred: str, gold: str) -> bool:
    """``math_verify`` equivalence of two LaTeX answers (timeouts only in the main thread)."""
    from math_verify import parse, verify

    main = threading.current_thread() is threading.main_thread()
    timeout = 5 if main else None  # math-verify's timeouts use SIGALRM (main thread only)

    def wrap(s: str) -> str:
        s = s.strip()
        return s if s.startswith("$") or "\\boxed" in s else f"${s}$"

    try:
        g = parse(wrap(gold), parsing_timeout=timeout)
        p = parse(wrap(pred), parsing_timeout=timeout)
        if not g or not p:
            return False
        return bool(verify(g, p, timeout_seconds=timeout))
    except Exception:  # noqa: BLE001 - a parse failure means "not proven equivalent"
        return False


def _close(pred: float, gold: float) -> bool:
    if gold == int(gold):  # MAmmoTH: an integer gold is matched by rounding the prediction
        return round(pred) == int(gold)
    return abs(pred - gold) <= _TOLERANCE * abs(gold)


def _terminates(x: Fraction) -> bool:
    d = x.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1


def _decimal_match(pred: str, vp: Fraction, vg: Fraction) -> bool:
    """Deviation 3: a non-terminating gold and its rounding/truncation, or float round-off."""
    m = re.fullmatch(r"-?(\d*)\.(\d+)", pred.replace(",", "").strip())
    if m is None:
        return False
    digits = len((m.group(1) + m.group(2)).lstrip("0"))
    if digits >= _FLOAT_DIGITS and abs(vp - vg) <= _FLOAT_RTOL * max(1, abs(vg)):
        return True
    k = len(m.group(2))
    if _terminates(vg) or k < 2:
        return False
    scale = 10**k
    trunc = Fraction(int(vg * scale), scale)  # toward zero
    away = abs(vg) * scale + Fraction(1, 2)
    rounded = Fraction((1 if vg >= 0 else -1) * int(away), scale)  # half away from zero
    return vp in (trunc, rounded)


def is_correct(dataset: str, prediction: str | None, gold: str) -> bool:
    r"""Whether ``prediction`` (from :func:`extract_answer`) matches the ``gold`` answer.

    See the module docstring for the rules per dataset and the deviations from MAmmoTH.

    Args:
        dataset: one of the six dataset names.
        prediction: the extracted answer, or ``None`` (never correct).
        gold: the gold answer as :func:`llm_validation.data.records.load_benchmark` normalizes it.

    Raises:
        ValueError: for an unknown ``dataset``.
        TypeError: when ``gold`` is not a string.

    Examples:
        >>> is_correct("math", r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}")
        True
        >>> is_correct("math", "3.2", "3.14")  # MAmmoTH's 4 % tolerance
        True
        >>> is_correct("deepmind", "91.67", "275/3"), is_correct("deepmind", "91.7", "275/3")
        (True, False)
        >>> is_correct("gsm8k", None, "7")
        False
    """
    _check_dataset(dataset)
    if not isinstance(gold, str):
        raise TypeError(f"`gold` must be a str; got {type(gold).__name__} {gold!r}.")
    if prediction is None:
        return False
    if not isinstance(prediction, str):
        raise TypeError(f"`prediction` must be a str or None; got {type(prediction).__name__}.")
    pred, ref = prediction.strip(), gold.strip()
    if not pred:
        return False
    if dataset == "mmlu_math" or (dataset == "numglue" and re.fullmatch(r"[A-Ea-e]", ref)):
        return pred.upper() == ref.upper()
    if dataset in _NUMERIC:
        vp, vg = _exact_value(pred), _exact_value(ref)
        if vp is not None and vg is not None:
            return vp == vg or _decimal_match(pred, vp, vg)
        return _strip_zeros(pred) == _strip_zeros(ref)
    # MATH
    np_, ng = _normalize_math(pred), _normalize_math(ref)
    if np_ == ng:
        return True
    g_num = _mammoth_number(ng)
    if g_num is not None:
        p_num = _mammoth_number(np_)
        if p_num is not None and _close(p_num, g_num):
            return True
    return _math_verify(np_, ng)
