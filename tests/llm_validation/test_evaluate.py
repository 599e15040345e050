"""Batched greedy generation, benchmark scoring files, the Table 2 layout, synthesis parsing."""

from __future__ import annotations

import json

import pytest
import torch

from llm_validation.data.records import BENCHMARKS, load_benchmark
from llm_validation.evaluate import generation as ev
from llm_validation.evaluate.generation import (
    accuracy_table,
    cut_at_stop,
    evaluate_benchmarks,
    generate,
)
from llm_validation.models.registry import load_model
from llm_validation.select.synthesis import (
    SYNTHESIS_PROMPT,
    build_prompt,
    parse_question,
    synthesize,
)


def test_batched_left_padded_generation_equals_one_by_one(tiny_model_dir):
    model, tok = load_model(tiny_model_dir, device="cpu", padding_side="left")
    prompts = ["What is 2 + 3?", "Tom has 12 apples and buys 30 more. How many apples now?",
               "Compute 7 times 8.", "x"]  # fmt: skip
    batched = generate(model, tok, prompts, max_new_tokens=12, batch_size=4)
    single = [generate(model, tok, [p], max_new_tokens=12, batch_size=1)[0] for p in prompts]
    assert batched == single
    # greedy = argmax continuation, checked by hand for the first prompt
    ids = torch.tensor([tok(prompts[0])["input_ids"]])
    new = []
    for _ in range(12):
        with torch.no_grad():
            nxt = int(model(input_ids=ids).logits[0, -1].argmax())
        if nxt == tok.eos_token_id:
            break
        new.append(nxt)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)
    assert batched[0] == tok.decode(new, skip_special_tokens=True)


def test_cut_at_stop():
    text = "The answer is 4.\n\n### Instruction:\nNext problem"
    assert cut_at_stop(text, ("### Instruction", "Problem:")) == "The answer is 4.\n\n"
    assert cut_at_stop("no stop", ("###",)) == "no stop"


