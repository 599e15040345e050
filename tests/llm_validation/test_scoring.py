"""Answer extraction and scoring, against hand-adjudicated completions (style rule 15).

``TABLE`` holds completions written by hand for the six formats (programs included), each with
the verdict a careful grader gives and why; the verdicts are written from reading the
completion, not from running the code under test. Our scorer must give every verdict except the
few ``KNOWN_MISSES`` (each explained in its row). ``_mammoth_*`` re-implements MAmmoTH's public
scoring rules (``math_eval/utils.py`` and ``run_open.py`` of TIGER-Lab/MAmmoTH, written anew
here, not copied) to measure the agreement that :mod:`llm_validation.evaluate.scoring`'s docstring
states.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections import Counter

import pytest

pytest.importorskip("math_verify")

from llm_validation.evaluate import scoring  # noqa: E402
from llm_validation.evaluate.scoring import (  # noqa: E402
    extract_answer,
    extract_answers,
    is_correct,
    is_program,
    program_source,
)
from llm_validation.execution import run_programs  # noqa: E402

TIMEOUT = 3.0  # seconds per program (the table's programs take milliseconds; slack for load)
TABLE: list[tuple[str, str, str, bool, str]] = []  # (dataset, completion, gold, verdict, why)


def add(dataset, gold, *rows):
    for completion, verdict, why in rows:
        TABLE.append((dataset, completion, gold, verdict, why))


# ============================================================================ GSM8K (integers)
add(
    "gsm8k",
    "72",
    (
        "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nAltogether she sold 48+24 = "
        "<<48+24=72>>72 clips.\n#### 72",
        True,
        "final '####' answer is the gold",
    ),
    (
        "Natalia sold 48/2 = 24 clips in May.\nAltogether she sold 48+24 = 71 clips.\n#### 71",
        False,
        "arithmetic slip: final answer 71",
    ),
    (
        "She sold 48 in April and half as many, 24, in May, so 72 in total.",
        True,
        "no trigger; the last number is the stated total",
    ),
    (
        "She sold 48 + 24 = 72 clips. The answer is 72.\n\n### Instruction:\nHow many legs "
        "do 3 cats have?\n\n### Response:\n3 * 4 = 12. The answer is 12.",
        True,
        "model ran on into a new problem; its own answer comes first",
    ),
    (
        "The total is 48 + 24 = 72 clips.\n#### 72\n\nQuestion: Tom has 5 pens.\n#### 5",
        True,
        "two '####' blocks: the first belongs to this problem",
    ),
    ("I cannot solve this problem.", False, "no answer"),
    ("", False, "empty completion"),
    (
        "The answer is 72 clips, sold over 2 months.",
        True,
        "after the trigger the first number is the answer",
    ),
    ("The answer is: 72", True, "'The answer is:' trigger"),
    ("So the answer is 72.", True, "lowercase trigger with the right number"),
    (
        "In May she sold 24. So the answer is 24, and in all 72.",
        False,
        "the stated answer is 24 (May only), not the total asked for",
    ),
    ("#### 72.00", True, "trailing zeros"),
    ("48 / 2 = 24\n48 + 24 = 72", True, "bare arithmetic; last result is the total"),
    (
        "48 + 24 = 72 clips. That is 72 / 2 = 36 per month.",
        False,
        "ends on a per-month figure, not the total",
    ),
)
add(
    "gsm8k",
    "18",
    (
        "Janet has 16 - 3 - 4 = 9 eggs left. She sells them at $2 each: 9 * 2 = $18.\n#### 18",
        True,
        "right",
    ),
    ("She makes 9 * $2 = $18 every day. The answer is $18.", True, "dollar sign before number"),
    ("She makes 18 dollars a day. The answer is 18.0", True, "18.0 is 18"),
    ("16 - 3 - 4 = 9 eggs, 9 * 2 = 16 dollars.\n#### 16", False, "wrong product"),
    ("eggs = 16 - 3 - 4\nprint(eggs * 2)", True, "program prints 18"),
    (
        "eggs_left = 16 - 3 - 4\nprice = 2\nearnings = eggs_left * price\nprint(earnings)",
        True,
        "program prints 18",
    ),
    ("eggs = 16 - 3 - 4\nprint(eggs + 2)", False, "program prints 11"),
    ("eggs = 16 - 3 - 4\nprint(eggs * 2 / 0)", False, "program raises ZeroDivisionError"),
    (
        "x = 0\nwhile x >= 0:\n    x += 1\nprint(x * 18)",
        False,
        "program never ends (its text contains 18)",
    ),
    ("print('The answer is', (16 - 3 - 4) * 2)", True, "program prints 'The answer is 18'"),
    (
        "Here is a program:\n```python\neggs = 16 - 3 - 4\nprint(eggs * 2)\n```\nIt prints the "
        "money she makes.",
        True,
        "fenced program prints 18",
    ),
    (
        "def earnings():\n    return (16 - 3 - 4) * 2\n\nprint(earnings())",
        True,
        "program with a function prints 18",
    ),
    (
        "eggs = 16 - 3 - 4\nprint(f'Janet makes ${eggs * 2} a day')",
        True,
        "program prints 'Janet makes $18 a day'",
    ),
    (
        "eggs = 16 - 3 - 4\nprint(eggs * 2)\n### Instruction:\nWhat is 5 + 5?",
        True,
        "program followed by a new prompt; the program prints 18",
    ),
)
add(
    "gsm8k",
    "1250",
    ("The answer is: 1,250 dollars, and she keeps 30 for later.", True, "comma in the answer"),
    ("He pays 1,000 + 250 = 1,250 dollars.", True, "commas, last number"),
    ("He pays 1000 + 250 = 1250.00 dollars.\n#### 1,250.00", True, "comma and zeros"),
    ("He pays 1000 + 250 = 1205 dollars.\n#### 1205", False, "digits swapped"),
    ("total = 1000 + 250\nprint(total)", True, "program prints 1250"),
    ("total = 1000 + 25\nprint(total)", False, "program prints 1025"),
)
add(
    "gsm8k",
    "-3",
    ("The temperature drops from 5 to -3 degrees. The answer is -3.", True, "negative answer"),
    ("It is 5 - 8 = -3 degrees.\n#### -3", True, "negative after '####'"),
    ("It is 8 - 5 = 3 degrees.\n#### 3", False, "sign wrong"),
    ("start = 5\ndrop = 8\nprint(start - drop)", True, "program prints -3"),
)
add(
    "gsm8k",
    "45",
    (
        "He reads 15 pages a day for 3 days: 15 * 3 = 45 pages. (This took me 2 minutes.)",
        True,
        "the answer is 45; the trailing aside mentions another number",
    ),
    (
        "15 * 3 = 45. The answer is 45 pages, or about 0.2 of the book.",
        True,
        "first number after the trigger",
    ),
    (
        "pages = 15\ndays = 3\nprint(pages * days)\nprint('pages')",
        True,
        "program prints 45 then a word",
    ),
)
# ============================================================================ MATH (LaTeX golds)
add(
    "math",
    r"\frac{1}{2}",
    (r"The answer is $\boxed{\frac{1}{2}}$.", True, "boxed fraction"),
    (r"So $x = \boxed{\dfrac{1}{2}}$", True, "dfrac is frac"),
    (r"The answer is 0.5", True, "0.5 = 1/2"),
    (r"The answer is 1/2.", True, "a/b is the fraction"),
    (r"The answer is \frac12", True, "frac12 shorthand"),
    (r"Hence $x = \boxed{\frac{2}{4}}$.", True, "2/4 = 1/2 (equal value)"),
    (r"The answer is $\frac{1}{3}$.", False, "1/3"),
    (r"Thus $\boxed{0.55}$.", False, "0.55 is 10 % off"),
    (
        r"We get $x = \frac{1}{2}$ after dividing by 4.",
        True,
        "the answer x = 1/2 is stated; the scorers take the last number, 4 (known miss)",
    ),
    ("x = 1\ny = 2\nprint(x / y)", True, "program prints 0.5"),
    ("from fractions import Fraction\nprint(Fraction(3, 6))", True, "program prints 1/2"),
    ("print(1 / 3)", False, "program prints 0.333..."),
)
add(
    "math",
    r"\frac{\sqrt{3}}{2}",
    (r"Hence $\boxed{\dfrac{\sqrt{3}}{2}}$", True, "dfrac, sqrt"),
    (r"The answer is $\frac{\sqrt3}{2}$", True, "sqrt3 shorthand"),
    (r"The answer is $\frac{1}{2}\sqrt{3}$", True, "same value, other form"),
    (r"The answer is $\frac{\sqrt{2}}{2}$", False, "sqrt 2 over 2"),
    (r"Thus $\boxed{0.866}$.", False, "a rounded decimal of an exact irrational answer"),
    ("import math\nprint(math.sqrt(3) / 2)", True, "program prints 0.866..."),
)
add(
    "math",
    "5",
    (r"The answer is $x = 5$", True, "x = 5"),
    (r"Dividing by 3 gives $x=\boxed{5}$.", True, "boxed"),
    (r"The answer is 5.4", True, "integer gold: MAmmoTH rounds the prediction (kept)"),
    (r"The answer is 5.6", False, "rounds to 6"),
    (r"Subtracting 7 from both sides: $3x = 15$. Divide by 3: $x = 5$.", True, "last number is 5"),
    (
        r"Subtracting 7 from both sides: $3x = 15$, so $x = 5$. Check: $3 \cdot 5 + 7 = 22$.",
        True,
        "x = 5 is the answer; the scorers take the check's 22 (known miss)",
    ),
    ("x = (22 - 7) / 3\nprint(x)", True, "program prints 5.0"),
    ("print((22 - 7) // 4)", False, "program prints 3"),
)
add(
    "math",
    "10",
    (r"The answer is 10\%.", True, r"\% dropped"),
    (r"The answer is $10\%$", True, "percent in dollars"),
    (r"The answer is 10%", True, "plain % (MAmmoTH keeps it, then reads no number)"),
    (r"The answer is 10^\circ", True, "degrees dropped"),
    (r"The answer is 10 \text{ cm}", True, "units dropped"),
    (r"The answer is $\$10$", True, r"\$ dropped"),
    (r"The answer is 100", False, "100"),
    ("print(2 * 5)", True, "program prints 10"),
)
add(
    "math",
    r"(3,\frac{\pi}{2})",
    (r"Thus \boxed{\left( 3, \frac{\pi}{2} \right)}", True, r"\left/\right and spaces"),
    (r"The answer is $(3, \frac{\pi}{2})$", True, "same pair"),
    (r"The answer is $(3, \pi)$", False, "wrong angle"),
)
add(
    "math",
    "x^2+2x",
    (r"The answer is $x^2+2x$", True, "same"),
    (r"The answer is $2x+x^2$", True, "reordered sum (math-verify)"),
    (r"The answer is $x^2-2x$", False, "sign"),
    (r"Thus $\boxed{x(x+2)}$", True, "factored form, equal polynomial"),
)
add(
    "math",
    r"-\frac{3}{4}",
    (r"Therefore, the answer is $\boxed{-\frac{3}{4}}$.", True, "negative fraction"),
    (r"The answer is -0.75", True, "decimal"),
    (r"The answer is $\frac{-3}{4}$", True, "sign in the numerator"),
    (r"The answer is $\frac{3}{4}$", False, "sign lost"),
    ("print(-3 / 4)", True, "program prints -0.75"),
)
add(
    "math",
    "12",
    ("First 2, then 3, finally 12 is what we get", True, "no trigger: last number"),
    ("No numbers here at all", False, "nothing"),
    ("", False, "empty"),
    (r"The gcd is $\gcd(36, 48) = \boxed{12}$.", True, "boxed after other numbers"),
    ("import math\nprint(math.gcd(36, 48))", True, "program prints 12"),
    ("import math\nprint(math.lcm(36, 48))", False, "program prints 144"),
)
# ============================================================================ NumGLUE
add(
    "numglue",
    "12.5",
    ("The answer is 12.50 kg", True, "trailing zero"),
    (
        "A crate weighs 25 kg, so half of it is 12.5 kg.",
        True,
        "capital 'A' opening the sentence is not a choice",
    ),
    ("25 / 2 = 12.5", True, "last number"),
    ("The answer is 25/2", True, "25/2 = 12.5"),
    ("The answer is 12", False, "12"),
    ("weight = 25\nprint(weight / 2)", True, "program prints 12.5"),
    ("weight = 25\nprint(weight // 2)", False, "program prints 12 (floor division)"),
)
add(
    "numglue",
    "B",
    ("Option B is right. The answer is B.", True, "letter after the trigger"),
    ("The answer is (b).", True, "lowercase letter in parentheses"),
    ("Comparing the two, the correct option is (B).", True, "stated option"),
    ("The answer is (C).", False, "C"),
    ("print('B')", True, "program prints B"),
)
add(
    "numglue",
    "7",
    ("So 3 + 4 = 7", True, "last number"),
    ("I am not sure.", False, "no answer"),
    (
        "A bag has 3 red and 4 blue marbles, 7 in all. The answer is 7.",
        True,
        "'A' at the start of the text is not a choice letter",
    ),
    ("A total of 3 + 4 = 7 marbles.", True, "no trigger, 'A' is an article"),
    ("red = 3\nblue = 4\nprint(red + blue)", True, "program prints 7"),
    ("red = 3\nblue = 4\nprint(red * blue)", False, "program prints 12"),
)
add(
    "numglue",
    "1/3",
    ("The probability is 2/6 = 1/3.", True, "fraction"),
    ("The answer is 0.33", True, "rounded to 2 places (non-terminating gold)"),
    ("The answer is 0.333", True, "3 places"),
    ("The answer is 0.3", False, "1 place is too coarse"),
    ("The answer is 0.34", False, "not a rounding of 1/3"),
    ("print(2 / 6)", True, "program prints 0.3333333333333333"),
    ("print(round(2 / 6, 2))", True, "program prints 0.33"),
)
add(
    "numglue",
    "45",
    (
        "A train goes 90 km in 2 hours: 90 / 2 = 45 km per hour. The answer is 45.",
        True,
        "article A before the trigger",
    ),
    ("The train goes 90 km in 2 hours. The answer is 45 km/h.", True, "unit after number"),
    ("The answer is 180.", False, "multiplied instead of divided"),
    ("speed = 90 / 2\nprint(speed)", True, "program prints 45.0"),
)
# ============================================================================ SVAMP (integers)
add(
    "svamp",
    "8",
    ("Jack has 5 apples and gets 3.0 more, so 8.0 in total", True, "8.0 is 8"),
    ("5 + 3 = 8", True, "bare arithmetic"),
    ("He has 5 + 3 = 8 apples. The answer is 8.", True, "trigger"),
    ("He has 5 - 3 = 2 apples. The answer is 2.", False, "subtracted"),
    ("The answer is 8 apples; he had 5 before.", True, "first number after the trigger"),
    ("apples = 5 + 3\nprint(apples)", True, "program prints 8"),
    ("apples = 5 + 3\nprint(float(apples))", True, "program prints 8.0"),
    ("apples = 5 +\nprint(apples)", False, "program has a syntax error"),
)
add(
    "svamp",
    "7",
    ("There were 26 - 19 = 7 more.", True, "last number"),
    ("26 - 19 = 7 more pages. The answer is 7", True, "trigger"),
    ("There are 26 + 19 = 45 pages.", False, "added"),
    (
        "She read 19 of 26 pages, so 7 are left to read on day 3.",
        True,
        "7 are left; the scorers take the last number, a day (known miss)",
    ),
    ("left = 26 - 19\nprint(left)", True, "program prints 7"),
    (
        "import sys\nsys.exit(7)",
        False,
        "code that prints nothing; without print( it is not detected as a program (MAmmoTH's "
        "test), and its text's last number is 7 (known miss)",
    ),
    ("print(26 - 19, 'pages')", True, "program prints '7 pages'"),
)
add(
    "svamp",
    "12",
    ("Each bag holds 36 / 3 = 12 marbles.\n#### 12", True, "'####'"),
    ("36 / 3 = 12.00", True, "zeros"),
    ("bags = 3\ntotal = 36\nprint(total / bags)", True, "program prints 12.0"),
    ("bags = 3\ntotal = 36\nprint(total / bagz)", False, "NameError"),
)
# ============================================================================ DeepMind
add(
    "deepmind",
    "-3/4",
    ("Let q = 3. The answer is -3/4.", True, "fraction after the trigger"),
    ("The answer is -0.75", True, "decimal of the gold"),
    ("The answer is 3/4", False, "sign"),
    ("-6/8 simplifies to -3/4", True, "last number"),
    ("print(-3 / 4)", True, "program prints -0.75"),
    ("from fractions import Fraction\nprint(Fraction(-6, 8))", True, "program prints -3/4"),
)
add(
    "deepmind",
    "-2",
    ("Solve 2*x + 4 = 0 gives x = -2", True, "after '='"),
    ("2*x = -4, so x = -2. The answer is -2.", True, "trigger"),
    ("The answer is 2", False, "sign"),
    ("The value is unknown.", False, "no answer"),
    ("x = -4 / 2\nprint(x)", True, "program prints -2.0"),
    ("x = -4 / 2\nprint(abs(x))", False, "program prints 2.0"),
)
add(
    "deepmind",
    "275/3",
    ("The answer is 91.67", True, "rounded to 2 places"),
    ("The answer is 91.666", True, "truncated to 3 places"),
    ("The answer is 91.6667", True, "rounded to 4 places"),
    ("The answer is 91.7", False, "1 place: too coarse"),
    ("The answer is 91.68", False, "neither rounding nor truncation"),
    ("The answer is 275/3", True, "exact fraction"),
    ("The answer is 91 2/3", True, "a mixed number; the scorers read 91 (known miss)"),
    ("print(275 / 3)", True, "program prints 91.66666666666667"),
    ("print(round(275 / 3, 2))", True, "program prints 91.67"),
    ("print(275 // 3)", False, "program prints 91"),
)
add(
    "deepmind",
    "12.3",
    ("Round 12.345 to one decimal place: 12.3", True, "last number"),
    ("The answer is 12.30", True, "zero"),
    ("The answer is 12.35", False, "two places, wrong"),
    ("The answer is 12.4", False, "rounded up"),
    ("print(round(12.345, 1))", True, "program prints 12.3"),
)
add(
    "deepmind",
    "4",
    ("The tens digit of 12345 is 4.", True, "last number"),
    ("12345: the tens digit is 4. The answer is 4.", True, "trigger"),
    ("The answer is 5", False, "units digit"),
    ("n = 12345\nprint(n // 10 % 10)", True, "program prints 4"),
    ("n = 12345\nprint(n % 10)", False, "program prints 5"),
    ("n = 12345\nprint(str(n)[-2])", True, "program prints 4"),
)
add(
    "deepmind",
    "33.3",
    ("The answer is 33.3", True, "exact"),
    (
        "total = 37 * (1 - 0.1)\nprint(total)",
        True,
        "program prints 33.300000000000004 (float round-off of 33.3)",
    ),
    ("print(37 * 0.9 + 0.001)", False, "program prints 33.301"),
    ("The answer is 33.300000000000004", True, "a float's print-out of 33.3"),
    ("The answer is 33.30000001", False, "10 significant digits: not a float round-off"),
)
add(
    "deepmind",
    "24",
    ("f(3) = 5*3 + 9 = 24", True, "after '='"),
    ("Let f(x) = 5*x + 9. Then f(3) = 24.", True, "last number"),
    ("f(3) = 5*3 + 9 = 15 + 9 = 25", False, "wrong sum"),
    ("def f(x):\n    return 5 * x + 9\nprint(f(3))", True, "program prints 24"),
)
# ============================================================================ MMLU-Math (letters)
add(
    "mmlu_math",
    "C",
    ("The answer is (C).", True, "trigger"),
    ("The answer is C", True, "bare capital after the trigger"),
    ("The answer is (c)", True, "lowercase in parentheses"),
    ("the answer is c.", True, "lowercase trigger and letter"),
    ("Answer: C", True, "stated without 'is'"),
    ("Answer: (c)", True, "stated, lowercase in parentheses"),
    ("The correct option is C.", True, "stated option"),
    (
        "Checking each: (A) gives 3, (B) gives 4, (D) gives 6; only (C) gives 5. Answer: C",
        True,
        "options named in the reasoning; the final stated answer wins",
    ),
    ("(A) is too small and (D) too large. The correct choice is (C).", True, "final stated choice"),
    (
        "Option (A) is 12 and option (B) is 15. So the answer: c",
        True,
        "stated lowercase letter at the end",
    ),
    ("I would choose C because 3x = 15 gives x = 5.", True, "'choose C'"),
    ("Among the choices, C fits best.", True, "a capital letter standing alone"),
    ("x = 5, which is option C", True, "after '=' and 'option'"),
    ("The answer is (B).", False, "B"),
    ("The answer is B, not C.", False, "first letter after the trigger is B"),
    ("Answer: D", False, "D"),
    ("The correct option is (a).", False, "a in parentheses is A"),
    ("The answer is 5", False, "a number, not a letter (MAmmoTH would ask the model again)"),
    ("a b c", False, "no stated answer; lowercase letters standing alone are not choices"),
    ("", False, "empty"),
    ("print('C')", True, "program prints C"),
    ("options = 'ABCD'\nprint(options[2])", True, "program prints C"),
    ("print('The answer is (C)')", True, "program prints a full sentence"),
    ("print('(B)')", False, "program prints (B)"),
)
add(
    "mmlu_math",
    "A",
    ("This is a prime, so the answer is (A) 7", True, "'a' is an article, (A) the choice"),
    ("The answer is A", True, "bare capital after the trigger"),
    (
        "The answer is a prime number, 7, which is (A).",
        True,
        "after the trigger the article 'a' is not a choice; (A) is",
    ),
    ("A is the answer.", True, "capital A stated (a careful grader reads the choice)"),
    ("It is a square, so D.", False, "'a' is an article; the choice is D"),
    (
        "We need a number that is a multiple of 3 and a divisor of 12. Answer: (a)",
        True,
        "articles in the reasoning, stated (a) at the end",
    ),
    ("The answer is (D) since (A) fails.", False, "first letter after the trigger: D"),
    (
        "Answer Choices reviewed. (A) 3 (B) 4 (C) 5 (D) 6. The answer is (A).",
        True,
        "choices repeated, then the trigger",
    ),
    ("print('A')", True, "program prints A"),
    ("x = 3\nif x == 3:\n    print('A')\nelse:\n    print('B')", True, "program prints A"),
    ("x = 4\nif x == 3:\n    print('A')\nelse:\n    print('B')", False, "program prints B"),
)
add(
    "mmlu_math",
    "D",
    ("Since 6 is the only multiple, the answer is (D).", True, "trigger"),
    ("(A) 3\n(B) 4\n(C) 5\n(D) 6\nThe gcd is 6, option D.", True, "option named last"),
    (
        "(D) is 6, which is the gcd. But wait, (B) 4 divides both. So B.",
        False,
        "the final choice is B",
    ),
    ("Neither (A) nor (B) works; the answer must be D.", True, "stated with 'must be'"),
    ("D", True, "a lone letter"),
    ("d", True, "a lone lowercase letter: the choice D"),
)
add(
    "svamp",
    "15",
    ("Dan had 20 cookies, found 7 and lost 12: 20 + 7 - 12 = 15.", True, "last number"),
    ("20 + 7 - 12 = 15 cookies. The answer is 15.", True, "trigger"),
    ("The answer is 15.0", True, "15.0 is 15"),
    ("20 + 7 + 12 = 39. The answer is 39.", False, "added the lost cookies"),
    (
        "Dan is 9 years old; he has 20 + 7 - 12 = 15 cookies.",
        True,
        "the distractor age comes first",
    ),
    (
        "He has 15 cookies now, 3 fewer than his sister.",
        True,
        "15 is the answer; the scorers take the last number, 3 (known miss)",
    ),
    ("cookies = 20\ncookies += 7\ncookies -= 12\nprint(cookies)", True, "program prints 15"),
    (
        "cookies = 20\ncookies += 7\ncookies -= 12\nprint(cookies",
        False,
        "unclosed parenthesis: a syntax error",
    ),
    ("age = 9\ncookies = 20 + 7 - 12\nprint(age)", False, "program prints the age, 9"),
    ("print(sum([20, 7, -12]))", True, "program prints 15"),
)


# ----------------------------------------------------------------------------- MAmmoTH's rules
# Written from the behaviour of MAmmoTH's public math_eval code, independently of scoring.py.

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.Div: operator.truediv, ast.Pow: operator.pow, ast.USub: operator.neg,
        ast.UAdd: operator.pos}  # fmt: skip


def _arith(text):
    """Python's value of an arithmetic literal (what MAmmoTH's ``eval`` gives), else None."""

    def ev(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        if isinstance(node, ast.Tuple) and node.elts:
            return ev(node.elts[0])
        raise ValueError(text)

    try:
        return ev(ast.parse(text.strip(), mode="eval").body)
    except Exception:  # noqa: BLE001 - anything MAmmoTH's eval would reject
        return None


def _mammoth_zeros(n):
    try:
        x = float(n)
    except ValueError:
        return n
    s = str(x).rstrip("0")
    return str(int(s[:-1])) if s.endswith(".") else str(float(s))


def _mammoth_strip(s):
    s = s.replace("\n", "").replace("\\!", "").replace("\\\\", "\\")
    s = s.replace("tfrac", "frac").replace("dfrac", "frac")
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("^{\\circ}", "").replace("^\\circ", "").replace("\\$", "")
    s = s.split("\\text{ ")[0]
    s = s.replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    if len(s.split("=")) == 2 and len(s.split("=")[0]) <= 2:
        s = s.split("=")[1]
    out = s.split("\\sqrt")[0]
    for part in s.split("\\sqrt")[1:]:
        out += "\\sqrt" + ("{" + part[0] + "}" + part[1:] if part and part[0] != "{" else part)
    s = out.replace(" ", "")
    pieces = s.split("\\frac")
    out = pieces[0]
    for part in pieces[1:]:
        out += "\\frac"
        if not part or part[0] == "{":
            out += part
        elif len(part) < 2:
            return s
        elif part[1] == "{":
            out += "{" + part[0] + "}" + part[1:]
        else:
            out += "{" + part[0] + "}{" + part[1] + "}" + part[2:]
    s = out
    m = re.fullmatch(r"(-?\d+)/(-?\d+)", s)
    if m and s == f"{int(m.group(1))}/{int(m.group(2))}":
        s = "\\frac{" + m.group(1) + "}{" + m.group(2) + "}"
    return s


def _mammoth_boxed(s):
    rest = s.split("boxed")[-1]
    if not rest:
        return ""
    if rest[0] != "{":
        return _mammoth_strip(rest.split("$")[0].strip())
    depth, got = 1, ""
    for ch in rest[1:]:
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            break
        got += ch
    return _mammoth_strip(got)


def _mammoth_math(s):
    if "The answer is " in s:
        pred = s.split("The answer is ")[-1].strip()
    elif "the answer is " in s:
        pred = s.split("the answer is ")[-1].strip()
    elif "boxed" in s:
        pred = _mammoth_boxed(s)
    else:
        nums = re.findall(r"-?\d*\.?\d+", s)
        pred = nums[-1] if nums else ""
    if pred and pred[-1] == ".":
        pred = pred[:-1]
    if pred and pred[-1] == "/":
        pred = pred[:-1]
    pred = _mammoth_strip(pred)
    if "boxed" in pred:
        pred = _mammoth_boxed(pred)
    if ".the" in pred.lower():
        pred = pred[: pred.lower().index(".the")].strip()
    return pred


def _mammoth_clean(dataset, text):
    if dataset == "math":
        return _mammoth_math(text) if text else text
    triggers = ("####", "The answer is")
    if any(text.count(t) > 1 for t in triggers):
        text = text.split("\n\n")[0]
    parts = re.split("|".join(triggers), text)
    pred = parts[-1]
    if "=" in pred:
        pred = pred.split("=")[-1].strip()
    letters = re.findall(r"\b(A|B|C|D|E)\b", pred.upper())
    numbers = [_mammoth_zeros(x) for x in re.findall(r"-?\d+/?\.?\d*", pred.replace(",", ""))]
    if dataset == "mmlu_math":
        cands = letters or [pred.strip().strip(".")]
    elif dataset == "numglue":
        cands = letters or numbers
    else:
        cands = numbers
    if not cands:
        return ""
    p = cands[0] if len(parts) > 1 else cands[-1]
    return p[:-1] if p.endswith((".", "/")) else p


def _mammoth_number(s):
    if "frac" in s:
        s = re.sub(r"\\frac\{([^{}]+)\}\{([^{}]+)\}", r"(\1)/(\2)", s)
    s = s.replace(",", "")
    v = _arith(s)
    if v is None or isinstance(v, complex):
        return None
    return round(v) if float(v).is_integer() else float(v)


def _mammoth_correct(dataset, answer, gold):
    if dataset == "math":
        if answer == gold:
            return True
        g, p = _mammoth_number(gold), _mammoth_number(answer) if answer else None
        if g is None or p is None or math.isnan(p):
            return False
        return round(p) == g if isinstance(g, int) else abs(p - g) <= 0.04 * abs(g)
    if dataset == "mmlu_math":
        return answer == gold
    return answer == _mammoth_zeros(gold)


def _mammoth_program(completion):
    """MAmmoTH's program: cut, fences dropped, wrapped in a function after its imports.

    MAmmoTH imports numpy for every program; here only for code that names ``np`` (no table
    program's output depends on it, and the import costs about 0.2 s per program).
    """
    code = completion.split("### Instruction")[0].replace("```python", "").split("```")[0]
    lines = "".join("  " + line + "\n" for line in code.split("\n"))
    numpy = "import numpy as np\n" if "np." in code else ""
    return f"import math\nfrom math import *\n{numpy}import hashlib\ndef run_it():\n{lines}run_it()"


# ----------------------------------------------------------------------------- the table

#: Rows our scorer gets wrong, with the reason in the row (the last number is not the answer;
#: a mixed number).
KNOWN_MISSES = {
    "We get $x = \\frac{1}{2}$ after dividing by 4.",
    "Subtracting 7 from both sides: $3x = 15$, so $x = 5$. Check: $3 \\cdot 5 + 7 = 22$.",
    "She read 19 of 26 pages, so 7 are left to read on day 3.",
    "The answer is 91 2/3",
    "He has 15 cookies now, 3 fewer than his sister.",
    "He reads 15 pages a day for 3 days: 15 * 3 = 45 pages. (This took me 2 minutes.)",
    "import sys\nsys.exit(7)",
}


@pytest.fixture(scope="module")
def verdicts():
    """Per row: (ours, MAmmoTH's); every program runs once per scorer, in parallel."""
    ours = [None] * len(TABLE)
    by_ds = {}
    for i, (ds, *_rest) in enumerate(TABLE):
        by_ds.setdefault(ds, []).append(i)
    for ds, idx in by_ds.items():
        preds = extract_answers(ds, [TABLE[i][1] for i in idx], timeout_s=TIMEOUT)
        for i, p in zip(idx, preds, strict=True):
            ours[i] = is_correct(ds, p, TABLE[i][2])
    progs = [i for i, row in enumerate(TABLE) if "print(" in row[1]]
    runs = run_programs([_mammoth_program(TABLE[i][1]) for i in progs], timeout_s=TIMEOUT)
    printed = {i: (r.stdout if r.ok else "").strip("\n") for i, r in zip(progs, runs, strict=True)}
    theirs = []
    for i, (ds, comp, gold, *_rest) in enumerate(TABLE):
        text = "The answer is " + printed[i] if i in printed else comp
        theirs.append(_mammoth_correct(ds, _mammoth_clean(ds, text), gold))
    return ours, theirs


def test_table_covers_six_formats_and_programs():
    counts = Counter(row[0] for row in TABLE)
    assert len(TABLE) >= 200 and set(counts) == set(scoring._DATASETS)
    assert min(counts.values()) >= 25, counts
    programs = [row for row in TABLE if is_program(row[1])]
    assert len(programs) >= 50 and {row[0] for row in programs} == set(counts)
    assert all(row[4] for row in TABLE)  # every verdict says why
    assert len({(row[0], row[1], row[2]) for row in TABLE}) == len(TABLE)  # no duplicate row
    assert sum(row[3] for row in TABLE) > 0.4 * len(TABLE) > sum(not row[3] for row in TABLE) / 2


def test_our_scorer_gives_the_careful_verdicts(verdicts):
    ours, _ = verdicts
    wrong = [row for row, v in zip(TABLE, ours, strict=True) if v != row[3]]
    assert {row[1] for row in wrong} == KNOWN_MISSES, [row[:4] for row in wrong]


def test_agreement_with_mammoth_is_stated_in_the_docstring(verdicts):
    ours, theirs = verdicts
    careful = [row[3] for row in TABLE]
    n_ours = sum(a == c for a, c in zip(ours, careful, strict=True))
    n_theirs = sum(a == c for a, c in zip(theirs, careful, strict=True))
    n_both = sum(a == b for a, b in zip(ours, theirs, strict=True))
    n_prog = sum(is_program(row[1]) for row in TABLE)
    doc = " ".join(scoring.__doc__.split())
    stated = (f"table of {len(TABLE)} hand-adjudicated completions in the tests (all six formats, "
              f"{n_prog} of them programs;")  # fmt: skip
    assert stated in doc
    assert (f"our scorer agrees with the careful verdict on {n_ours}, MAmmoTH's rules "
            f"(re-implemented in the test from their public code) on {n_theirs}; the two scorers "
            f"agree with each other on {n_both}.") in doc  # fmt: skip
    assert n_ours > n_theirs


def test_every_deviation_from_mammoth_is_a_row_where_we_are_right(verdicts):
    ours, theirs = verdicts
    for row, a, b in zip(TABLE, ours, theirs, strict=True):
        if a != b and row[1] not in KNOWN_MISSES:
            assert a == row[3], row[:4]


def test_execution_flag_scores_the_program_text():
    loop = "x = 0\nwhile x >= 0:\n    x += 1\nprint(x)"
    assert extract_answer("gsm8k", loop, execute=False) == "1"  # the text contains the gold
    assert extract_answers("gsm8k", [loop], timeout_s=0.5) == [None]  # never prints: no answer
    prog = "eggs = 16 - 3 - 4\nprint(eggs * 2)"
    assert extract_answer("gsm8k", prog, execute=False) == "2"  # the digit of `* 2`
    assert extract_answer("gsm8k", prog) == "18"
    assert extract_answer("gsm8k", prog, program_output="7\n") == "7"  # output given: not run
    assert extract_answers("gsm8k", [prog, "so 3 + 4 = 7"], execute=False) == ["2", "7"]


def test_program_source_keeps_the_fenced_code_and_the_prelude():
    src = program_source("Try:\n```python\nx = np.sqrt(4)\nprint(x)\n```\nbye")
    assert src == "import math\nfrom math import *\nimport numpy as np\nx = np.sqrt(4)\nprint(x)\n"
    src = program_source("print(1)\n### Instruction:\nnext")
    assert src == "import math\nfrom math import *\nprint(1)\n"
    assert not is_program("The answer is 5.") and is_program("print (1)") is False


# ----------------------------------------------------------------------------- legacy tables

EXTRACT = [
    # --- GSM8K: "####", triggers, several numbers, commas, units, dollars, run-on generations
    ("gsm8k", "She sold 48/2 = <<48/2=24>>24.\nIn all 48+24 = <<48+24=72>>72.\n#### 72", "72"),
    ("gsm8k", "Each box has 12 eggs, 5 boxes give 60 eggs. The answer is 60.", "60"),
    ("gsm8k", "The answer is: 1,250 dollars, and she keeps 30 for later.", "1250"),
    ("gsm8k", "He earned $1,200.50 in total.", "1200.5"),
    ("gsm8k", "She runs 3 laps of 400 m = 1200 m.", "1200"),
    ("gsm8k", "The answer is 18.\n\n### Instruction:\nWhat is 2+2?\n\nThe answer is 4.", "18"),
    ("gsm8k", "She has -5 degrees, then 7.000 degrees.", "7"),
    ("gsm8k", "I cannot solve this problem.", None),
    ("gsm8k", "", None),
    ("gsm8k", "the answer is 0.50", "0.5"),
    # --- SVAMP / DeepMind: numbers only; fractions survive as strings
    ("svamp", "Jack has 5 apples and gets 3.0 more, so 8.0 in total", "8"),
    ("svamp", "There were 26 - 19 = 7 more.", "7"),
    ("deepmind", "Let q = 3. The answer is -3/4.", "-3/4"),
    ("deepmind", "Solve 2*x + 4 = 0 gives x = -2", "-2"),
    ("deepmind", "The value is unknown.", None),
    # --- NumGLUE: letters if present, else numbers
    ("numglue", "The answer is 12.50 kg", "12.5"),
    ("numglue", "Option B is right. The answer is B.", "B"),
    ("numglue", "So 3 + 4 = 7", "7"),
    ("numglue", "I am not sure.", None),
    # --- MMLU-Math: letters; the word "a" is not the choice (A); parentheses first
    ("mmlu_math", "The answer is (C).", "C"),
    ("mmlu_math", "This is a prime, so the answer is (B) 7", "B"),
    ("mmlu_math", "Among the choices, D fits best.", "D"),
    ("mmlu_math", "a b c", None),
    ("mmlu_math", "The answer is 7", None),
    # --- MATH: "The answer is", boxed with nested braces, \dfrac, units, percent, "x =", none
    ("math", r"The answer is $\boxed{\frac{1}{2}}$.", r"\frac{1}{2}"),
    ("math", r"we get $\boxed{\frac{a^{2}}{\sqrt{b}}}$ and stop", r"\frac{a^{2}}{\sqrt{b}}"),
    ("math", r"Hence $\boxed{\dfrac{\sqrt{3}}{2}}$", r"\frac{\sqrt{3}}{2}"),
    ("math", r"Thus \boxed{\left( 3, \frac{\pi}{2} \right)}", r"(3,\frac{\pi}{2})"),
    ("math", r"The answer is 10\%.", "10"),
    ("math", r"The answer is $x = 5$", "5"),
    ("math", r"The answer is 90^\circ", "90"),
    ("math", r"The answer is 12 \text{ cm}", "12"),
    ("math", r"The answer is \frac12", r"\frac{1}{2}"),
    ("math", r"The answer is 3/4.", r"\frac{3}{4}"),
    ("math", r"The answer is \sqrt3", r"\sqrt{3}"),
    ("math", "First 2, then 3, finally 17 is what we get", "17"),
    ("math", "No numbers here at all", None),
    ("math", "", None),
]


@pytest.mark.parametrize(("dataset", "completion", "expected"), EXTRACT)
def test_extract_answer(dataset, completion, expected):
    assert extract_answer(dataset, completion) == expected


CORRECT = [
    ("gsm8k", "72", "72", True),
    ("gsm8k", "72.00", "72", True),
    ("gsm8k", "1,200", "1200", True),
    ("gsm8k", "71", "72", False),
    ("gsm8k", None, "72", False),
    ("gsm8k", "", "72", False),
    ("svamp", "36/2", "18", True),  # exact value (MAmmoTH's string match would say False)
    ("deepmind", "-3/4", "-0.75", True),
    ("deepmind", "0.3333", "1/3", True),  # a 4-place rounding of a non-terminating gold
    ("deepmind", "0.3", "1/3", False),  # 1 place: too coarse
    ("numglue", "B", "B", True),
    ("numglue", "12.5", "12.50", True),
    ("mmlu_math", "C", "C", True),
    ("mmlu_math", "c", "C", True),
    ("mmlu_math", "B", "C", False),
    ("math", r"\frac{1}{2}", r"\frac{1}{2}", True),
    ("math", "0.5", r"\frac{1}{2}", True),  # MAmmoTH's numeric check
    ("math", "3.2", "3.14", True),  # inside 4 %
    ("math", "3.3", "3.14", False),  # 5.1 % off
    ("math", "5.4", "5", True),  # integer gold: MAmmoTH rounds the prediction
    ("math", "5.6", "5", False),
    ("math", r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}", True),  # math-verify only
    ("math", "x^2+2x", "2x+x^2", True),  # math-verify only
    ("math", r"(1, 2)", r"(1,2)", True),
    ("math", r"\frac{\sqrt{3}}{2}", r"\frac{\sqrt{2}}{2}", False),
    ("math", "x^2-2x", "2x+x^2", False),
    ("math", r"\text{(B)}", r"\text{(B)}", True),
    ("math", None, "3", False),
]


@pytest.mark.parametrize(("dataset", "prediction", "gold", "expected"), CORRECT)
def test_is_correct(dataset, prediction, gold, expected):
    assert is_correct(dataset, prediction, gold) is expected


def test_math_verify_is_consulted_only_after_mammoth_rules(monkeypatch):
    # MAmmoTH wins when it accepts: 3.2 vs 3.14 stays correct even if math-verify says no.
    monkeypatch.setattr(scoring, "_math_verify", lambda p, g: False)
    assert is_correct("math", "3.2", "3.14")
    assert not is_correct("math", "x^2+2x", "2x+x^2")  # only math-verify proves this one


def test_end_to_end_extract_then_score():
    completion = "Tom buys 3 packs of 12 = 36 pens.\n#### 36"
    assert is_correct("gsm8k", extract_answer("gsm8k", completion), "36")
    completion = r"The area is $\boxed{\dfrac{9}{4}\pi}$."
    assert is_correct("math", extract_answer("math", completion), r"\frac{9\pi}{4}")


def test_public_api():
    assert scoring.__all__ == ["extract_answer", "extract_answers", "is_correct", "is_program",
                               "program_source", "program_outputs", "choice_of_value",
                               "parse_choices"]  # fmt: skip


@pytest.mark.parametrize("bad", ["GSM8K", "aqua", "mmlu"])
def test_unknown_dataset(bad):
    with pytest.raises(ValueError, match="unknown dataset"):
        extract_answer(bad, "1")
    with pytest.raises(ValueError, match="unknown dataset"):
        is_correct(bad, "1", "1")


def test_type_errors():
    with pytest.raises(TypeError, match="completion"):
        extract_answer("gsm8k", None)
    with pytest.raises(TypeError, match="gold"):
        is_correct("gsm8k", "1", 1)


# ----------------------------------------------------------------------------- failed programs

FAILS_AFTER_PRINTING = {  # each prints the gold (18) first, then fails: never scored on that
    "raises": "print((16 - 3 - 4) * 2)\nprint(1 / 0)",
    "exits non-zero": "print(18)\nimport sys\nsys.exit(1)",
    "times out": "print(18, flush=True)\nwhile True:\n    pass",
    "hits the memory limit": "print(18, flush=True)\nx = bytearray(8 << 30)",
    "hits the output cap": "print(18)\nwhile True:\n    print('.' * 99)",
}


def test_a_program_that_prints_then_fails_is_not_scored_on_its_partial_output():
    """MAmmoTH's executor returns nothing for a failed program; so do we, whatever it printed."""
    comps = list(FAILS_AFTER_PRINTING.values())
    outs = scoring.program_outputs(comps, timeout_s=2.0)
    assert outs == [""] * len(comps), dict(zip(FAILS_AFTER_PRINTING, outs, strict=True))
    assert extract_answers("gsm8k", comps, timeout_s=2.0) == [None] * len(comps)
    for c in comps:
        assert not is_correct("gsm8k", extract_answer("gsm8k", c, program_output=""), "18")
    # the partial output really holds the gold: the sandbox saw it printed before the failure
    raw = run_programs([program_source(c) for c in comps], timeout_s=2.0)
    assert all(r.stdout.startswith("18\n") and not r.ok for r in raw), raw
    ok = scoring.program_outputs(["print(18)"], timeout_s=60.0)
    assert ok == ["18\n"]  # the same print, from a program that ends well, is kept


# ----------------------------------------------------------------------------- issue 36

_Q = "What is 15% of 80?\nAnswer Choices: (A) 14 (B) 10 (C) 12 (D) 1/2"


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("15% of 80 is 15/100 * 80 = 12.\nThe answer is 12.", "C"),  # value only -> its option
        ("80 * 0.15 = 12", "C"),  # no trigger: the last number
        ("The answer is 12.5.", None),  # no option has that value
        ("The answer is 0.5.", "D"),  # values, not strings: 0.5 = 1/2
        ("It is 12, so the answer is (A).", "A"),  # a stated letter wins over a value
        ("The answer is (B).", "B"),
        ("I do not know.", None),
    ],
)
def test_a_stated_value_maps_to_its_option(completion, expected):
    """Hand-written completions: a value without a letter is mapped to the option holding it."""
    choices = scoring.parse_choices(_Q)
    assert choices == {"A": "14", "B": "10", "C": "12", "D": "1/2"}
    assert scoring.choice_of_value(completion, choices) == expected
    # the letter scoring alone: a value is no letter
    if expected is not None and "(" not in completion:
        assert extract_answer("mmlu_math", completion) is None


def test_both_multiple_choice_scorings_in_the_evaluation(tmp_path):
    """evaluate_benchmarks reports the letter scoring and the mapped one (per-item rows too)."""
    import json

    from llm_validation.data.records import Benchmark, BenchmarkItem
    from llm_validation.evaluate import generation

    items = (BenchmarkItem(_Q, "C", 0), BenchmarkItem(_Q, "C", 1), BenchmarkItem(_Q, "A", 2))
    comps = iter(["The answer is 12.", "The answer is (C).", "The answer is 14."])
    bench = {"mmlu_math": Benchmark("mmlu_math", tmp_path / "m.json", items)}
    orig = generation.generate
    generation.generate = lambda model, tok, prompts, **kw: [next(comps) for _ in prompts]
    try:
        s = generation.evaluate_benchmarks(None, None, bench, tmp_path, execute=False)
    finally:
        generation.generate = orig
    assert s["mmlu_math"]["correct"] == 1 and s["mmlu_math"]["correct_mapped"] == 3
    rows = [json.loads(x) for x in (tmp_path / "mmlu_math.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in rows] == [False, True, False]
    assert [r["correct_mapped"] for r in rows] == [True, True, True]
