r"""A procedurally generated, MathInstruct-like corpus and held-out benchmarks (exact answers).

MathInstruct (Yue et al., 2023) pools 13 heterogeneous, imbalanced sources with different
solution styles. This module builds a self-contained analog, deterministic from a seed, from a
few thousand to a few million examples, so the paper's central prediction can be tested without
downloads:

* 13 sources (:data:`SOURCES`) with imbalanced weights: multi-digit arithmetic, multi-step word
  problems from templates, linear equations, fractions, percentages, modular arithmetic, unit
  conversion, sequences, counting, rates, GCD/LCM, program-of-thought answers and multiple
  choice;
* four solution styles: chain of thought ending "The answer is X." (``cot``), GSM8K's
  ``<<a*b=c>>`` calculator annotations ending ``#### X`` (``gsm``), MATH's ``\boxed{X}``
  (``boxed``) and Python programs that print the answer (``code``);
* difficulty levels 1-4 inside every source (more digits, more steps, larger coefficients);
* every answer computed exactly (``fractions.Fraction``); an optional ``noise_rate`` replaces
  the final answer of a fraction of examples by a wrong one (flagged ``corrupted``), a source of
  *irreducible* loss to tell "learned late" apart from "noisy".

Held-out test sets (:func:`generate_benchmarks`) come in the six formats the evaluator reads
(``gsm8k``, ``math``, ``numglue``, ``svamp``, ``deepmind``, ``mmlu_math``). Issue 36: every
format has an in-distribution half (``split: "id"``: training templates with fresh numbers) and
a transfer half (``split: "ood"``): held-out phrasings of the training skills, SVAMP's new
templates with distractor numbers, DeepMind-Mathematics phrasings ("Evaluate -12 - -7 + 5."),
and four-choice questions of types the training multiple-choice source lacks. Multiple-choice
options are shuffled (training and benchmark), so the gold letters are balanced. The three
rarest sources draw two levels up (:attr:`Source.extra_levels`: more steps), so some sources
are learned late for a reason, as in MathInstruct; the number spaces are wide enough that no
source is used up at 36,000 pre-training problems of levels 1-2 (each source within ~10 % of
its share).

**Decontamination by construction.** No benchmark or held-out problem is a near-duplicate of a
training or pre-training problem: a candidate whose numbers (the *multiset* of digit runs of
its text, order-insensitive: a swapped pair is a duplicate) equal those of any training or
pre-training problem is drawn again, and no two items of one benchmark share that key (no
repeated problem). This excludes a name or item swap ("Ann has 3 boxes with 4 pencils" / "Ben
has 4 boxes with 3 apples"), the same template with the same numbers in any order, and the
same numbers under another phrasing. :func:`contamination` measures it after the fact (0
near-duplicates) and reports the *template* overlap separately, for every format and for each
half (``gsm8k/id``, ``gsm8k/ood``...): the ``id`` halves and the held-out split reuse the
training templates (by design); the ``ood`` halves do not.

Examples:
    >>> recs = generate_corpus(200, seed=0)
    >>> len(recs), len({r["source"] for r in recs}) >= 12
    (200, True)
    >>> generate_corpus(5, seed=1) == generate_corpus(5, seed=1)
    True
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import re
from collections.abc import Callable, Collection, Sequence
from fractions import Fraction
from pathlib import Path

__all__ = [
    "SOURCES",
    "Source",
    "generate_corpus",
    "generate_benchmarks",
    "write_corpus",
    "fmt_number",
    "number_key",
    "template_key",
    "contamination",
]

_NAMES = [
    "Ann",
    "Ben",
    "Carla",
    "Dev",
    "Elif",
    "Femi",
    "Gus",
    "Hana",
    "Ivo",
    "Jia",
    "Kofi",
    "Lena",
    "Mateo",
    "Nia",
    "Omar",
    "Priya",
]
_ITEMS = [
    "pencil",
    "apple",
    "book",
    "ticket",
    "marble",
    "sticker",
    "cookie",
    "card",
    "shell",
    "stamp",
]


def number_key(text: str) -> tuple[str, ...]:
    """The multiset of digit runs of ``text``, sorted: problems with one key are near-duplicates.

    Order-insensitive (issue 36): a problem with two of its numbers swapped ("gcd(b, a)" of a
    training "gcd(a, b)", or a GSM problem whose factors trade places) has the key of the
    original. Signs, decimal points and fraction bars are ignored, so the key is coarser than
    the numbers themselves (a conservative exclusion); the template is not part of the key, so
    the same numbers under another phrasing of any task are excluded too.

    Examples:
        >>> number_key("Ann has 3 boxes with 12 pencils in each box.")
        ('12', '3')
        >>> number_key("gcd(12, 18)") == number_key("gcd(18, 12)")
        True
        >>> number_key("Evaluate -4 - 2.5.") == number_key("Calculate 5 - 2 + 4.")
        True
    """
    return tuple(sorted(re.findall(r"\d+", text)))


def _near_keys(text: str) -> set[tuple[str, ...]]:
    """Keys of a question and, for multiple choice, of its stem without the choices."""
    return {number_key(text), number_key(text.split("\nAnswer Choices")[0])}


_NAME_RE = re.compile(r"\b(?:" + "|".join(_NAMES) + r")\b")
_ITEM_RE = re.compile(r"\b(?:" + "|".join(_ITEMS) + r")s?\b")
_NUM_RE = re.compile(r"-?\d+(?:\.\d+)?")


def template_key(text: str) -> str:
    """``text`` with its numbers, names and items abstracted (the generator's template).

    Examples:
        >>> template_key("Ann has 3 boxes with 12 pencils in each box.")
        '<name> has # boxes with # <item> in each box.'
    """
    return _NUM_RE.sub("#", _ITEM_RE.sub("<item>", _NAME_RE.sub("<name>", text)))


def fmt_number(x: Fraction | int | float) -> str:
    """An exact number as text: integers plainly, terminating decimals exactly, else ``a/b``.

    Examples:
        >>> fmt_number(Fraction(7, 2)), fmt_number(Fraction(1, 3)), fmt_number(12)
        ('3.5', '1/3', '12')
    """
    f = Fraction(x)
    if f.denominator == 1:
        return str(f.numerator)
    d = f.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:
        s = f"{float(f):.10f}".rstrip("0").rstrip(".")
        if Fraction(s) == f:
            return s
    return f"{f.numerator}/{f.denominator}"


def _latex(x: Fraction) -> str:
    f = Fraction(x)
    if f.denominator == 1:
        return str(f.numerator)
    sign = "-" if f < 0 else ""
    return f"{sign}\\frac{{{abs(f.numerator)}}}{{{f.denominator}}}"


@dataclasses.dataclass(frozen=True)
class Problem:
    """A generated problem: question, solution steps, exact answer (and its display form)."""

    question: str
    steps: list[str]
    answer: Fraction | str
    shown: str


def _cot(p: Problem) -> str:
    return "\n".join([*p.steps, f"The answer is {p.shown}."])


def _gsm(p: Problem) -> str:
    return "\n".join([*p.steps, f"#### {p.shown}"])


def _boxed(p: Problem) -> str:
    return "\n".join([*p.steps, f"Therefore, the answer is $\\boxed{{{p.shown}}}$."])


# ----------------------------------------------------------------------------- generators
# Each takes (rng, level in 1..4) and returns a Problem. Steps use the source's conventions.


def _digits(rng: random.Random, n: int) -> int:
    return rng.randint(10 ** (n - 1) if n > 1 else 1, 10**n - 1)


def gen_arith(rng, level):
    n_ops = 1 + (level + 1) // 2
    nums = [_digits(rng, min(level + 1, 4)) for _ in range(n_ops + 1)]
    ops = [rng.choice("+-") for _ in range(n_ops)]
    if level >= 3:
        ops[-1] = "*"
        nums[-1] = rng.randint(2, 12)
    expr = str(nums[0])
    total = Fraction(nums[0])
    steps = []
    for op, x in zip(ops, nums[1:], strict=True):
        new = total + x if op == "+" else total - x if op == "-" else total * x
        steps.append(f"{fmt_number(total)} {op} {x} = {fmt_number(new)}")
        expr += f" {op} {x}"
        total = new
    if "*" in ops:  # evaluate left to right with explicit parentheses
        expr = "(" + expr.rsplit(" * ", 1)[0] + ") * " + str(nums[-1])
    return Problem(
        f"Calculate {expr}.", ["Work from left to right."] + steps, total, fmt_number(total)
    )


def gen_gsm(rng, level):
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(3, 60), rng.randint(2, 19)
    total = a * b
    c, d, k = rng.randint(1, max(1, min(40, total - 4))), rng.randint(2, 20), rng.choice([2, 3, 4])
    q = f"{name} has {a} boxes with {b} {item}s in each box."
    steps = [f"{name} starts with {a}*{b} = <<{a}*{b}={total}>>{total} {item}s."]
    if level >= 2:
        if level == 4:  # give away enough that the rest splits evenly
            c += (total + (d * b if level >= 3 else 0) - c) % k
        q += f" {name} gives away {c} {item}s."
        steps.append(
            f"After giving away {c}: {total}-{c} = <<{total}-{c}={total - c}>>{total - c}."
        )
        total -= c
    if level >= 3:
        q += f" Then {name} buys {d} more boxes of {b}."
        new = total + d * b
        steps.append(
            f"The new boxes hold {d}*{b} = <<{d}*{b}={d * b}>>{d * b}, so "
            f"{total}+{d * b} = <<{total}+{d * b}={new}>>{new}."
        )
        total = new
    if level == 4:
        share = total // k
        q += f" {name} shares all of them equally among {k} friends."
        steps.append(f"Each friend gets {total}/{k} = <<{total}/{k}={share}>>{share}.")
        return Problem(q + " How many does each friend get?", steps, Fraction(share), str(share))
    return Problem(
        q + f" How many {item}s does {name} have now?", steps, Fraction(total), str(total)
    )


def gen_linear(rng, level):
    x = rng.randint(-40, 40) if level >= 2 else rng.randint(1, 40)
    a = rng.randint(2, 9 + 6 * level)
    b = rng.randint(-99, 99) if level >= 2 else rng.randint(1, 99)
    if level >= 4:  # fractional solution
        den = rng.randint(2, 9)
        num = rng.randint(1, 20)
        sol = Fraction(num, den)
        a = den * rng.randint(1, 3)
        c = a * sol + b
        q = f"Solve for $x$: ${a}x + {b} = {fmt_number(c)}$."  # a = den*k: c is an integer
        steps = [
            f"Subtract {b} from both sides: ${a}x = {fmt_number(c - b)}$.",
            f"Divide by {a}: $x = {_latex(sol)}$.",
        ]
        return Problem(q, steps, sol, _latex(sol))
    if level == 3:
        c = rng.randint(1, a - 1)
        d = (a - c) * x + b
        q = f"Solve for $x$: ${a}x + {b} = {c}x + {d}$."
        steps = [
            f"Subtract ${c}x$ from both sides: ${a - c}x + {b} = {d}$.",
            f"Then ${a - c}x = {d - b}$, so $x = {x}$.",
        ]
        return Problem(q, steps, Fraction(x), str(x))
    c = a * x + b
    q = f"Solve for $x$: ${a}x + {b} = {c}$."
    steps = [f"Subtract {b} from both sides: ${a}x = {c - b}$.", f"Divide by {a}: $x = {x}$."]
    return Problem(q, steps, Fraction(x), str(x))


def gen_fractions(rng, level):
    dmax = 9 + 9 * level
    p, q = (
        Fraction(rng.randint(1, dmax), rng.randint(2, dmax)),
        Fraction(rng.randint(1, dmax), rng.randint(2, dmax)),
    )
    op = rng.choice("+-" if level <= 2 else "+-*")
    res = p + q if op == "+" else p - q if op == "-" else p * q
    sym = {"+": "+", "-": "-", "*": "\\times"}[op]
    question = f"Compute ${_latex(p)} {sym} {_latex(q)}$ and simplify."
    if op == "*":
        steps = [
            f"Multiply numerators and denominators: $\\frac{{{p.numerator * q.numerator}}}"
            f"{{{p.denominator * q.denominator}}}$."
        ]
    else:
        den = p.denominator * q.denominator
        a, b = p.numerator * q.denominator, q.numerator * p.denominator
        steps = [
            f"Use the common denominator {den}: $\\frac{{{a}}}{{{den}}} {op} "
            f"\\frac{{{b}}}{{{den}}} = \\frac{{{a + b if op == '+' else a - b}}}{{{den}}}$."
        ]
    steps.append(f"In lowest terms this is ${_latex(res)}$.")
    return Problem(question, steps, res, _latex(res))


_PERCENTS = [1, 2, 4, 5, 6, 8, 10, 12, 15, 16, 20, 24, 25, 30, 35, 40, 45, 50, 60, 75, 80]


def gen_percent(rng, level):
    pct = rng.choice(_PERCENTS)
    n = rng.randint(2, 400) * 5
    part = Fraction(pct * n, 100)
    if level == 1:
        return Problem(
            f"What is {pct}% of {n}?",
            [f"{pct}% of {n} is {pct}/100 * {n} = {fmt_number(part)}."],
            part,
            fmt_number(part),
        )
    if level == 2:
        new = n + part
        return Problem(
            f"A price of ${n} is increased by {pct}%. What is the new price in dollars?",
            [
                f"The increase is {pct}% of {n} = {fmt_number(part)}.",
                f"The new price is {n} + {fmt_number(part)} = {fmt_number(new)}.",
            ],
            new,
            fmt_number(new),
        )
    if level == 3:
        new = n - part
        return Problem(
            f"A jacket costs ${n} and is discounted by {pct}%. What is the sale price?",
            [
                f"The discount is {pct}% of {n} = {fmt_number(part)}.",
                f"The sale price is {n} - {fmt_number(part)} = {fmt_number(new)}.",
            ],
            new,
            fmt_number(new),
        )
    a = rng.randint(2, 20) * 10
    b = a + rng.choice([-1, 1]) * a * rng.choice([10, 20, 25, 50]) // 100
    change = Fraction(b - a, a) * 100
    return Problem(
        f"A value changes from {a} to {b}. By what percent did it change? (Use a "
        "negative number for a decrease.)",
        [
            f"The change is {b} - {a} = {b - a}.",
            f"As a percent of {a}: {b - a}/{a} * 100 = {fmt_number(change)}.",
        ],
        change,
        fmt_number(change),
    )


def gen_modular(rng, level):
    n, m = _digits(rng, level + 2), rng.randint(3, 9 + 6 * level)
    q, r = divmod(n, m)
    return Problem(
        f"What is the remainder when {n} is divided by {m}?",
        [f"{n} = {m} * {q} + {r}.", f"The remainder is {r}."],
        Fraction(r),
        str(r),
    )


_UNITS = [
    ("kilometers", "meters", 1000),
    ("meters", "centimeters", 100),
    ("hours", "minutes", 60),
    ("minutes", "seconds", 60),
    ("kilograms", "grams", 1000),
    ("liters", "milliliters", 1000),
    ("feet", "inches", 12),
    ("days", "hours", 24),
    ("weeks", "days", 7),
    ("yards", "feet", 3),
    ("dollars", "cents", 100),
    ("tons", "kilograms", 1000),
]


def gen_units(rng, level):
    big, small, f = rng.choice(_UNITS)
    if level == 1:
        x = rng.randint(2, 300)
        v = x * f
        return Problem(
            f"How many {small} are in {x} {big}?",
            [f"1 {big[:-1]} = {f} {small}.", f"{x} * {f} = {v}."],
            Fraction(v),
            str(v),
        )
    if level == 2:
        v = rng.randint(2, 900) * f
        x = Fraction(v, f)
        return Problem(
            f"Convert {v} {small} to {big}.",
            [f"Divide by {f}: {v}/{f} = {fmt_number(x)}."],
            x,
            fmt_number(x),
        )
    x, y = rng.randint(1, 9), rng.randint(1, f - 1)
    v = x * f + y
    if level == 3:
        return Problem(
            f"How many {small} are in {x} {big} and {y} {small}?",
            [f"{x} {big} = {x * f} {small}.", f"{x * f} + {y} = {v}."],
            Fraction(v),
            str(v),
        )
    k = rng.randint(2, 5)
    return Problem(
        f"Each of {k} trips takes {x} {big} and {y} {small}. How many {small} in total?",
        [f"One trip is {x}*{f} + {y} = {v} {small}.", f"{k} trips: {k}*{v} = {k * v}."],
        Fraction(k * v),
        str(k * v),
    )


def gen_sequence(rng, level):
    a, d = rng.randint(-50, 99), rng.randint(2, 19)
    if level == 1:
        seq = [a + i * d for i in range(4)]
        nxt = a + 4 * d
        return Problem(
            f"What is the next term of the sequence {', '.join(map(str, seq))}?",
            [f"The difference is {d}.", f"{seq[-1]} + {d} = {nxt}."],
            Fraction(nxt),
            str(nxt),
        )
    if level == 2:
        n = rng.randint(8, 99)
        v = a + (n - 1) * d
        return Problem(
            f"The first term of an arithmetic sequence is {a} and the common difference "
            f"is {d}. What is term number {n}?",
            [f"Term n is a + (n-1)d = {a} + {n - 1}*{d} = {v}."],
            Fraction(v),
            str(v),
        )
    if level == 3:
        g, r = rng.randint(1, 300), rng.randint(2, 5)
        seq = [g * r**i for i in range(4)]
        nxt = g * r**4
        return Problem(
            f"What is the next term of the geometric sequence {', '.join(map(str, seq))}?",
            [f"The ratio is {r}.", f"{seq[-1]} * {r} = {nxt}."],
            Fraction(nxt),
            str(nxt),
        )
    n = rng.randint(5, 30)
    s = n * (2 * a + (n - 1) * d) // 2
    return Problem(
        f"Find the sum of the first {n} terms of the arithmetic sequence with first term "
        f"{a} and common difference {d}.",
        [f"S = n(2a + (n-1)d)/2 = {n}*(2*{a} + {n - 1}*{d})/2 = {s}."],
        Fraction(s),
        str(s),
    )


def gen_counting(rng, level):
    k = rng.randint(2, 19)
    if level <= 2:
        n = rng.randint(20, 500 * level)
        v = n // k
        return Problem(
            f"How many multiples of {k} are there from 1 to {n}?",
            [f"The multiples are {k}, {2 * k}, ..., {v * k}.", f"{n} // {k} = {v}."],
            Fraction(v),
            str(v),
        )
    if level == 3:
        lo, hi = rng.randint(10, 60), rng.randint(100, 300)
        v = hi // k - (lo - 1) // k
        return Problem(
            f"How many multiples of {k} are between {lo} and {hi}, inclusive?",
            [
                f"Up to {hi}: {hi // k}. Below {lo}: {(lo - 1) // k}.",
                f"{hi // k} - {(lo - 1) // k} = {v}.",
            ],
            Fraction(v),
            str(v),
        )
    m = rng.choice([x for x in range(2, 20) if x != k])
    n = rng.randint(50, 300)
    import math

    lcm = k * m // math.gcd(k, m)
    v = n // k + n // m - n // lcm
    return Problem(
        f"How many integers from 1 to {n} are multiples of {k} or of {m}?",
        [
            f"Multiples of {k}: {n // k}. Of {m}: {n // m}. Of both ({lcm}): {n // lcm}.",
            f"{n // k} + {n // m} - {n // lcm} = {v}.",
        ],
        Fraction(v),
        str(v),
    )


def gen_rate(rng, level):
    speed, t = rng.randint(20, 250), rng.randint(1, 12 + level)
    if level == 2:
        dist = speed * t
        return Problem(
            f"A runner covers {speed} meters per minute for {t} minutes. How many meters is that?",
            [f"Distance = speed * time = {speed} * {t} = {dist}."],
            Fraction(dist),
            str(dist),
        )
    if level == 1:
        dist = speed * t
        return Problem(
            f"A car travels at {speed} km per hour for {t} hours. How far does it go in km?",
            [f"Distance = speed * time = {speed} * {t} = {dist}."],
            Fraction(dist),
            str(dist),
        )
    dist = speed * t
    if level == 3:
        return Problem(
            f"A cyclist covers {dist} km in {t} hours. What is the average speed in km per hour?",
            [f"Speed = distance / time = {dist} / {t} = {speed}."],
            Fraction(speed),
            str(speed),
        )
    s2 = speed + rng.randint(1, 4) * 5
    t2 = rng.randint(1, 5)
    tot = Fraction(dist + s2 * t2, t + t2)
    return Problem(
        f"A bus drives {t} hours at {speed} km/h and then {t2} hours at {s2} km/h. What "
        "is its average speed in km/h?",
        [
            f"Total distance: {dist} + {s2 * t2} = {dist + s2 * t2} km over {t + t2} hours.",
            f"Average: {dist + s2 * t2}/{t + t2} = {fmt_number(tot)}.",
        ],
        tot,
        fmt_number(tot),
    )


def gen_gcd(rng, level):
    import math

    g = rng.randint(2, 12 * level)
    a, b = g * rng.randint(2, 20 * level), g * rng.randint(2, 20 * level)
    if level <= 2:
        v = math.gcd(a, b)
        return Problem(
            f"Find the greatest common divisor of {a} and {b}.",
            [f"By the Euclidean algorithm, $\\gcd({a}, {b}) = {v}$."],
            Fraction(v),
            str(v),
        )
    v = a * b // math.gcd(a, b)
    return Problem(
        f"Find the least common multiple of {a} and {b}.",
        [
            f"$\\gcd({a}, {b}) = {math.gcd(a, b)}$.",
            f"$\\operatorname{{lcm}} = {a} \\cdot {b} / {math.gcd(a, b)} = {v}$.",
        ],
        Fraction(v),
        str(v),
    )


def gen_pot(rng, level):
    name, i1, i2 = rng.choice(_NAMES), *rng.sample(_ITEMS, 2)
    a, p, b, q = rng.randint(2, 15), rng.randint(1, 20), rng.randint(2, 15), rng.randint(1, 20)
    text = f"{name} buys {a} {i1}s at {p} dollars each"
    code = [f"count_{i1} = {a}", f"price_{i1} = {p}"]
    expr = f"count_{i1} * price_{i1}"
    value = Fraction(a * p)
    if level >= 2:
        text += f" and {b} {i2}s at {q} dollars each"
        code += [f"count_{i2} = {b}", f"price_{i2} = {q}"]
        expr += f" + count_{i2} * price_{i2}"
        value += b * q
    code.append(f"total = {expr}")
    if level >= 3:
        pct = rng.choice([10, 20, 25, 50])
        text += f", with a {pct}% discount on the total"
        code += [f"discount = {pct} / 100", "total = total * (1 - discount)"]
        value = value * (1 - Fraction(pct, 100))
    if level == 4:
        k = rng.choice([2, 4, 5])
        text += f", and splits the cost equally with {k - 1} friends"
        code += [f"people = {k}", "total = total / people"]
        value = value / k
    question = text + f". How much does {name} pay in dollars? Let's write a program."
    code.append("print(total)")
    return Problem(question, code, value, fmt_number(value))


def gen_mcq(rng, level):
    base = rng.choice([gen_rate, gen_units, gen_percent])(rng, min(level, 3))
    ans = base.answer
    opts = {ans}
    while len(opts) < 5:
        delta = rng.choice([-3, -2, -1, 1, 2, 3]) * max(1, abs(int(ans)) // 10 or 1)
        opts.add(ans + delta)
    opts = sorted(opts)
    rng.shuffle(opts)  # issue 36: the gold letter uniform over A-E, not the sorted position
    letter = "ABCDE"[opts.index(ans)]
    choices = " ".join(f"({L}) {fmt_number(o)}" for L, o in zip("ABCDE", opts, strict=True))
    return Problem(
        f"{base.question}\nAnswer Choices: {choices}",
        [*base.steps, f"This matches choice ({letter})."],
        letter,
        f"({letter})",
    )


@dataclasses.dataclass(frozen=True)
class Source:
    """One corpus source: name (MathInstruct-like path), weight, style, generator.

    ``extra_levels``: the source draws ``min(4, level + extra_levels)`` for a corpus level
    (issue 36: sources learned late *for a reason*, as in MathInstruct: the three rarest
    sources, sequences, counting and GCD/LCM, are drawn two levels up, i.e. with more steps:
    sums of sequences, inclusion-exclusion, LCM via the GCD).
    """

    name: str
    weight: float
    style: str
    generate: Callable[[random.Random, int], Problem]
    extra_levels: int = 0

    def level(self, level: int) -> int:
        """The level this source draws for corpus level ``level``."""
        return min(LEVELS[-1], level + self.extra_levels)


#: The 13 sources with imbalanced weights (largest ~30x the smallest, as in MathInstruct).
SOURCES: tuple[Source, ...] = (
    Source("data/CoT/gsm_templates.json", 0.22, "gsm", gen_gsm),
    Source("data/CoT/arithmetic.json", 0.14, "cot", gen_arith),
    Source("data/PoT/word_problems_code.json", 0.11, "code", gen_pot),
    Source("data/CoT/linear_equations.json", 0.10, "boxed", gen_linear),
    Source("data/CoT/fractions.json", 0.08, "boxed", gen_fractions),
    Source("data/CoT/percentages.json", 0.07, "cot", gen_percent),
    Source("data/CoT/multiple_choice.json", 0.06, "cot", gen_mcq),
    Source("data/CoT/sequences.json", 0.05, "cot", gen_sequence, extra_levels=2),
    Source("data/CoT/unit_conversion.json", 0.05, "cot", gen_units),
    Source("data/CoT/modular.json", 0.04, "cot", gen_modular),
    Source("data/CoT/rates.json", 0.04, "cot", gen_rate),
    Source("data/CoT/counting.json", 0.027, "cot", gen_counting, extra_levels=2),
    Source("data/CoT/gcd_lcm.json", 0.013, "boxed", gen_gcd, extra_levels=2),
)

_RENDER = {"cot": _cot, "gsm": _gsm, "boxed": _boxed, "code": lambda p: "\n".join(p.steps)}


def _corrupt(rng: random.Random, p: Problem) -> Problem:
    """The same problem with a wrong final answer (irreducible noise)."""
    if isinstance(p.answer, str):  # a letter
        wrong = rng.choice([c for c in "ABCDE" if f"({c})" != p.shown])
        return Problem(p.question, p.steps, wrong, f"({wrong})")
    wrong = p.answer + rng.choice([-7, -3, -2, -1, 1, 2, 3, 7])
    shown = _latex(wrong) if "\\frac" in p.shown else fmt_number(wrong)
    steps = list(p.steps)
    if steps and steps[-1].startswith("print("):  # a program: it prints the wrong value
        steps[-1] = f"print({fmt_number(wrong)})"
    return Problem(p.question, steps, wrong, shown)


#: The difficulty levels of every source (more digits, more steps, larger coefficients).
LEVELS = (1, 2, 3, 4)


def _check_levels(levels) -> tuple[int, ...]:
    lv = tuple(levels)
    if not lv or any(isinstance(x, bool) or x not in LEVELS for x in lv) or len(set(lv)) < len(lv):
        raise ValueError(
            f"`levels` must be distinct difficulty levels from {LEVELS}; got {levels!r}."
        )
    return lv


def generate_corpus(
    n: int,
    *,
    seed: int = 0,
    sources: Sequence[Source] = SOURCES,
    noise_rate: float = 0.0,
    exclude: set[str] | None = None,
    near_exclude: Collection[str] | None = None,
    levels: Sequence[int] = LEVELS,
) -> list[dict]:
    """``n`` MathInstruct-format records (``instruction``, ``output``, ``source``) plus metadata.

    Args:
        n: number of records (>= 1).
        seed: everything is a function of ``(n, seed, sources, noise_rate, levels)``.
        sources: the sources to draw from (by weight).
        noise_rate: fraction of records whose final answer is replaced by a wrong one.
        levels: the difficulty levels drawn (uniformly), a subset of 1-4; the default draws
            all four (the same random stream as before the option existed).
        exclude: instructions that must not be generated (e.g. another split's).
        near_exclude: instructions that must not be near-duplicated: a problem with the same
            :func:`number_key` as one of them is drawn again (decontamination).

    Returns:
        Records with extra fields ``level`` (1-4), ``answer`` (exact, as text), ``style`` and
        ``corrupted``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"`n` must be a positive int; got {n!r}.")
    if not 0.0 <= noise_rate < 1.0:
        raise ValueError(f"`noise_rate` must be in [0, 1); got {noise_rate!r}.")
    levels = _check_levels(levels)
    rng = random.Random(seed)
    weights = [s.weight for s in sources]
    seen = set(exclude or ())
    banned = {k for q in near_exclude or () for k in _near_keys(q)}
    out: list[dict] = []
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > 50 * n + 1000:
            raise ValueError(f"could not generate {n} distinct problems (space exhausted).")
        src = rng.choices(sources, weights)[0]
        level = src.level(levels[rng.randint(1, len(levels)) - 1])  # randint(1, 4) for all 4
        prob = src.generate(rng, level)
        if prob.question in seen or _near_keys(prob.question) & banned:
            continue
        seen.add(prob.question)
        corrupted = noise_rate > 0 and rng.random() < noise_rate
        shown = prob
        if corrupted:
            shown = _corrupt(rng, prob)
        out.append(
            {
                "instruction": prob.question,
                "output": _RENDER[src.style](shown),
                "source": src.name,
                "level": level,
                "style": src.style,
                "answer": prob.shown if isinstance(prob.answer, str) else fmt_number(prob.answer),
                "corrupted": corrupted,
            }
        )
    return out


# ----------------------------------------------------------------------------- benchmarks


def _svamp(rng):
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b, c = rng.randint(5, 200), rng.randint(2, 99), rng.randint(2, 60)
    kind = rng.randrange(4)
    if kind == 0:
        body = f"{name} had {a} {item}s. {name} found {c} more {item}s and lost {b} {item}s."
        return body, f"How many {item}s does {name} have now?", a + c - b
    if kind == 1:
        other = rng.choice(_NAMES)
        body = f"{name} has {a + b} {item}s and {other} has {a} {item}s. {other} is {c} years old."
        return body, f"How many more {item}s does {name} have than {other}?", b
    if kind == 2:
        body = f"There are {b} bags with the same number of {item}s. Altogether there are {b * c}."
        return body, f"How many {item}s are in each bag?", c
    body = (
        f"{name} read {a} pages on Monday and {b} pages on Tuesday. The book has {a + b + c} pages."
    )
    return body, "How many pages are left to read?", c


def _svamp_id(rng, level):
    """SVAMP's layout (body, question) around a training GSM problem (in-distribution)."""
    p = gen_gsm(rng, level)
    body, _, question = p.question.rpartition(". ")
    return body + ".", question, p.answer


def _deepmind(rng):
    kind = rng.randrange(5)
    if kind == 0:  # DeepMind's add_sub phrasing; training's arithmetic says "Calculate"
        a, b, c = rng.randint(-99, 99), rng.randint(-99, 99), rng.randint(-99, 99)
        return f"Evaluate {a} - {b} + {c}.", a - b + c
    if kind == 1:
        m, k = rng.randint(2, 19), rng.randint(-30, 30)
        x = rng.randint(-12, 12)
        return f"Let f(x) = {m}*x + {k}. What is f({x})?", m * x + k
    if kind == 2:
        a, b = rng.randint(2, 30), rng.randint(-40, 40)
        return f"What is ({a * b}) divided by {a}?", b
    if kind == 3:
        v = Fraction(rng.randint(1000, 99999), 1000)
        half_up = (v * 10 + Fraction(1, 2)).__floor__()
        return f"Round {float(v):.3f} to one decimal place.", Fraction(half_up, 10)
    n = rng.randint(1000, 99999)
    return f"What is the tens digit of {n}?", (n // 10) % 10


def _deepmind_id(rng, level):
    """Training phrasings of DeepMind's tasks: arithmetic ("Calculate ...") and remainders."""
    p = rng.choice([gen_arith, gen_modular])(rng, level)
    return p.question, p.answer


def _mmlu_text(item) -> str:
    """The question as :func:`llm_validation.data.records.load_benchmark` shows it to the model."""
    q, choices, _ = item
    return f"{q}\nAnswer Choices: " + " ".join(
        f"({letter}) {c}" for letter, c in zip("ABCD", choices, strict=True)
    )


def _with_options(rng, q: str, ans, n_options: int = 4):
    """``(q, choices, gold index)``: ``ans`` and distinct distractors in shuffled positions."""
    step = max(1, abs(int(ans)) // 10)
    opts = {ans}
    while len(opts) < n_options:
        opts.add(ans + rng.choice([-3, -2, -1, 1, 2, 3, 5]) * step)
    opts = sorted(opts)
    rng.shuffle(opts)  # issue 36: gold letters balanced, not the sorted position
    return q, [fmt_number(o) for o in opts], opts.index(ans)


def _mmlu(rng):
    """Four-choice questions of types the training multiple-choice source lacks (transfer)."""
    import math

    kind = rng.randrange(3)
    if kind == 0:
        a, b = rng.randint(10, 300), rng.randint(10, 300)
        q, ans = f"What is the greatest common factor of {a} and {b}?", math.gcd(a, b)
    elif kind == 1:
        a, d, n = rng.randint(1, 30), rng.randint(2, 15), rng.randint(5, 40)
        q, ans = (
            f"In an arithmetic sequence with first term {a} and difference {d}, what is term {n}?",
            a + (n - 1) * d,
        )
    else:
        x = rng.randint(-30, 30)
        a, b = rng.randint(2, 19), rng.randint(-60, 60)
        q, ans = f"If {a}x + {b} = {a * x + b}, what is x?", x
    return _with_options(rng, q, Fraction(ans))


def _mmlu_id(rng, level):
    """Four-choice versions of the training multiple-choice source's types (in-distribution)."""
    base = rng.choice([gen_rate, gen_units, gen_percent])(rng, min(level, 3))
    return _with_options(rng, base.question, base.answer)


# Held-out templates (issue 36): the same skills as training in phrasings no training problem
# uses, so each format measures transfer beside its in-distribution half.


def _gsm_ood(rng, level):
    name, item = rng.choice(_NAMES), rng.choice(_ITEMS)
    a, b = rng.randint(3, 60), rng.randint(2, 19)
    total = a * b
    q = f"A shop packs {b} {item}s into each of {a} crates."
    steps = [f"The crates hold {a}*{b} = <<{a}*{b}={total}>>{total} {item}s."]
    if level >= 2:
        c = rng.randint(1, max(1, min(40, total - 4)))
        q += f" {name} buys {c} of the {item}s."
        steps.append(f"{total}-{c} = <<{total}-{c}={total - c}>>{total - c} are left.")
        total -= c
    return Problem(q + f" How many {item}s are left in the shop?", steps, Fraction(total),
                   str(total))  # fmt: skip


def _math_ood(rng, level):
    import math

    kind = rng.randrange(3)
    if kind == 0:
        p = gen_linear(rng, min(level, 2))
        a, b, c = re.findall(r"-?\d+", p.question)[:3]
        q = f"What value of $x$ satisfies ${c} = {a}x + {b}$?"
        return Problem(q, p.steps, p.answer, p.shown)
    if kind == 1:
        dmax = 9 + 9 * level
        x = Fraction(rng.randint(1, dmax), rng.randint(2, dmax))
        y = Fraction(rng.randint(1, dmax), rng.randint(2, dmax))
        res = x + y
        q = f"Find the sum of ${_latex(x)}$ and ${_latex(y)}$ in lowest terms."
        return Problem(q, [], res, _latex(res))
    g = rng.randint(2, 12 * level)
    a, b = g * rng.randint(2, 20 * level), g * rng.randint(2, 20 * level)
    v = math.gcd(a, b)
    q = f"What is the largest integer that divides both {a} and {b}?"
    return Problem(q, [], Fraction(v), str(v))


def _numglue_ood(rng, level):
    kind = rng.randrange(4)
    if kind == 0:
        pct, n = rng.choice(_PERCENTS), rng.randint(2, 200) * 5
        v = Fraction(pct * n, 100)
        return Problem(f"Find {pct} percent of {n}.", [], v, fmt_number(v))
    if kind == 1:
        big, small, f = rng.choice(_UNITS)
        x = rng.randint(2, 300)
        return Problem(f"{x} {big} equals how many {small}?", [], Fraction(x * f), str(x * f))
    if kind == 2:
        speed, t = rng.randint(3, 40) * 5, rng.randint(1, 14)
        return Problem(
            f"A train moves at {speed} km/h. How many km does it cover in {t} hours?", [],
            Fraction(speed * t), str(speed * t),
        )  # fmt: skip
    a, b, c = _digits(rng, level + 1), _digits(rng, level + 1), _digits(rng, level + 1)
    v = a + b - c
    return Problem(f"What is {a} plus {b} minus {c}?", [], Fraction(v), str(v))


#: The kinds of items of every benchmark (issue 36): ``id`` reuses training templates with
#: fresh numbers; ``ood`` tests a transfer (held-out templates and phrasings).
SPLITS = ("id", "ood")


def generate_benchmarks(
    n: int, *, seed: int = 1, exclude: set[str] | None = None, levels: Sequence[int] = LEVELS
) -> dict[str, list[dict]]:
    """Held-out test sets in the six MAmmoTH formats (``n`` problems each).

    Every format has an in-distribution half (``split: "id"``, the first ``n // 2`` items:
    training templates with fresh numbers) and a transfer half (``split: "ood"``): held-out
    phrasings of the training skills (``gsm8k``, ``math``, ``numglue``), SVAMP's new templates
    with distractor numbers, DeepMind-Mathematics phrasings, and four-choice questions of types
    the training multiple-choice source lacks (``mmlu_math``, gold letters in shuffled
    positions). ``levels``: the difficulty levels of the in-distribution items (as the training
    corpus's; each source's :meth:`Source.level` applies).

    No question equals an instruction in ``exclude`` or shares its order-insensitive
    :func:`number_key` with one, and no two questions of one benchmark share a key (no
    repeated problem; module docstring).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"`n` must be an int >= 2 (an id and an ood half); got {n!r}.")
    rng = random.Random(seed)
    seen = set(exclude or ())
    ref_banned = {k for q in exclude or () for k in _near_keys(q)}
    by_gen = {s.generate: s for s in SOURCES}

    def draw(make, text, count, banned):
        """``count`` problems not in ``seen`` whose key is not in ``banned`` (then added)."""
        out = []
        for _ in range(count):
            for _ in range(2000):
                item = make()
                t = text(item)
                keys = _near_keys(t)
                if t not in seen and not keys & banned:
                    seen.add(t)
                    banned |= keys
                    out.append(item)
                    break
            else:
                raise ValueError(
                    f"could not draw {count} distinct fresh test problems (space exhausted after "
                    f"{len(out)}); lower `n_test`."
                )
        return out

    levels = _check_levels(levels)

    def level(gen=None):
        lv = levels[rng.randint(1, len(levels)) - 1]
        return by_gen[gen].level(lv) if gen in by_gen else lv

    def of(gens):
        def make():
            g = rng.choice(gens)
            return g(rng, level(g))

        return make

    def question(p):
        return p.question

    def svamp_text(it):
        return f"{it[0]} {it[1]}"

    n_id, n_ood = n // 2, n - n // 2

    def both(make_id, make_ood, text):
        banned = set(ref_banned)  # one benchmark: no two of its items share a key
        return draw(make_id, text, n_id, banned) + draw(make_ood, text, n_ood, banned)

    gsm = both(of([gen_gsm]), lambda: _gsm_ood(rng, level()), question)
    mth = both(of([gen_linear, gen_fractions, gen_gcd]), lambda: _math_ood(rng, level()), question)
    ng = both(of([gen_percent, gen_units, gen_rate, gen_arith]),
              lambda: _numglue_ood(rng, level()), question)  # fmt: skip
    sv = both(lambda: _svamp_id(rng, level(gen_gsm)), lambda: _svamp(rng), svamp_text)
    dm = both(lambda: _deepmind_id(rng, level()), lambda: _deepmind(rng), lambda it: it[0])
    mm = both(lambda: _mmlu_id(rng, level()), lambda: _mmlu(rng), _mmlu_text)
    split = [SPLITS[0]] * n_id + [SPLITS[1]] * n_ood
    return {
        "gsm8k": [{"question": p.question, "answer": _gsm(p), "split": s}
                  for p, s in zip(gsm, split, strict=True)],
        "math": [{"question": p.question, "answer": [p.shown, float(p.answer)], "split": s}
                 for p, s in zip(mth, split, strict=True)],
        "numglue": [{"question": p.question, "answer": fmt_number(p.answer), "split": s}
                    for p, s in zip(ng, split, strict=True)],
        "svamp": [{"Body": b, "Question": q, "Answer": float(a), "split": s}
                  for (b, q, a), s in zip(sv, split, strict=True)],
        "deepmind": [{"question": q, "answer": fmt_number(a), "split": s}
                     for (q, a), s in zip(dm, split, strict=True)],
        "mmlu_math": [{"question": q, "choices": c, "answer": i, "split": s}
                      for (q, c, i), s in zip(mm, split, strict=True)],
    }  # fmt: skip


def _shown(name: str, rec: dict) -> str:
    """A benchmark record's question as the evaluator shows it to the model."""
    if name == "svamp":
        return f"{rec['Body'].strip()} {rec['Question'].strip()}"
    if name == "mmlu_math":
        return _mmlu_text((rec["question"], rec["choices"], rec["answer"]))
    return rec["question"]


def contamination(splits: dict[str, Sequence[str]], reference: Sequence[str]) -> dict:
    """Exact and near duplicates of ``reference`` problems in each split, and template overlap.

    Args:
        splits: ``{name: questions}`` (as the model reads them).
        reference: the training and pre-training instructions.

    Returns:
        ``{name: {"n", "exact", "near", "template_overlap"}}``: counts of questions equal to a
        reference problem, sharing a :func:`number_key` with one (near-duplicates; 0 by
        construction for the benchmarks and the held-out split), and the fraction whose
        :func:`template_key` occurs in the reference (in-distribution by design for ``gsm8k``,
        ``math``, ``numglue`` and the held-out split).
    """
    exact = set(reference)
    keys = {k for q in reference for k in _near_keys(q)}
    templates = {template_key(q.split("\nAnswer Choices")[0]) for q in reference}
    out = {}
    for name, qs in splits.items():
        out[name] = {
            "n": len(qs),
            "exact": sum(q in exact for q in qs),
            "near": sum(bool(_near_keys(q) & keys) for q in qs),
            "template_overlap": sum(
                template_key(q.split("\nAnswer Choices")[0]) in templates for q in qs
            )
            / max(1, len(qs)),
        }
    return out


def write_corpus(
    folder: str | os.PathLike,
    *,
    n_train: int,
    n_test: int,
    n_pretrain: int = 0,
    n_heldout: int = 0,
    seed: int = 0,
    noise_rate: float = 0.0,
    levels: Sequence[int] = LEVELS,
) -> dict[str, Path]:
    """Write ``MathInstruct.json``, optional ``pretrain.json``/``heldout.json``, ``dataset/``.

    The pre-training split, the training file, the held-out split and the benchmarks are
    disjoint by instruction, and no benchmark or held-out problem is a near-duplicate of a
    training or pre-training problem (module docstring). The held-out split is drawn from the
    training sources and ``levels``, the same number from each source (``n_heldout / 13``,
    so the rare, late-learned sources are measured on as many problems as the common ones;
    issue 36), and is always clean
    (``noise_rate`` 0): its solutions' loss under a fine-tuned model is a low-variance,
    continuous measure of what was learned, per source. ``contamination.json`` records
    :func:`contamination` of every benchmark and the held-out split against training +
    pre-training.

    Returns:
        ``{"train": path, "pretrain": path or None, "heldout": path or None,
        "benchmarks": folder, "contamination": path}`` (``dataset/`` in the MAmmoTH layout).
    """
    if isinstance(n_heldout, bool) or not isinstance(n_heldout, int) or n_heldout < 0:
        raise ValueError(f"`n_heldout` must be an int >= 0; got {n_heldout!r}.")
    from llm_validation.data.records import BENCHMARK_FILES
    from sims.runtime.io import atomic_path

    folder = Path(folder)
    pre = generate_corpus(n_pretrain, seed=seed + 10_000, levels=levels) if n_pretrain else []
    train = generate_corpus(
        n_train, seed=seed, noise_rate=noise_rate, exclude={r["instruction"] for r in pre},
        levels=levels,
    )  # fmt: skip
    reference = [r["instruction"] for r in pre] + [r["instruction"] for r in train]
    benches = generate_benchmarks(n_test, seed=seed + 20_000, exclude=set(reference), levels=levels)
    shown = {name: [_shown(name, r) for r in recs] for name, recs in benches.items()}
    used = set(reference) | {q for qs in shown.values() for q in qs}
    held = []
    for i, src in enumerate(SOURCES):  # the same count per source (issue 36: >= 50 each)
        n_src = n_heldout // len(SOURCES) + (i < n_heldout % len(SOURCES))
        if n_src:
            held += generate_corpus(
                n_src, seed=seed + 30_000 + i, sources=(src,), exclude=used,
                near_exclude=reference, levels=levels,
            )  # fmt: skip
            used |= {r["instruction"] for r in held}
    paths: dict[str, Path | None] = {
        "train": folder / "MathInstruct.json",
        "pretrain": None,
        "heldout": None,
        "benchmarks": folder / "dataset",
        "contamination": folder / "contamination.json",
    }

    def dump(path: Path, obj, jsonl: bool = False) -> None:
        with atomic_path(path) as tmp:
            if jsonl:
                tmp.write_text("".join(json.dumps(r) + "\n" for r in obj))
            else:
                tmp.write_text(json.dumps(obj, indent=0))

    dump(paths["train"], train)
    if pre:
        paths["pretrain"] = folder / "pretrain.json"
        dump(paths["pretrain"], pre)
    if held:
        paths["heldout"] = folder / "heldout.json"
        dump(paths["heldout"], held)
    for name, recs in benches.items():
        dump(folder / "dataset" / BENCHMARK_FILES[name], recs, jsonl=name == "gsm8k")
    if held:
        shown["heldout"] = [r["instruction"] for r in held]
    for name, recs in benches.items():  # each half apart (templates: none in the ood halves)
        for split in SPLITS:
            shown[f"{name}/{split}"] = [_shown(name, r) for r in recs if r.get("split") == split]
    report = contamination(shown, reference)
    report["reference"] = {"train": len(train), "pretrain": len(pre)}
    dump(paths["contamination"], report)
    return paths  # type: ignore[return-value]