def test_evaluate_benchmarks_scores_and_resumes(data_files, tmp_path, monkeypatch):
    _, root = data_files
    benches = {n: load_benchmark(n, root=root) for n in ("gsm8k", "mmlu_math")}
    golds = {n: [it.answer for it in b.items] for n, b in benches.items()}
    calls = []

    def fake_generate(model, tok, prompts, **kw):
        name = kw["desc"]
        calls.append(name)
        outs = []
        for i, _ in enumerate(prompts):  # right on even items, wrong on odd, none on the last
            g = golds[name][i]
            if i == len(prompts) - 1:
                outs.append("I do not know.")
            elif name == "gsm8k" and i == 1:  # a program printing the gold; its text ends in 1
                outs.append(f"total = {int(g) - 1}\nprint(total + 1)")
            elif name == "gsm8k":
                outs.append(f"So the total is {int(g) + (i % 2)}.\n#### {int(g) + (i % 2)}")
            else:
                outs.append(f"The answer is ({g if i % 2 == 0 else 'A'}).")
        return outs

    monkeypatch.setattr(ev, "generate", fake_generate)
    scores = evaluate_benchmarks(None, None, benches, tmp_path)
    # 6 items: right on 0, 2, 4 and on the program (1, run); wrong on 3; no answer on 5
    assert scores["gsm8k"] == {"accuracy": 4 / 6, "correct": 4, "n": 6, "no_answer": 1,
                               "programs": 1, "programs_correct": 1, "programs_correct_text": 0,
                               "execute": True}  # fmt: skip
    assert scores["mmlu_math"]["correct"] == 3  # gold is B: "(A)" on odd items is wrong
    assert scores["mmlu_math"]["programs"] == 0
    rows = [json.loads(x) for x in (tmp_path / "gsm8k.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in rows] == [True, True, True, False, True, False]
    assert [r["correct_text"] for r in rows] == [True, False, True, False, True, False]
    assert rows[1]["program"] and rows[1]["program_output"] == f"{golds['gsm8k'][1]}\n"
    assert rows[1]["prediction"] == golds["gsm8k"][1] and rows[1]["prediction_text"] == "1"
    assert rows[5]["prediction"] is None and not rows[0]["program"]
    saved = json.loads((tmp_path / "scores.json").read_text())
    assert saved["scores"]["gsm8k"]["accuracy"] == 4 / 6
    evaluate_benchmarks(None, None, benches, tmp_path)  # resume: nothing regenerated
    assert calls == ["gsm8k", "mmlu_math"]
    # execution off: the program is scored on its text ("1"), as before issue 20
    off = evaluate_benchmarks(None, None, {"gsm8k": benches["gsm8k"]}, tmp_path / "off",
                              execute=False)  # fmt: skip
    assert off["gsm8k"]["correct"] == 3 and off["gsm8k"]["programs"] == 1
    assert off["gsm8k"]["programs_correct"] == 0 and off["gsm8k"]["execute"] is False


def test_accuracy_table_layout():
    res = {"PT": {"gsm8k": 0.066, "math": 0.059}, "FT": {"gsm8k": 0.590, "math": 0.361},
           "FT+UP": {"gsm8k": 0.596, "math": 0.379}}  # fmt: skip
    t = accuracy_table(res, sizes={"gsm8k": 1319, "math": 5000}).splitlines()
    assert t[0] == "| Dataset | #Inst. | PT | FT | FT+UP |"
    assert t[2] == "| GSM8K | 1319 | 6.6 | **59.0** | **59.6** |"  # within 1 point: both bold
    assert t[3] == "| MATH | 5000 | 5.9 | 36.1 | **37.9** |"
    assert t[4] == "| Avg. | 3159 | 6.2 | 47.5 | **48.8** |"  # Table 2 averages the rows
    assert BENCHMARKS[0] == "gsm8k"


# ----------------------------------------------------------------------------- synthesis

PARSE = [
    ("<question>\nFind 3 + 4.\n</question>\n<verification>ok", ("Find 3 + 4.", "ok")),
    (
        "Step 1 ... <question>Draft</question> revised: <question>Final one?</question>",
        ("Final one?", "ok"),
    ),
    ("I could not do it.", (None, "no_question_tag")),
    ("<question>   </question>", (None, "empty")),
    (
        "<question>[Your verified problem - do NOT include the solution]</question>",
        (None, "placeholder"),
    ),
    ("<question>What is 2 + 2?</question>", (None, "copy_of_original")),
]


@pytest.mark.parametrize(("text", "expected"), PARSE)
def test_parse_question(text, expected):
    assert parse_question(text, original="What is 2 + 2?", solution="2 + 2 = 4") == expected


def test_parse_question_rejects_solution_leak_and_long():
    sol = "We add: 12 + 30 = 42. The answer is 42."
    assert parse_question(f"<question>Solve. {sol}</question>", solution=sol)[1] == (
        "contains_solution"
    )
    assert parse_question("<question>" + "a" * 50 + "</question>", max_chars=10)[1] == "too_long"


def test_prompt_is_appendix_e(tokenizer):
    p = build_prompt("x = 5")
    assert p.startswith("You are creating a math problem with this EXACT target solution:")
    assert "<solution>\nx = 5\n</solution>" in p
    assert '[Brief confirmation: "Verified - solving gives x = 5"]' in p
    assert SYNTHESIS_PROMPT.count("{soln}") == 2


def test_synthesize_filters(monkeypatch, tiny_model_dir):
    from llm_validation.data.records import Example
    from llm_validation.evaluate import generation as evaluate

    outs = ["<question>Find the sum of 3 and 4.", "nothing useful", "<question>\n</question>"]
    monkeypatch.setattr(evaluate, "generate", lambda *a, **k: list(outs))
    exs = [Example(f"q{i}", "3 + 4 = 7. The answer is 7.", "s", 10 + i) for i in range(3)]
    res = synthesize(exs, None, None)
    assert [e.instruction for e in res.examples] == ["Find the sum of 3 and 4."]
    assert res.examples[0].output == exs[0].output and res.examples[0].index == 10
    assert res.rejected == {"no_question_tag": 1, "empty": 1}
    assert res.acceptance == pytest.approx(1 / 3)
