r"""Answer extraction and scoring for the six math benchmarks (MAmmoTH conventions).

Pure functions, no model and no I/O; exactly two public functions:

* :func:`extract_answer` ``(dataset, completion) -> str | None``
* :func:`is_correct` ``(dataset, prediction, gold) -> bool``

``dataset`` is one of ``gsm8k``, ``math``, ``numglue``, ``svamp``, ``deepmind``, ``mmlu_math``.

Extraction follows MAmmoTH's ``answer_clean`` (Yue et al., 2023, ``math_eval/utils.py``), which
the main paper uses (Section 6, "Consistent with Yue et al. (2023)"):

* **MATH**: the text after the last "The answer is" (or "the answer is"), else the content of
  the last ``\boxed{...}`` (nested braces matched), else the last number; a trailing ``.`` or
  ``/`` dropped; then Hendrycks' normalization (``\left``/``\right``, ``tfrac``/``dfrac`` ->
  ``frac``, ``\frac12`` -> ``\frac{1}{2}``, ``\sqrt3`` -> ``\sqrt{3}``, units after
  ``\text{ ``, degrees, ``\%``, ``\$``, spaces, ``a/b`` -> ``\frac{a}{b}``, ``x = 5`` -> ``5``),
  and a ``\boxed{}`` left in the answer is opened. We also drop enclosing ``$...$`` (MAmmoTH
  keeps them, which only makes a correct answer fail its string match).
* **Other datasets**: the completion is split on the answer triggers (``####``,
  "The answer is:", "The answer is", "the answer is"); if a trigger occurs more than once (a
  model continuing with new problems) only the text before the first blank line is kept; the
  text after the last trigger is kept, and after its last ``=``. Candidates are numbers
  (``gsm8k``, ``svamp``, ``deepmind``: commas dropped, trailing zeros removed), letters A–E
  (``mmlu_math``), letters else numbers (``numglue``). The **first** candidate is taken when a
  trigger was found, otherwise the **last** candidate in the completion. No candidate: ``None``.
  Deviation: MAmmoTH upper-cases the text before looking for letters, so the word "a" counts as
  the choice (A); we look for a letter in parentheses first, then for a capital letter standing
  alone, and never upper-case.

Correctness:

* numeric datasets: the exact value of the prediction equals the gold's (``"18.00"``,
  ``"18"`` and ``"36/2"`` are equal). MAmmoTH compares the normalized strings, which gives the
  same verdict except that it counts a fraction against a decimal gold (``"1/2"`` vs ``"0.5"``)
  wrong; we count it right.
* ``mmlu_math`` (and letter answers of ``numglue``): the same letter.
* ``math``: correct when **any** of (1) the normalized strings are equal, (2) the gold is a number
  and the prediction is a number within MAmmoTH's tolerance (an integer gold: the prediction
  rounds to it; otherwise within 4 % relative error), (3) ``math_verify`` proves the two
  expressions equivalent (fractions vs decimals, reordered sums, ``\frac{\sqrt3}{2}`` vs
  ``\frac12\sqrt3``, intervals). **MAmmoTH wins when it accepts**: an answer MAmmoTH counts right
  stays right even where math-verify disagrees (e.g. 3.2 for a gold 3.14, within 4 %); math-verify
  only adds answers MAmmoTH's string rules miss. So our MATH accuracy is never below MAmmoTH's
  and exceeds it only by provable equivalences.

Examples:
    >>> extract_answer("gsm8k", "She has 3 + 4 = 7 apples.\n#### 7")
    '7'
    >>> extract_answer("math", r"So $x = \boxed{\frac{1}{2}}$.")
    '\\frac{1}{2}'
    >>> extract_answer("mmlu_math", "The answer is (C).")
    'C'
    >>> is_correct("gsm8k", "1,200.0", "1200"), is_correct("math", "0.5", r"\frac{1}{2}")
    (True, True)
"""

from __future__ import annotations

import re
import threading
from fractions import Fraction

__all__ = ["extract_answer", "is_correct"]

_DATASETS = ("gsm8k", "math", "numglue", "svamp", "deepmind", "mmlu_math")
_NUMERIC = ("gsm8k", "svamp", "deepmind", "numglue")
_TRIGGERS = ("####", "The answer is:", "The answer is", "the answer is")
_TRIGGER_RE = re.compile("|".join(re.escape(t) for t in _TRIGGERS))
_NUMBER_RE = re.compile(r"-?\d+/?\.?\d*")  # MAmmoTH's candidate pattern (e.g. "3", "-2.5", "3/4")
_MATH_NUMBER_RE = re.compile(r"-?\d*\.?\d+")
_PAREN_LETTER_RE = re.compile(r"\(([A-E])\)")
_LETTER_RE = re.compile(r"\b([A-E])\b")
_TOLERANCE = 0.04  # MAmmoTH's relative tolerance for non-integer numeric MATH answers


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


# ------------------------------------------------------------------------- other datasets


def _letters(text: str) -> list[str]:
    found = _PAREN_LETTER_RE.findall(text)
    return found if found else _LETTER_RE.findall(text)


def _numbers(text: str) -> list[str]:
    text = text.replace(",", "")
    return [_strip_zeros(n) for n in _NUMBER_RE.findall(text)]


def extract_answer(dataset: str, completion: str) -> str | None:
    r"""Extract the final answer from a model's ``completion`` (MAmmoTH's ``answer_clean``).

    Args:
        dataset: ``gsm8k``, ``math``, ``numglue``, ``svamp``, ``deepmind`` or ``mmlu_math``.
        completion: the generated text after the prompt.

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
    """
    _check_dataset(dataset)
    if not isinstance(completion, str):
        raise TypeError(f"`completion` must be a str; got {type(completion).__name__}.")
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
        cands = _letters(tail)
    elif dataset == "numglue":
        cands = _letters(tail) or _numbers(tail)
    else:
        cands = _numbers(tail)
    if not cands:
        return None
    pred = cands[0] if triggered else cands[-1]
    pred = pred.rstrip(".").rstrip("/")
    return pred or None


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


def _close(pred: float, gold: float) -> bool:
    if gold == int(gold):  # MAmmoTH: an integer gold is matched by rounding the prediction
        return round(pred) == int(gold)
    return abs(pred - gold) <= _TOLERANCE * abs(gold)


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


def is_correct(dataset: str, prediction: str | None, gold: str) -> bool:
    r"""Whether ``prediction`` (from :func:`extract_answer`) matches the ``gold`` answer.

    See the module docstring for the rules per dataset and which convention wins where MAmmoTH
    and math-verify differ (MAmmoTH when it accepts; math-verify only adds proven equivalences).

    Args:
        dataset: one of the six dataset names.
        prediction: the extracted answer, or ``None`` (never correct).
        gold: the gold answer as :func:`llm_validation.data.load_benchmark` normalizes it.

    Raises:
        ValueError: for an unknown ``dataset``.
        TypeError: when ``gold`` is not a string.

    Examples:
        >>> is_correct("math", r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}")
        True
        >>> is_correct("math", "3.2", "3.14")  # MAmmoTH's 4 % tolerance
        True
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
    if dataset == "mmlu_math" or (dataset == "numglue" and re.fullmatch(r"[A-E]", ref)):
        return pred.upper() == ref.upper()
    if dataset in _NUMERIC:
        vp, vg = _exact_value(pred), _exact_value(ref)
        if vp is not None and vg is not None:
            return vp == vg
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
