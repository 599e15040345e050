from __future__ import annotations

import json

import numpy as np
import pytest

from llm_validation.data.records import (
    BENCHMARKS,
    IGNORE_INDEX,
    DataFormatError,
    Example,
    format_prompt,
    load_benchmark,
    load_mathinstruct,
    split_train_val,
    tokenize_examples,
)


def test_load_mathinstruct_json_and_jsonl(tmp_path, records):
    arr = tmp_path / "a.json"
    arr.write_text(json.dumps(records[:5], indent=2))
    jl = tmp_path / "a.jsonl"
    jl.write_text("\n".join(json.dumps(r) for r in records[:5]) + "\n\n")
    a, b = load_mathinstruct(arr), load_mathinstruct(jl)
    assert a == b
    assert [e.index for e in a] == [0, 1, 2, 3, 4]
    assert a[1].source == "data/CoT/gsm_style.json"
    assert a[0].output.endswith(f"The answer is {eval(a[0].instruction[8:-1])}.")


def test_malformed_training_files_name_file_line_field(tmp_path):
    good = {"instruction": "q", "output": "a", "source": "s"}
    p = tmp_path / "m.jsonl"
    p.write_text(json.dumps(good) + "\n" + json.dumps({"instruction": "q", "source": "s"}) + "\n")
    with pytest.raises(DataFormatError, match=r"m\.jsonl:2: missing field 'output'"):
        load_mathinstruct(p)
    p.write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(DataFormatError, match=r"m\.jsonl:2: invalid JSON"):
        load_mathinstruct(p)
    arr = tmp_path / "m.json"
    arr.write_text('[\n {"instruction": "q", "output": "a", "source": "s"},\n'
                   ' {"instruction": 3, "output": "a", "source": "s"}\n]')  # fmt: skip
    with pytest.raises(DataFormatError, match=r"m\.json:3: field 'instruction' must be str"):
        load_mathinstruct(arr)
    arr.write_text('[{"instruction": "q", "output": "  ", "source": "s"}]')
    with pytest.raises(DataFormatError, match=r"m\.json:1: field 'output' is empty"):
        load_mathinstruct(arr)
    with pytest.raises(DataFormatError, match="does not exist"):
        load_mathinstruct(tmp_path / "missing.json")
    (tmp_path / "e.json").write_text("")
    with pytest.raises(DataFormatError, match="empty"):
        load_mathinstruct(tmp_path / "e.json")


def test_split_is_seeded_and_disjoint():
    ex = [Example(str(i), str(i), "s", i) for i in range(200)]
    tr, va = split_train_val(ex, val_fraction=0.05, seed=42)
    assert len(tr) == 190 and len(va) == 10
    assert {e.index for e in tr}.isdisjoint({e.index for e in va})
    tr2, va2 = split_train_val(ex, val_fraction=0.05, seed=42)
    assert [e.index for e in va] == [e.index for e in va2]
    _, va3 = split_train_val(ex, val_fraction=0.05, seed=0)
    assert [e.index for e in va] != [e.index for e in va3]
    # The validation set is the last 5 % of a seeded permutation (the authors' rule).
    perm = np.random.default_rng(42).permutation(200)
    assert sorted(e.index for e in va) == sorted(perm[190:].tolist())


def test_prompt_is_alpaca_no_input():
    p = format_prompt("What is 2+2?")
    assert p.startswith("Below is an instruction that describes a task. Write a response")
    assert p.endswith("### Instruction:\nWhat is 2+2?\n\n### Response:")


def test_labels_cover_response_tokens_only(tokenizer):
    ex = [Example("What is 3 + 4?", "3 + 4 = 7. The answer is 7.", "s", 0)]
    (rec,) = tokenize_examples(ex, tokenizer, max_length=512)
    ids, labels = rec["input_ids"], rec["labels"]
    n_prompt = len(tokenizer(format_prompt(ex[0].instruction))["input_ids"])
    assert labels[:n_prompt] == [IGNORE_INDEX] * n_prompt
    assert labels[n_prompt:] == ids[n_prompt:]
    assert ids[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(ids[n_prompt:-1]) == ex[0].output
    assert rec["n_response"] == len(ids) - n_prompt
    # Truncation cuts the response on the right; a prompt filling the window keeps no label.
    (cut,) = tokenize_examples(ex, tokenizer, max_length=n_prompt + 3)
    assert len(cut["input_ids"]) == n_prompt + 3 and cut["n_response"] == 3
    (none,) = tokenize_examples(ex, tokenizer, max_length=n_prompt - 2)
    assert none["n_response"] == 0 and set(none["labels"]) == {IGNORE_INDEX}


def test_benchmarks_load_in_mammoth_formats(data_files):
    _, root = data_files
    got = {name: load_benchmark(name, root=root) for name in BENCHMARKS}
    assert {k: len(v) for k, v in got.items()} == dict.fromkeys(BENCHMARKS, 6)
    g = got["gsm8k"].items[0]
    assert g.answer == str(sum(int(t) for t in g.question.replace("?", "").split() if t.isdigit()))
    assert "," not in got["gsm8k"].items[0].answer  # "1,234" -> "1234"
    assert got["svamp"].items[0].question.endswith("how many?")
    assert not got["svamp"].items[0].answer.endswith(".0")
    assert got["math"].items[0].answer.startswith("\\frac{")
    m = got["mmlu_math"].items[0]
    assert m.answer == "B" and "Answer Choices: (A) " in m.question and "(D) " in m.question


def test_gsm8k_answer_normalization(tmp_path):
    p = tmp_path / "g.jsonl"
    p.write_text(json.dumps({"question": "q", "answer": "steps\n#### 1,234.50"}) + "\n")
    assert load_benchmark("gsm8k", p).items[0].answer == "1234.5"


def test_benchmark_errors(tmp_path, data_files):
    _, root = data_files
    with pytest.raises(ValueError, match="unknown benchmark 'aqua'"):
        load_benchmark("aqua", root=root)
    with pytest.raises(DataFormatError, match="does not exist"):
        load_benchmark("gsm8k", root=tmp_path)
    p = tmp_path / "g.jsonl"
    p.write_text(json.dumps({"question": "q", "answer": "no marker"}) + "\n")
    with pytest.raises(DataFormatError, match=r"g\.jsonl:1: field 'answer' must end with '####"):
        load_benchmark("gsm8k", p)
    p = tmp_path / "mm.json"
    p.write_text(json.dumps([{"question": "q", "choices": ["1", "2"], "answer": 0}]))
    with pytest.raises(DataFormatError, match="4 strings"):
        load_benchmark("mmlu_math", p)
    p.write_text(json.dumps([{"Body": "b", "Question": "q"}]))
    with pytest.raises(DataFormatError, match=r"mm\.json:1: missing field 'Answer'"):
        load_benchmark("svamp", p)
