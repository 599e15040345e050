"""MathInstruct-format training data, the six benchmarks, the prompt and response-only labels.

Training data (main paper, Section 6): a local JSON array or JSONL file of records with string
fields ``instruction``, ``output`` and ``source`` (MathInstruct's layout: ``source`` names one of
its 13 sub-datasets, e.g. ``"data/CoT/gsm_rft.json"``). It is split 95/5 into train/validation
by a seeded permutation (seed 42 as in the authors' code), prompted with the Alpaca
"no input" template, tokenized with the loss on the response tokens only (the prompt is masked
with ``-100``; the response ends with the EOS token) and truncated to 512 tokens.

Benchmarks: files in the layout and formats MAmmoTH's ``math_eval`` reads, under one folder:

=============  ==============================  ===============================================
name           file                            records
=============  ==============================  ===============================================
``gsm8k``      ``gsm8k/gsm8k.jsonl``           ``question``, ``answer`` (solution ending
                                               ``#### <number>``)
``math``       ``math/MATH.json``              ``question``, ``answer`` (a string, or the pair
                                               ``[string, number or null]``)
``numglue``    ``numglue/numglue.json``        ``question``, ``answer`` (number or letter)
``svamp``      ``SVAMP/SVAMP.json``            ``Body``, ``Question``, ``Answer`` (number)
``deepmind``   ``deepmind/deepmind.json``      ``question``, ``answer``
``mmlu_math``  ``mmlu/mathematics.json``       ``question``, ``choices`` (4 strings),
                                               ``answer`` (index 0-3)
=============  ==============================  ===============================================

Every malformed file raises :class:`DataFormatError` naming the file, the line and the field.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

__all__ = [
    "BENCHMARKS",
    "BENCHMARK_FILES",
    "IGNORE_INDEX",
    "PROMPT_NO_INPUT",
    "Benchmark",
    "BenchmarkItem",
    "DataFormatError",
    "Example",
    "format_prompt",
    "load_benchmark",
    "load_mathinstruct",
    "normalize_number",
    "split_train_val",
    "tokenize_examples",
    "write_jsonl",
]

#: Label value ignored by the cross-entropy (prompt tokens and padding).
IGNORE_INDEX = -100

#: The Alpaca "no input" prompt used by MathInstruct/MAmmoTH for training and evaluation.
PROMPT_NO_INPUT = (
    "Below is an instruction that describes a task. "
    "Write a response that appropriately completes the request.\n\n"
    "### Instruction:\n{instruction}\n\n### Response:"
)

#: The six evaluation benchmarks of the paper (Table 2 order).
BENCHMARKS = ("gsm8k", "math", "numglue", "svamp", "deepmind", "mmlu_math")

#: Where each benchmark lives under the benchmark folder (MAmmoTH ``math_eval/dataset`` layout).
BENCHMARK_FILES = {
    "gsm8k": "gsm8k/gsm8k.jsonl",
    "math": "math/MATH.json",
    "numglue": "numglue/numglue.json",
    "svamp": "SVAMP/SVAMP.json",
    "deepmind": "deepmind/deepmind.json",
    "mmlu_math": "mmlu/mathematics.json",
}


class DataFormatError(ValueError):
    """A data file that is missing or malformed (the message names file, line and field)."""


@dataclasses.dataclass(frozen=True)
class Example:
    """One instruction-response pair.

    Attributes:
        instruction: the problem text.
        output: the reference solution (the only tokens with a loss).
        source: the sub-dataset it comes from (clustering is done per source).
        index: position in the file (stable id across all stages).
        prompt: the full prompt text, used verbatim instead of the Alpaca template around
            ``instruction`` (prompt/completion data, chat templates; :mod:`.formats`).
        prompt_special_tokens: whether tokenizing ``prompt`` adds the tokenizer's special tokens
            (e.g. BOS); ``False`` for a prompt rendered by a chat template, which holds them.
    """

    instruction: str
    output: str
    source: str
    index: int
    prompt: str | None = None
    prompt_special_tokens: bool = True


@dataclasses.dataclass(frozen=True)
class BenchmarkItem:
    """One evaluation problem: the prompt text (question) and the gold answer string."""

    question: str
    answer: str
    index: int


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A loaded benchmark (``name`` is one of :data:`BENCHMARKS`)."""

    name: str
    path: Path
    items: tuple[BenchmarkItem, ...]

    def __len__(self) -> int:
        return len(self.items)


