"""The generated corpus: determinism, structure, exact answers checked by independent solvers."""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from collections import Counter
from fractions import Fraction

import pytest

from llm_validation.data.corpus import (
    SOURCES,
    contamination,
    generate_benchmarks,
    generate_corpus,
    write_corpus,
)
from llm_validation.data.records import BENCHMARKS, load_benchmark, load_mathinstruct
from llm_validation.evaluate.scoring import extract_answer, is_correct


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus(6000, seed=0)


def test_deterministic_and_sized(corpus):
    assert generate_corpus(50, seed=3) == generate_corpus(50, seed=3)
    assert generate_corpus(50, seed=3) != generate_corpus(50, seed=4)
    assert len(corpus) == 6000
    assert len({r["instruction"] for r in corpus}) == 6000  # no duplicate problems


def test_sources_imbalanced_with_levels_and_styles(corpus):
    counts = Counter(r["source"] for r in corpus)
    assert len(counts) == len(SOURCES) == 13
    assert max(counts.values()) / min(counts.values()) > 10  # MathInstruct-like imbalance
    for name in counts:
        levels = {r["level"] for r in corpus if r["source"] == name}
        extra = next(s.extra_levels for s in SOURCES if s.name == name)
        # issue 36: the rarest sources are drawn two levels up (more steps): 3 and 4 only
        assert levels == set(range(1 + extra, 5)), name
    assert {r["style"] for r in corpus} == {"cot", "gsm", "boxed", "code"}


