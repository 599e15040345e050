"""Fixtures for the LLM pipeline tests: a local tokenizer, tiny models, files in the real formats.

Everything is generated in code (no downloads): MathInstruct-format training records from three
"sources" with different solution styles, and the six benchmarks in MAmmoTH's file layout.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

# One thread: tiny models run ~20x faster single-threaded on a loaded 2-core machine (OpenMP
# threads spin against other processes), and results do not depend on the thread count.
torch.set_num_threads(1)
from transformers.utils import logging as _hf_logging  # noqa: E402

_hf_logging.disable_progress_bar()

SOURCES = ("data/CoT/arith.json", "data/CoT/gsm_style.json", "data/PoT/code.json")


def make_records(n: int, seed: int = 0) -> list[dict]:
    """MathInstruct-format records: arithmetic CoT, GSM-style '####', program-of-thought."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(2, 60), rng.randint(2, 60)
        kind = i % 3
        if kind == 0:
            out.append({
                "instruction": f"What is {a} + {b}?",
                "output": f"We add {a} and {b}: {a} + {b} = {a + b}. The answer is {a + b}.",
                "source": SOURCES[0],
            })  # fmt: skip
        elif kind == 1:
            out.append({
                "instruction": f"Tom has {a} apples and buys {b} more. How many apples now?",
                "output": f"Tom has {a} + {b} = <<{a}+{b}={a + b}>>{a + b} apples.\n#### {a + b}",
                "source": SOURCES[1],
            })  # fmt: skip
        else:
            out.append({
                "instruction": f"Compute {a} times {b}. Let's write a program.",
                "output": f"a = {a}\nb = {b}\nprint(a * b)",
                "source": SOURCES[2],
            })  # fmt: skip
    return out


def write_benchmarks(root: Path, n: int = 6, seed: int = 1) -> Path:
    """The six benchmarks in MAmmoTH's layout, ``n`` problems each."""
    rng = random.Random(seed)
    pairs = [(rng.randint(2, 40), rng.randint(2, 40)) for _ in range(n)]
    files = {
        "gsm8k/gsm8k.jsonl": "\n".join(
            json.dumps({"question": f"Ann has {a} pens and gets {b} more. How many pens?",
                        "answer": f"{a} + {b} = <<{a}+{b}={a + b}>>{a + b}\n#### {a + b:,}"})
            for a, b in pairs
        ) + "\n",  # fmt: skip
        "math/MATH.json": json.dumps(
            [{"question": f"Compute $\\frac{{{a}}}{{{2 * a}}} + {b}$.",
              "answer": [f"\\frac{{{2 * b + 1}}}{{2}}", b + 0.5]} for a, b in pairs]
        ),  # fmt: skip
        "numglue/numglue.json": json.dumps(
            [{"question": f"What is {a} plus {b}?", "answer": a + b} for a, b in pairs]
        ),
        "SVAMP/SVAMP.json": json.dumps(
            [{"Body": f"There are {a} birds.", "Question": f"If {b} more come, how many?",
              "Answer": float(a + b)} for a, b in pairs]
        ),  # fmt: skip
        "deepmind/deepmind.json": json.dumps(
            [{"question": f"Calculate {a} - {b}.", "answer": str(a - b)} for a, b in pairs]
        ),
        "mmlu/mathematics.json": json.dumps(
            [{"question": f"What is {a} + {b}?", "choices": [str(a + b + d) for d in (1, 0, 2, 3)],
              "answer": 1} for a, b in pairs]
        ),  # fmt: skip
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


@pytest.fixture(scope="session")
def records():
    return make_records(90)


@pytest.fixture(scope="session")
def tokenizer(tmp_path_factory):
    from llm_validation.data.records import format_prompt
    from llm_validation.models.tiny import train_tokenizer

    texts = [format_prompt(r["instruction"]) + r["output"] for r in make_records(300, seed=7)]
    return train_tokenizer(texts, vocab_size=400)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer):
    """A 2-layer Llama HF folder (random weights)."""
    from llm_validation.models.tiny import TinySize, make_tiny_model

    return make_tiny_model(
        tmp_path_factory.mktemp("tiny") / "llama", "llama", tokenizer,
        TinySize(hidden=32, layers=2, heads=4, kv_heads=2),
    )  # fmt: skip


@pytest.fixture(scope="session")
def data_files(tmp_path_factory, records):
    root = tmp_path_factory.mktemp("data")
    train = root / "MathInstruct.json"
    train.write_text(json.dumps(records, indent=1))
    bench = write_benchmarks(root / "dataset")
    return train, bench