# ----------------------------------------------------------------------------- file reading


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _read_records(path: Path, *, what: str) -> list[tuple[int, object]]:
    """``[(line, record)]`` from a JSON array or a JSONL file (the format is sniffed)."""
    if not path.exists():
        raise DataFormatError(f"{what} file {str(path)!r} does not exist.")
    if not path.is_file():
        raise DataFormatError(f"{what} path {str(path)!r} is not a file.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise DataFormatError(
            f"{path}: not UTF-8 text (byte {exc.start}); {what} files are JSON or JSONL."
        ) from None
    stripped = text.lstrip()
    if not stripped:
        raise DataFormatError(f"{path}: the file is empty.")
    decoder = json.JSONDecoder()
    out: list[tuple[int, object]] = []
    if stripped[0] == "[":  # a JSON array: decode element by element to know each one's line
        pos = text.index("[") + 1
        line, counted = 1, 0  # the line of `counted`: newlines are counted once, incrementally
        while True:
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos < len(text) and text[pos] == "]":
                break
            try:
                obj, end = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as exc:
                raise DataFormatError(
                    f"{path}:{exc.lineno}: invalid JSON ({exc.msg}, column {exc.colno})."
                ) from None
            line += text.count("\n", counted, pos)
            counted = pos
            out.append((line, obj))
            pos = end
            while pos < len(text) and text[pos] in " \t\r\n":
                pos += 1
            if pos < len(text) and text[pos] == ",":
                pos += 1
            elif pos < len(text) and text[pos] == "]":
                break
            else:
                raise DataFormatError(
                    f"{path}:{_line_of(text, pos)}: invalid JSON (expected ',' or ']')."
                )
        return out
    for lineno, line in enumerate(text.splitlines(), start=1):  # JSONL
        if not line.strip():
            continue
        try:
            out.append((lineno, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise DataFormatError(
                f"{path}:{lineno}: invalid JSON ({exc.msg}, column {exc.colno}); JSONL files "
                "hold one JSON object per line."
            ) from None
    return out


def _field(path: Path, line: int, rec: object, name: str, types=(str,), *, nonempty=True):
    if not isinstance(rec, dict):
        raise DataFormatError(
            f"{path}:{line}: expected a JSON object with field {name!r}; got {type(rec).__name__}."
        )
    if name not in rec:
        raise DataFormatError(
            f"{path}:{line}: missing field {name!r} (fields present: {sorted(rec)})."
        )
    value = rec[name]
    if isinstance(value, bool) or not isinstance(value, types):
        names = " or ".join(t.__name__ for t in types)
        raise DataFormatError(
            f"{path}:{line}: field {name!r} must be {names}; got {type(value).__name__} "
            f"{str(value)[:40]!r}."
        )
    if nonempty and isinstance(value, str) and not value.strip():
        raise DataFormatError(f"{path}:{line}: field {name!r} is empty.")
    return value


# ----------------------------------------------------------------------------- training data


def load_mathinstruct(
    path: str | os.PathLike, *, max_examples: int | None = None, default_source: str | None = None
) -> list[Example]:
    """Read a MathInstruct-format JSON/JSONL file.

    Args:
        path: the file; records need string fields ``instruction``, ``output``, ``source``.
        max_examples: keep only the first ``max_examples`` records (quick runs).
        default_source: source name for records without ``source`` (default: it is required).

    Returns:
        Examples with ``index`` = position in the file.

    Raises:
        DataFormatError: naming the file, the line and the field.
    """
    p = Path(path)
    records = _read_records(p, what="training data")
    if max_examples is not None:
        records = records[:max_examples]
    out = []
    for i, (line, rec) in enumerate(records):
        instruction = _field(p, line, rec, "instruction")
        output = _field(p, line, rec, "output")
        if default_source is not None and isinstance(rec, dict) and "source" not in rec:
            source = default_source
        else:
            source = _field(p, line, rec, "source")
        out.append(Example(instruction, output, source, i))
    if not out:
        raise DataFormatError(f"{p}: no records.")
    return out


def split_train_val(
    examples: Sequence[Example], *, val_fraction: float = 0.05, seed: int = 42
) -> tuple[list[Example], list[Example]]:
    """Seeded shuffle, then the first ``1 - val_fraction`` for training and the rest for validation.

    The split is a function of the example count, ``val_fraction`` and ``seed`` only, as in the
    authors' code (shuffle with seed 42, first 95% train).
    """
    if not 0.0 <= val_fraction < 1.0:
        raise ValueError(f"`val_fraction` must be in [0, 1); got {val_fraction!r}.")
    n = len(examples)
    perm = np.random.default_rng(seed).permutation(n)
    n_val = int(round(n * val_fraction))
    n_train = n - n_val
    if n_train < 1:
        raise ValueError(f"`val_fraction`={val_fraction} leaves no training example out of {n}.")
    train = [examples[i] for i in np.sort(perm[:n_train])]
    val = [examples[i] for i in np.sort(perm[n_train:])]
    return train, val


def format_prompt(instruction: str) -> str:
    """The Alpaca no-input prompt around ``instruction`` (ends with ``### Response:``)."""
    return PROMPT_NO_INPUT.format(instruction=instruction)


def tokenize_examples(
    examples: Sequence[Example], tokenizer, *, max_length: int = 512
) -> list[dict[str, list[int]]]:
    """Tokenize ``prompt + response + EOS`` with labels on the response tokens only.

    The prompt is the Alpaca template around ``instruction``, or ``Example.prompt`` verbatim
    when it is set.

    The prompt (with the tokenizer's special tokens, e.g. BOS) and the response (without) are
    tokenized separately and concatenated, so the mask boundary is exact. Sequences longer than
    ``max_length`` are cut on the right; an example whose prompt fills the window keeps no label
    (its loss is undefined and reported as NaN).

    Returns:
        One dict per example with ``input_ids``, ``labels`` (``-100`` on the prompt) and
        ``n_response`` (the number of labelled tokens).
    """
    if not isinstance(max_length, int) or max_length < 2:
        raise ValueError(f"`max_length` must be an int >= 2; got {max_length!r}.")
    prompts = [format_prompt(e.instruction) if e.prompt is None else e.prompt for e in examples]
    responses = [e.output for e in examples]
    special = [e.prompt is None or e.prompt_special_tokens for e in examples]
    if all(special):
        p_ids = tokenizer(prompts, add_special_tokens=True)["input_ids"]
    else:
        p_ids = [tokenizer(p, add_special_tokens=s)["input_ids"]
                 for p, s in zip(prompts, special, strict=True)]  # fmt: skip
    r_ids = tokenizer(responses, add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    out = []
    for p, r in zip(p_ids, r_ids, strict=True):
        ids = (list(p) + list(r) + [eos])[:max_length]
        n_p = min(len(p), max_length)
        labels = [IGNORE_INDEX] * n_p + ids[n_p:]
        out.append({"input_ids": ids, "labels": labels, "n_response": len(ids) - n_p})
    return out


def write_jsonl(path: str | os.PathLike, records: Sequence[dict]) -> Path:
    """Atomically write ``records`` as JSONL."""
    from sims.runtime.io import atomic_path

    with atomic_path(path) as tmp:
        with tmp.open("w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
    return Path(path)


def source_counts(examples: Sequence[Example]) -> dict[str, int]:
    """Examples per source, largest first."""
    return dict(Counter(e.source for e in examples).most_common())


# ----------------------------------------------------------------------------- benchmarks

_NUM = re.compile(r"^-?\d+(?:\.\d+)?$")


def normalize_number(text: str) -> str:
    """MAmmoTH's number normalization: drop commas and trailing zeros.

    Non-numeric strings are returned stripped and unchanged.

    Examples:
        >>> normalize_number("1,200.50"), normalize_number("18.0"), normalize_number("-3")
        ('1200.5', '18', '-3')
    """
    s = str(text).strip().replace(",", "")
    if not _NUM.match(s):
        return s
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    if s in ("-0", ""):
        s = "0"
    return s


def _number_field(path, line, rec, name):
    value = _field(path, line, rec, name, (str, int, float))
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return normalize_number(str(value))


def load_benchmark(
    name: str,
    path: str | os.PathLike | None = None,
    *,
    root: str | os.PathLike | None = None,
    max_items: int | None = None,
) -> Benchmark:
    """Load one of the six benchmarks from its MAmmoTH-format file.

    Args:
        name: one of :data:`BENCHMARKS`.
        path: the file; default ``root / BENCHMARK_FILES[name]``.
        root: the benchmark folder (MAmmoTH's ``math_eval/dataset`` layout).
        max_items: keep the first ``max_items`` problems.

    Returns:
        A :class:`Benchmark` whose gold answers are normalized as MAmmoTH does (GSM8K: the text
        after ``####`` without commas and trailing zeros; SVAMP: ``.0`` dropped; MMLU: the
        letter of the correct choice).

    Raises:
        ValueError: for an unknown ``name``.
        DataFormatError: for a missing or malformed file (file, line, field).
    """
    if name not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {name!r}; choose from {', '.join(BENCHMARKS)}.")
    if path is None:
        if root is None:
            raise ValueError(
                f"give the file of benchmark {name!r} (`path`) or its folder (`root`)."
            )
        path = Path(root) / BENCHMARK_FILES[name]
    p = Path(path)
    records = _read_records(p, what=f"benchmark {name!r}")
    if max_items is not None:
        records = records[:max_items]
    items = []
    for i, (line, rec) in enumerate(records):
        if name == "gsm8k":
            q = _field(p, line, rec, "question")
            sol = _field(p, line, rec, "answer")
            if "####" not in sol:
                raise DataFormatError(
                    f"{p}:{line}: field 'answer' must end with '#### <number>' (GSM8K format)."
                )
            a = normalize_number(sol.split("####")[-1])
        elif name == "svamp":
            body = _field(p, line, rec, "Body").strip()
            q = body + " " + _field(p, line, rec, "Question").strip()
            a = _number_field(p, line, rec, "Answer")
        elif name == "math":
            q = _field(p, line, rec, "question")
            raw = _field(p, line, rec, "answer", (str, list, int, float))
            if isinstance(raw, list):
                if not raw or not isinstance(raw[0], (str, int, float)):
                    raise DataFormatError(
                        f"{p}:{line}: field 'answer' must be a string or [string, number|null]."
                    )
                raw = raw[0]
            a = str(raw).strip()
        elif name == "mmlu_math":
            q0 = _field(p, line, rec, "question")
            choices = _field(p, line, rec, "choices", (list,))
            idx = _field(p, line, rec, "answer", (int,))
            if len(choices) != 4 or not all(isinstance(c, (str, int, float)) for c in choices):
                raise DataFormatError(f"{p}:{line}: field 'choices' must hold 4 strings.")
            if not 0 <= idx < 4:
                raise DataFormatError(f"{p}:{line}: field 'answer' must be 0-3; got {idx}.")
            opts = " ".join(f"({letter}) {c}" for letter, c in zip("ABCD", choices, strict=True))
            q = f"{q0}\nAnswer Choices: {opts}"
            a = "ABCD"[idx]
        else:  # numglue, deepmind
            q = _field(p, line, rec, "question")
            a = _number_field(p, line, rec, "answer")
        items.append(BenchmarkItem(q, a, i))
    if not items:
        raise DataFormatError(f"{p}: no records.")
    return Benchmark(name, p, tuple(items))
