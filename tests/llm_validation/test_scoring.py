"""Answer extraction and scoring on tables of real-looking completions (style rule 15).

Expected answers are written by hand from the MAmmoTH rules stated in the module docstring, not
computed by the code under test.
"""

from __future__ import annotations

import pytest

pytest.importorskip("math_verify")

from llm_validation import scoring  # noqa: E402
from llm_validation.scoring import extract_answer, is_correct  # noqa: E402

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
    ("deepmind", "0.3333", "1/3", False),  # no tolerance outside MATH
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


def test_public_api_is_two_functions():
    assert scoring.__all__ == ["extract_answer", "is_correct"]


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