def _solve(rec):
    """Recompute a record's answer from its question alone (independent of the generator)."""
    q, src = rec["instruction"], rec["source"]
    nums = [int(x) for x in re.findall(r"-?\d+", q)]
    if src.endswith("arithmetic.json"):
        return Fraction(eval(q[len("Calculate ") : -1]))  # noqa: S307 - our own arithmetic text
    if src.endswith("modular.json"):
        return Fraction(nums[0] % nums[1])
    if src.endswith("gcd_lcm.json"):
        a, b = nums
        return Fraction(math.gcd(a, b) if "greatest" in q else math.lcm(a, b))
    if src.endswith("linear_equations.json"):
        sides = q.split("$")[3].split("=")
        coef = [int(x) for x in re.findall(r"-?\d+", sides[0])]
        rhs = [int(x) for x in re.findall(r"-?\d+", sides[1])]
        if len(rhs) == 1:  # a x + b = c
            return Fraction(rhs[0] - coef[1], coef[0])
        return Fraction(rhs[1] - coef[1], coef[0] - rhs[0])  # a x + b = c x + d
    if src.endswith("counting.json"):
        if "or of" in q:
            n, k, m = nums[1], nums[2], nums[3]
            return Fraction(sum(1 for i in range(1, n + 1) if i % k == 0 or i % m == 0))
        if "between" in q:
            k, lo, hi = nums
            return Fraction(sum(1 for i in range(lo, hi + 1) if i % k == 0))
        k, n = nums[0], nums[2]
        return Fraction(sum(1 for i in range(1, n + 1) if i % k == 0))
    if src.endswith("word_problems_code.json"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(rec["output"], {})  # noqa: S102 - our own generated program
        return Fraction(out.getvalue().strip()).limit_denominator(10_000)
    return None


def test_answers_are_exact(corpus):
    checked = Counter()
    for rec in corpus:
        want = _solve(rec)
        if want is None:
            continue
        assert Fraction(rec["answer"]) == want, rec
        checked[rec["source"]] += 1
    assert len(checked) == 6 and min(checked.values()) > 50


def test_solutions_end_in_their_style_and_score_correct(corpus):
    for rec in corpus[:1500]:
        out = rec["output"]
        if rec["style"] == "gsm":
            assert re.search(r"\n#### -?\d+$", out)
            assert is_correct("gsm8k", extract_answer("gsm8k", out), rec["answer"])
        elif rec["style"] == "boxed":
            assert "\\boxed{" in out
            assert is_correct("math", extract_answer("math", out), rec["answer"])
        elif rec["style"] == "cot":
            assert out.endswith(".") and "The answer is " in out
            ds = "mmlu_math" if "Answer Choices" in rec["instruction"] else "deepmind"
            gold = rec["answer"].strip("()")
            assert is_correct(ds, extract_answer(ds, out), gold), out
        else:
            assert out.endswith("print(total)")


def test_noise_corrupts_the_final_answer_only():
    clean = generate_corpus(3000, seed=2)
    noisy = generate_corpus(3000, seed=2, noise_rate=0.1)
    rate = sum(r["corrupted"] for r in noisy) / len(noisy)
    assert 0.08 < rate < 0.12
    for r in noisy:
        ds = "math" if r["style"] == "boxed" else "deepmind"
        if (
            r["corrupted"]
            and r["style"] in ("boxed", "gsm")
            or (r["corrupted"] and r["style"] == "cot" and "Answer Choices" not in r["instruction"])
        ):
            assert not is_correct(ds, extract_answer(ds, r["output"]), r["answer"]), r
    assert not any(r["corrupted"] for r in clean)


def test_benchmarks_in_every_format_with_correct_golds(tmp_path):
    paths = write_corpus(tmp_path, n_train=400, n_pretrain=400, n_test=40, seed=0)
    train = load_mathinstruct(paths["train"])
    pre = load_mathinstruct(paths["pretrain"])
    seen = {e.instruction for e in train} | {e.instruction for e in pre}
    assert not ({e.instruction for e in train} & {e.instruction for e in pre})
    for name in BENCHMARKS:
        b = load_benchmark(name, root=paths["benchmarks"])
        assert len(b) == 40
        assert not any(it.question in seen for it in b.items), name
    dm = load_benchmark("deepmind", root=paths["benchmarks"])
    for it in dm.items:  # independent solutions of the DeepMind-style phrasings
        q = it.question
        if q.startswith("Evaluate "):
            want = Fraction(eval(q[len("Evaluate ") : -1]))  # noqa: S307
        elif q.startswith("Let f(x)"):
            m, k, x = (int(v) for v in re.findall(r"-?\d+", q.replace("f(x)", "")))
            want = Fraction(m * x + k)
        elif "tens digit" in q:
            want = Fraction(int(re.findall(r"\d+", q)[0]) // 10 % 10)
        elif q.startswith("Round"):
            v = Fraction(re.findall(r"\d+\.\d+", q)[0])
            want = Fraction(math.floor(v * 10 + Fraction(1, 2)), 10)
        elif q.startswith("Calculate "):  # the in-distribution half: training phrasings
            want = Fraction(eval(q[len("Calculate ") : -1]))  # noqa: S307
        elif "remainder" in q:
            a, b = (int(v) for v in re.findall(r"\d+", q))
            want = Fraction(a % b)
        else:
            a, b = (int(v) for v in re.findall(r"-?\d+", q))
            want = Fraction(a, b)
        assert Fraction(it.answer) == want, q
    mm = load_benchmark("mmlu_math", root=paths["benchmarks"])
    assert all(it.answer in "ABCD" and "Answer Choices: (A)" in it.question for it in mm.items)
    sv = load_benchmark("svamp", root=paths["benchmarks"])
    assert all(not it.answer.endswith(".0") for it in sv.items)


def test_bad_arguments():
    with pytest.raises(ValueError, match="`n` must be a positive int"):
        generate_corpus(0)
    with pytest.raises(ValueError, match="`noise_rate`"):
        generate_corpus(5, noise_rate=1.0)
    assert len(generate_benchmarks(3, seed=0)["gsm8k"]) == 3


def test_heldout_split_is_clean_disjoint_and_from_the_training_sources(tmp_path):
    paths = write_corpus(tmp_path, n_train=300, n_test=20, n_heldout=200, seed=3, noise_rate=0.2)
    train = json.loads(paths["train"].read_text())
    held = json.loads(paths["heldout"].read_text())
    assert len(held) == 200
    assert not any(r["corrupted"] for r in held)  # the held-out loss has no irreducible part
    assert any(r["corrupted"] for r in train)
    assert not ({r["instruction"] for r in held} & {r["instruction"] for r in train})
    bench_q = {
        it.question
        for name in BENCHMARKS
        for it in load_benchmark(name, root=paths["benchmarks"]).items
    }
    assert not ({r["instruction"] for r in held} & bench_q)
    # same source mix as training: every source with >= 5 % weight appears
    big = {s.name for s in SOURCES if s.weight / sum(t.weight for t in SOURCES) >= 0.05}
    assert big <= {r["source"] for r in held}
    for r in held:  # clean: the solution's final answer is the exact answer
        if r["style"] in ("boxed", "gsm"):
            ds = "math" if r["style"] == "boxed" else "deepmind"
            assert is_correct(ds, extract_answer(ds, r["output"]), r["answer"]), r
    assert write_corpus(tmp_path / "none", n_train=50, n_test=5)["heldout"] is None
    with pytest.raises(ValueError, match="n_heldout"):
        write_corpus(tmp_path / "bad", n_train=50, n_test=5, n_heldout=-1)


def test_corpus_cli_writes_every_split(tmp_path, capsys):
    from llm_validation.__main__ import main

    out = tmp_path / "c"
    argv = ["corpus", "--out", str(out), "--n-train", "60", "--n-test", "5", "--n-pretrain", "40",
            "--n-heldout", "30", "--seed", "2", "--noise-rate", "0.1"]  # fmt: skip
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "30 held-out problems" in said and "40 pre-training" in said
    assert len(json.loads((out / "heldout.json").read_text())) == 30
    assert len(load_mathinstruct(out / "MathInstruct.json")) == 60
    assert len(load_benchmark("gsm8k", root=out / "dataset")) == 5
    assert main(["corpus", "--out", str(tmp_path / "d"), "--n-heldout", "-3"]) == 2
    assert "n_heldout" in capsys.readouterr().err


# ----------------------------------------------------------------------------- decontamination
# An independent notion of near-duplicate, written without the generator's keys, names or items:
# the same multiset of numbers (exact signed values, in any order: issue 36, a swapped pair is a
# duplicate), and the same words except for single-word substitutions (a name or an item
# swapped; the same template).

_NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:/\d+)?")


def _numbers_and_words(question: str):
    text = question.replace("$", " ").replace(",", " ")
    nums = tuple(sorted(Fraction(x) for x in _NUM.findall(text)))
    words = re.findall(r"[A-Za-z]+|[^\sA-Za-z\d.\-/]", _NUM.sub(" ", text))
    return nums, words


def _index(reference) -> dict:
    by_numbers = {}
    for q in reference:
        for part in {q, q.split("\nAnswer Choices")[0]}:
            nums, words = _numbers_and_words(part)
            if nums:
                by_numbers.setdefault(nums, []).append(words)
    return by_numbers


def _near_duplicates(questions, reference) -> list[str]:
    """The ``questions`` that near-duplicate a problem of ``reference`` (an :func:`_index`)."""
    by_numbers = reference if isinstance(reference, dict) else _index(reference)
    found = []
    for q in questions:
        for part in {q, q.split("\nAnswer Choices")[0]}:
            nums, words = _numbers_and_words(part)
            for other in by_numbers.get(nums, []):
                same_shape = len(other) == len(words)
                if same_shape and all(
                    a == b or (a.isalpha() and b.isalpha())
                    for a, b in zip(words, other, strict=True)
                ):
                    found.append(q)
                    break
            else:
                continue
            break
    return found


@pytest.fixture(scope="module")
def fresh_corpus(tmp_path_factory):
    """A fresh corpus of the size the issue measured on (3000 training, 3000 pre-training)."""
    folder = tmp_path_factory.mktemp("fresh")
    paths = write_corpus(folder, n_train=3000, n_pretrain=3000, n_test=200, n_heldout=500, seed=5)
    reference = [e.instruction for e in load_mathinstruct(paths["train"])]
    reference += [e.instruction for e in load_mathinstruct(paths["pretrain"])]
    tests = {n: [it.question for it in load_benchmark(n, root=paths["benchmarks"]).items]
             for n in BENCHMARKS}  # fmt: skip
    tests["heldout"] = [r["instruction"] for r in json.loads(paths["heldout"].read_text())]
    return paths, reference, tests


def test_no_near_duplicate_in_any_benchmark_or_the_heldout_split(fresh_corpus):
    paths, reference, tests = fresh_corpus
    index = _index(reference)
    for name, qs in tests.items():
        assert _near_duplicates(qs, index) == [], name
    report = json.loads(paths["contamination"].read_text())
    for name, qs in tests.items():
        assert report[name]["n"] == len(qs) and report[name]["exact"] == report[name]["near"] == 0


def test_the_check_finds_the_leaks_of_an_unprotected_split(fresh_corpus):
    # control: the same generators without the exclusion leak, as the issue measured
    _, reference, _ = fresh_corpus
    index = _index(reference)
    leaky = generate_benchmarks(200, seed=11)
    gsm = _near_duplicates([r["question"] for r in leaky["gsm8k"]], index)
    assert len(gsm) > 3  # wider number spaces (issue 36) leak less, but still leak
    held = generate_corpus(500, seed=12, exclude=set(reference))  # exact exclusion only
    assert len(_near_duplicates([r["instruction"] for r in held], index)) > 10
    # and contamination() counts them too
    rep = contamination({"gsm8k": [r["question"] for r in leaky["gsm8k"]]}, reference)
    assert rep["gsm8k"]["near"] >= len(gsm)


def test_template_overlap_in_distribution_by_design_and_deepmind_phrasing_new(fresh_corpus):
    paths, reference, tests = fresh_corpus
    report = json.loads(paths["contamination"].read_text())
    assert report["heldout"]["template_overlap"] > 0.9
    for name in BENCHMARKS:  # issue 36: every format has both halves
        assert report[f"{name}/id"]["n"] == report[f"{name}/ood"]["n"] == 100, name
        assert report[f"{name}/id"]["template_overlap"] > 0.9, name  # training templates
        assert report[f"{name}/ood"]["template_overlap"] == 0.0, name  # held-out phrasings

    def skeleton(q):  # independent of the generator's template_key: numbers only abstracted
        return _NUM.sub("#", q.split("\nAnswer Choices")[0])

    train_skeletons = {skeleton(q) for q in reference}
    assert not any(skeleton(q) in train_skeletons for q in tests["deepmind"][100:])  # ood half
    starts = {q.split()[0] for q in reference}
    assert "Evaluate" not in starts and any(q.startswith("Evaluate ") for q in tests["deepmind"])


def test_scratch_tokenizer_splits_numbers_into_single_digits(tmp_path):
    """The from-scratch tokenizer (issue 29): every digit is its own token, even numbers that
    occur hundreds of times in its training texts (BPE would merge them), and a number
    round-trips digit by digit through a saved-and-reloaded copy."""
    from transformers import AutoTokenizer

    from llm_validation.models.tiny import train_tokenizer

    texts = [
        f"Calculate 1250 + {i}. 1250 + {i} = {1250 + i}. The answer is 1250." for i in range(300)
    ]
    train_tokenizer(texts, vocab_size=400, save_dir=tmp_path)
    tok = AutoTokenizer.from_pretrained(tmp_path)
    for number in ("1250", "90417", "-3.25", "7/12"):
        text = f"The answer is {number}."
        ids = tok(text, add_special_tokens=False)["input_ids"]
        pieces = [tok.decode([i]) for i in ids]
        digits = [p for p in pieces if any(c.isdigit() for c in p)]
        # each digit of the number is exactly one token, in order
        assert digits == [c for c in number if c.isdigit()], (number, pieces)
        assert tok.decode(ids) == text
    # a frequent word is still merged (BPE works): fewer tokens than characters
    assert len(tok("answer", add_special_tokens=False)["input_ids"]) < len("answer")


def test_levels_restrict_every_split(tmp_path):
    """``levels`` (issue 29's difficulty lever) restricts training, held-out and benchmarks."""
    from llm_validation.data.corpus import generate_benchmarks, generate_corpus, write_corpus

    recs = generate_corpus(400, seed=3, levels=(1, 2))
    extra = {src.name: src.extra_levels for src in SOURCES}  # issue 36: rare sources 2 up
    assert {r["level"] - extra[r["source"]] for r in recs} == {1, 2}
    # gsm templates: level 3 adds "Then ... buys", level 4 "shares" (gen_gsm); never at 1-2
    gsm = [r["instruction"] for r in recs if r["source"].endswith("gsm_templates.json")]
    assert gsm and not any("buys" in q or "shares" in q for q in gsm)
    assert any(" gives away " in q for q in gsm)  # level 2 is drawn
    bench = [r for r in generate_benchmarks(60, seed=4, levels=(1, 2))["gsm8k"]
             if r["split"] == "id"]  # fmt: skip
    assert not any("buys" in r["question"] or "shares" in r["question"] for r in bench)
    assert any("shares" in r["question"] for r in generate_benchmarks(60, seed=4)["gsm8k"])
    paths = write_corpus(tmp_path, n_train=60, n_test=4, n_heldout=30, levels=(3,))
    for key in ("train", "heldout"):
        recs = json.loads(paths[key].read_text())
        assert {min(4, 3 + extra[r["source"]]) for r in recs} == {r["level"] for r in recs}
    for bad in [(), (0, 1), (1, 1), (5,), (True,)]:
        with pytest.raises(ValueError, match="`levels` must be distinct difficulty levels"):
            generate_corpus(5, levels=bad)


# ----------------------------------------------------------------------------- issue 36


def test_a_swapped_number_duplicate_is_caught():
    """Decontamination is order-insensitive: a training problem with two numbers swapped
    (gcd(b, a) of a training gcd(a, b)) is a near-duplicate, excluded and counted."""
    train = ["Find the greatest common divisor of 12 and 18.",
             "Ann has 7 boxes with 9 pencils in each box. How many pencils does Ann have now?"]
    swapped = ["Find the greatest common divisor of 18 and 12.",
               "Ben has 9 boxes with 7 apples in each box. How many apples does Ben have now?"]
    rep = contamination({"x": swapped}, train)
    assert rep["x"]["near"] == 2 and rep["x"]["exact"] == 0
    assert len(_near_duplicates(swapped, train)) == 2  # the independent check agrees
    # the generator: a reference made of every leaky item with its first two numbers swapped
    leaky = generate_benchmarks(40, seed=21)
    ref = set()
    for name in ("gsm8k", "math", "numglue", "deepmind"):
        for r in leaky[name]:
            nums = re.findall(r"\d+", r["question"])
            if len(nums) >= 2 and nums[0] != nums[1]:
                a, b = nums[:2]
                ref.add(re.sub(rf"\b{a}\b|\b{b}\b", lambda m, a=a, b=b: b if m[0] == a else a,
                               r["question"]))  # fmt: skip
    assert len(_near_duplicates([r["question"] for n in leaky for r in leaky[n]
                                 if n in ("gsm8k", "math", "numglue", "deepmind")], ref)) > 50
    clean = generate_benchmarks(40, seed=21, exclude=ref)
    for name in ("gsm8k", "math", "numglue", "deepmind"):
        assert _near_duplicates([r["question"] for r in clean[name]], ref) == [], name


def test_no_problem_repeats_within_a_benchmark(fresh_corpus):
    _, _, tests = fresh_corpus
    for name in BENCHMARKS:
        keys = [_numbers_and_words(q.split("\nAnswer Choices")[0]) for q in tests[name]]
        by_nums: dict = {}
        for nums, words in keys:
            by_nums.setdefault(nums, []).append(words)
        for nums, group in by_nums.items():  # same numbers: never the same template
            for i, w in enumerate(group):
                for v in group[i + 1 :]:
                    same = len(v) == len(w) and all(
                        a == b or (a.isalpha() and b.isalpha()) for a, b in zip(w, v, strict=True)
                    )
                    assert not same, (name, nums)


def test_multiple_choice_gold_letters_are_balanced():
    """Training multiple choice (5 options) and the MMLU-format benchmark (4): each letter's
    share of 400 items within 10 points of uniform (issue 36: sorted options made B 55 %)."""
    mc = "data/CoT/multiple_choice.json"
    recs = [r for r in generate_corpus(8000, seed=7) if r["source"] == mc]
    letters = Counter(r["answer"].strip("()") for r in recs[:400])
    assert len(recs) >= 400 and set(letters) == set("ABCDE")
    n = min(400, len(recs))
    assert all(abs(c / n - 1 / 5) <= 0.10 for c in letters.values()), letters
    mm = generate_benchmarks(400, seed=8)["mmlu_math"]
    key = Counter("ABCD"[r["answer"]] for r in mm)
    assert set(key) == set("ABCD") and all(abs(c / 400 - 1 / 4) <= 0.10 for c in key.values())
    assert all(len(set(r["choices"])) == 4 for r in mm)
