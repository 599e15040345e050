"""Zero-shot greedy evaluation on the six benchmarks and the Table 2 layout (Section 6).

Prompts are the Alpaca no-input template around each question (zero-shot, as MAmmoTH and the
paper); generation is greedy, batched over length-sorted prompts with left padding, and stops
at MAmmoTH's stop strings (the completion is cut before the first one). Answers are extracted
and scored by :mod:`llm_validation.evaluate.scoring`; program-of-thought completions (MAmmoTH's
test: they contain ``print(``) are run in the sandbox of :mod:`llm_validation.execution`
and scored on what they print (``execute=False``: on their text). Per benchmark the predictions
(question, gold, completion, whether it is a program and what it printed, the extracted answer and
verdict, and the answer and verdict from the text alone) are written as JSONL and the accuracy as
JSON, both atomically; a benchmark already scored is not generated again.

:func:`accuracy_table` prints the accuracies in the layout of the paper's Table 2 (rows: the
benchmarks with their sizes and the average; columns: PT / FT / FT+UP or any settings), the
best per row (within 1 point, as the paper) in bold.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from llm_validation.data.records import BENCHMARKS, Benchmark, format_prompt
from llm_validation.evaluate.scoring import (
    choice_of_value,
    extract_answer,
    is_correct,
    is_program,
    parse_choices,
    program_outputs,
)

__all__ = ["generate", "evaluate_benchmarks", "accuracy_table", "GenerationStats", "cut_at_stop"]


class GenerationStats:
    """Counters of a generation run (prompts, new tokens, seconds)."""

    def __init__(self):
        self.prompts = 0
        self.new_tokens = 0
        self.seconds = 0.0

    def as_dict(self) -> dict:
        """Counters and rates."""
        s = max(self.seconds, 1e-9)
        return {"prompts": self.prompts, "new_tokens": self.new_tokens, "seconds": self.seconds,
                "prompts_per_s": self.prompts / s, "tokens_per_s": self.new_tokens / s}  # fmt: skip


def cut_at_stop(text: str, stop_strings: Sequence[str]) -> str:
    """``text`` up to (not including) the first occurrence of any stop string."""
    cut = len(text)
    for s in stop_strings:
        i = text.find(s)
        if i >= 0:
            cut = min(cut, i)
    return text[:cut]


def generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 512,
    batch_size: int = 32,
    stop_strings: Sequence[str] = (),
    progress: bool = False,
    stats: GenerationStats | None = None,
    desc: str = "generate",
) -> list[str]:
    """Greedy completions of ``prompts`` (batched, length-sorted, left padded, stop strings).

    Returns:
        One completion per prompt (in input order), cut before the first stop string and
        without special tokens.
    """
    import torch
    from tqdm.auto import tqdm

    tokenizer.padding_side = "left"
    enc = tokenizer(list(prompts), add_special_tokens=True)["input_ids"]
    order = np.argsort([-len(e) for e in enc], kind="stable")
    out = [""] * len(prompts)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    stats = stats if stats is not None else GenerationStats()
    bar = tqdm(total=len(prompts), desc=desc, disable=not progress)
    t0 = time.perf_counter()
    try:
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = tokenizer.pad({"input_ids": [enc[i] for i in idx]}, return_tensors="pt")
            batch = {k: v.to(device) for k, v in batch.items()}
            with torch.no_grad():
                gen = model.generate(
                    **batch, do_sample=False, max_new_tokens=max_new_tokens,
                    pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                    stop_strings=list(stop_strings) or None, tokenizer=tokenizer,
                    temperature=None, top_p=None, top_k=None,
                )  # fmt: skip
            new = gen[:, batch["input_ids"].shape[1] :]
            for row, i in enumerate(idx):
                toks = new[row]
                n_new = int((toks != tokenizer.pad_token_id).sum())
                stats.new_tokens += n_new
                text = tokenizer.decode(toks, skip_special_tokens=True)
                out[i] = cut_at_stop(text, stop_strings)
            bar.update(len(idx))
    finally:
        bar.close()
        model.train(was_training)
    stats.prompts += len(prompts)
    stats.seconds += time.perf_counter() - t0
    return out


def evaluate_benchmarks(
    model,
    tokenizer,
    benchmarks: Mapping[str, Benchmark],
    out_dir: str | os.PathLike,
    *,
    max_new_tokens: int = 512,
    batch_size: int = 32,
    stop_strings: Sequence[str] = (),
    progress: bool = True,
    meta: Mapping | None = None,
    execute: bool = True,
    program_timeout_s: float = 5.0,
) -> dict[str, dict]:
    """Generate, extract, score each benchmark; write predictions and scores (resumable).

    Args:
        model: the model to evaluate.
        tokenizer: its tokenizer.
        benchmarks: loaded benchmarks by name.
        out_dir: folder for ``<name>.jsonl`` predictions and ``scores.json``.
        max_new_tokens: generation budget per problem.
        batch_size: prompts per generation batch.
        stop_strings: generation stops at any of these.
        progress: progress bars.
        meta: provenance stored in ``scores.json``.
        execute: run program-of-thought completions in the sandbox and score their output
            (MAmmoTH); ``False`` scores their text.
        program_timeout_s: wall-clock limit per program.

    Returns:
        ``{name: {"accuracy", "correct", "n", "no_answer", "programs", "programs_correct",
        "programs_correct_text", "execute"}}``: the counts of completions that are programs,
        of those scored correct (as scored), and of those correct on their text alone;
        ``mmlu_math`` adds ``correct_mapped``, the count correct when a stated value is mapped
        to its option (:func:`~llm_validation.evaluate.scoring.choice_of_value`). Each row of
        ``<name>.jsonl`` holds the item's verdict (``correct``; per-item results).
    """
    from llm_validation.data.records import write_jsonl
    from sims.runtime.io import read_json, write_json

    out = Path(out_dir)
    scores_path = out / "scores.json"
    scores = read_json(scores_path).get("scores", {}) if scores_path.exists() else {}
    stats = GenerationStats()
    for name, bench in benchmarks.items():
        if name in scores and (out / f"{name}.jsonl").exists():
            continue
        prompts = [format_prompt(it.question) for it in bench.items]
        comps = generate(
            model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
            stop_strings=stop_strings, progress=progress, stats=stats, desc=name,
        )  # fmt: skip
        printed = program_outputs(comps, timeout_s=program_timeout_s) if execute else None
        rows = []
        for i, (it, comp) in enumerate(zip(bench.items, comps, strict=True)):
            prog = is_program(comp)
            text_pred = extract_answer(name, comp, execute=False)
            text_ok = is_correct(name, text_pred, it.answer)
            pred, ok = text_pred, text_ok
            if execute and prog:
                pred = extract_answer(name, comp, program_output=printed[i])
                ok = is_correct(name, pred, it.answer)
            rows.append({"index": it.index, "question": it.question, "gold": it.answer,
                         "completion": comp, "program": prog,
                         "program_output": printed[i] if printed else None,
                         "prediction": pred, "correct": ok,
                         "prediction_text": text_pred, "correct_text": text_ok})  # fmt: skip
            if name == "mmlu_math":  # issue 36: a stated value mapped to its option, too
                shown = printed[i] if execute and prog else comp
                if execute and prog:
                    shown = "The answer is " + (shown or "").strip("\n")
                mapped = choice_of_value(shown, parse_choices(it.question))
                rows[-1]["prediction_mapped"] = mapped
                rows[-1]["correct_mapped"] = is_correct(name, mapped, it.answer)
        write_jsonl(out / f"{name}.jsonl", rows)
        progs = [r for r in rows if r["program"]]
        correct = sum(r["correct"] for r in rows)
        scores[name] = {"accuracy": correct / len(rows), "correct": correct, "n": len(rows),
                        "no_answer": sum(r["prediction"] is None for r in rows),
                        "programs": len(progs),
                        "programs_correct": sum(r["correct"] for r in progs),
                        "programs_correct_text": sum(r["correct_text"] for r in progs),
                        "execute": execute}  # fmt: skip
        if name == "mmlu_math":
            scores[name]["correct_mapped"] = sum(r["correct_mapped"] for r in rows)
        write_json(scores_path, {"scores": scores, "generation": stats.as_dict()},
                   meta=dict(meta or {}))  # fmt: skip
    return scores


def accuracy_table(
    results: Mapping[str, Mapping[str, float]],
    *,
    sizes: Mapping[str, int] | None = None,
    datasets: Sequence[str] = BENCHMARKS,
    tolerance: float = 1.0,
    std: Mapping[str, Mapping[str, float]] | None = None,
) -> str:
    """Markdown table in the layout of Table 2: benchmarks x settings, accuracies in percent.

    Args:
        results: ``{column: {dataset: accuracy in [0, 1]}}`` (e.g. ``PT``, ``FT``, ``FT+UP``).
        sizes: ``{dataset: number of problems}`` for the ``#Inst.`` column.
        datasets: row order (Table 2's: GSM8K, MATH, NumGLUE, SVAMP, DeepMind, MMLU-Math).
        tolerance: bold every value within this many points of the row's best (1.0 in the paper);
            a row where every value is within it (a tie) has no bold value.
        std: optional ``{column: {dataset: std}}`` shown as ``mean ± std``.

    Returns:
        The table; the last row is the average over the datasets present in every column.
    """
    names = {"gsm8k": "GSM8K", "math": "MATH", "numglue": "NumGLUE", "svamp": "SVAMP",
             "deepmind": "DeepMind", "mmlu_math": "MMLU-Math"}  # fmt: skip
    cols = list(results)
    rows = [d for d in datasets if all(d in results[c] for c in cols)]
    head = "| Dataset | #Inst. | " + " | ".join(cols) + " |"
    lines = [head, "|---|---:|" + "---:|" * len(cols)]

    def fmt(vals, sds):
        best = max(vals)
        tie = all(100 * (best - v) <= tolerance + 1e-9 for v in vals)  # no column is better
        cells = []
        for v, s in zip(vals, sds, strict=True):
            txt = f"{100 * v:.1f}" + (f" ± {100 * s:.1f}" if s is not None else "")
            bold = not tie and 100 * (best - v) <= tolerance + 1e-9
            cells.append(f"**{txt}**" if bold else txt)
        return cells

    for d in rows:
        vals = [results[c][d] for c in cols]
        sds = [std[c].get(d) if std and c in std else None for c in cols]
        n = (sizes or {}).get(d, "")
        lines.append(f"| {names.get(d, d)} | {n} | " + " | ".join(fmt(vals, sds)) + " |")
    if rows:
        avg = [float(np.mean([results[c][d] for d in rows])) for c in cols]
        sds = [std[c].get("avg") if std and c in std else None for c in cols]
        n = int(np.mean([sizes[d] for d in rows])) if sizes else ""
        lines.append(f"| Avg. | {n} | " + " | ".join(fmt(avg, sds)) + " |")
    return "\n".join(lines)
