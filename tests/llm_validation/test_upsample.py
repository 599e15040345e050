"""``python -m llm_validation upsample`` end to end on tiny generated data (issue 41).

Each input layout runs through the real command (``main(argv)`` in-process) with a tiny
from-scratch proxy; the outputs are checked against independent computations: the mixture's rows
against the input records and the per-example counts, each learning time against a
hand-written half-drop interpolation of the stored trajectories, the AUC against a pairwise
count. Bad input is one line and exit 2 with nothing written; a Ctrl-C'd run resumes to the
trajectories of an uninterrupted one.
"""

from __future__ import annotations

import collections
import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from llm_validation.__main__ import main
from tests.llm_validation.conftest import make_records

#: A proxy small enough for seconds: Llama 16 wide x 1 block, vocabulary 300, 15 steps.
FAST = ["--proxy", "scratch:16x1", "--vocab-size", "300", "--epoch-fraction", "1",
        "--schedule-epochs", "1", "--batch-size", "4", "--checkpoints", "4", "--max-length",
        "96", "--quiet"]  # fmt: skip
N = 48


def _run(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["upsample", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def _json_instruction(tmp: Path) -> tuple[Path, list[dict]]:
    recs = make_records(N, seed=3)
    p = tmp / "alpaca.json"
    p.write_text(json.dumps(recs, indent=1))
    return p, recs


def _jsonl_prompt(tmp: Path) -> tuple[Path, list[dict]]:
    recs = [{"prompt": r["instruction"] + "\n", "completion": r["output"], "source": r["source"]}
            for r in make_records(N, seed=4)]  # fmt: skip
    p = tmp / "pc.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return p, recs


def _messages_folder(tmp: Path) -> tuple[Path, list[dict]]:
    import datasets

    recs = [{"messages": [{"role": "system", "content": "Solve it."},
                          {"role": "user", "content": r["instruction"]},
                          {"role": "assistant", "content": r["output"]}],
             "group": r["source"]} for r in make_records(N, seed=5)]  # fmt: skip
    p = tmp / "chat_ds"
    datasets.Dataset.from_list(recs).save_to_disk(str(p))
    return p, recs


def _half_drop(steps, losses) -> float:
    """Eq. 11's t_i by hand: the first crossing of L0 - (L0 - Lmin)/2, linearly interpolated."""
    l0, lmin = losses[0], min(losses)
    if not l0 > lmin:
        return math.nan
    level = l0 - 0.5 * (l0 - lmin)
    for j, x in enumerate(losses):
        if x <= level:
            if j == 0:
                return float(steps[0])
            s0, s1, y0, y1 = steps[j - 1], steps[j], losses[j - 1], losses[j]
            return s1 if y0 == y1 else s0 + (s1 - s0) * (y0 - level) / (y0 - y1)
    raise AssertionError("the minimum is always at or below the level")


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(("make", "extra"), [
    (_json_instruction, []),
    (_jsonl_prompt, ["--factor", "2"]),
    (_messages_folder, ["--source-field", "group"]),
], ids=["json-instruction", "jsonl-prompt", "datasets-messages"])  # fmt: skip
def test_end_to_end_each_layout(make, extra, tmp_path, capsys):
    import datasets
    import xarray as xr

    data, recs = make(tmp_path)
    out = tmp_path / "out"
    code, stdout, err = _run(["--data", data, "--out", out, *FAST, *extra], capsys)
    assert code == 0, err
    factor = int(extra[1]) if extra[:1] == ["--factor"] else 1
    rows = _rows(out / "examples.csv")
    assert [int(r["index"]) for r in rows] == list(range(N))
    selected = [r["selected"] == "1" for r in rows]
    assert 0 < sum(selected) < N
    assert [int(r["count"]) for r in rows] == [1 + factor if s else 1 for s in selected]
    # the mixture: loads with datasets; original + factor x selected rows; the records as given
    mix = datasets.load_dataset("json", data_files=str(out / "mixture.jsonl"), split="train")
    assert len(mix) == N + factor * sum(selected)
    got = collections.Counter(json.dumps(json.loads(line), sort_keys=True)
                              for line in (out / "mixture.jsonl").read_text().splitlines())
    want = collections.Counter()
    for rec, s in zip(recs, selected, strict=True):
        want[json.dumps(rec, sort_keys=True)] += 1 + factor if s else 1
    assert got == want
    # learning times: recomputed by hand from the stored trajectories
    traj = xr.open_dataset(out / "proxy" / "trajectories.nc").load()
    steps = traj["step"].values.tolist()
    assert steps[0] == 0 and len(steps) == 4 and steps == sorted(set(steps))
    for i, r in enumerate(rows):
        losses = traj["loss"].values[i].tolist()
        np.testing.assert_allclose([float(r[f"loss_step_{s}"]) for s in steps], losses)
        t = _half_drop(steps, losses)
        if math.isnan(t):
            assert r["learning_time"] == ""
        else:
            assert float(r["learning_time"]) == pytest.approx(t, rel=1e-12)
    # the AUC by a pairwise count (unlearned = learned last, ties count 1/2)
    summary = json.loads((out / "upsample.json").read_text())
    t = [float(r["learning_time"]) if r["learning_time"] else math.inf for r in rows]
    a = [x for x, s in zip(t, selected, strict=True) if s]
    b = [x for x, s in zip(t, selected, strict=True) if not s]
    auc = sum((x > y) + 0.5 * (x == y) for x in a for y in b) / (len(a) * len(b))
    assert summary["check"]["auc"] == pytest.approx(auc)
    assert summary["n_selected"] == sum(selected) and summary["mixture_rows"] == len(mix)
    assert "meta" in summary and summary["meta"]["git_commit"]
    for name, f in summary["files"].items():
        assert (out / f["path"]).is_file(), name
    report = (out / "report.md").read_text()
    assert "AUC" in report and "## Provenance" in report and "SFTTrainer" in report
    assert (out / "selection.png").stat().st_size > 10_000
    assert "where to look" in stdout and "selection check: AUC" in stdout


def test_weights_instead_of_repeats(tmp_path, capsys):
    data, recs = _jsonl_prompt(tmp_path)
    out = tmp_path / "w"
    code, _, err = _run(["--data", data, "--out", out, *FAST, "--weights", "--factor", "3"],
                        capsys)  # fmt: skip
    assert code == 0, err
    mix = [json.loads(x) for x in (out / "mixture.jsonl").read_text().splitlines()]
    rows = _rows(out / "examples.csv")
    assert [m.pop("weight") for m in mix] == [4 if r["selected"] == "1" else 1 for r in rows]
    assert mix == recs


def test_resume_after_ctrl_c_matches_an_uninterrupted_run(tmp_path, capsys, monkeypatch):
    import xarray as xr

    from llm_validation.train import trainer

    data, _ = _json_instruction(tmp_path)
    assert _run(["--data", data, "--out", tmp_path / "full", *FAST], capsys)[0] == 0
    record = trainer.LossRecorder._record
    calls = []

    def interrupted(self, model, step):
        calls.append(step)
        if len(calls) == 3:  # after two recordings (steps 0 and the first) are on disk
            raise KeyboardInterrupt
        return record(self, model, step)

    monkeypatch.setattr(trainer.LossRecorder, "_record", interrupted)
    cut = tmp_path / "cut"
    code, _, err = _run(["--data", data, "--out", cut, *FAST], capsys)
    assert code == 130 and "interrupted" in err
    assert len(list((cut / "proxy" / "losses").glob("step-*.nc"))) == 2
    assert not (cut / "mixture.jsonl").exists()
    calls.clear()
    monkeypatch.setattr(trainer.LossRecorder, "_record", lambda self, model, step: (
        calls.append(step), record(self, model, step))[1])  # fmt: skip
    code, _, err = _run(["--data", data, "--out", cut, *FAST], capsys)
    assert code == 0, err
    steps = xr.open_dataset(cut / "proxy" / "trajectories.nc")["step"].values.tolist()
    assert calls == steps[2:]  # only the missing recordings were computed again
    a = xr.open_dataset(tmp_path / "full" / "proxy" / "trajectories.nc")["loss"].values
    b = xr.open_dataset(cut / "proxy" / "trajectories.nc")["loss"].values
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert (cut / "examples.csv").read_text() == (tmp_path / "full" / "examples.csv").read_text()
    # a finished run is reused: nothing is recorded again
    calls.clear()
    assert _run(["--data", data, "--out", cut, *FAST], capsys)[0] == 0
    assert calls == []


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    data, _ = _json_instruction(tmp_path)
    code, out, err = _run(["--data", data, "--out", tmp_path / "o", *FAST, "--dry-run"], capsys)
    assert code == 0, err
    assert f"{N} examples" in out and "3 sources" in out
    assert "4 loss recordings at steps [0, " in out and ", 12]" in out
    assert f"= {4 * N} example forward passes" in out
    assert "estimated time:" in out and "timed forward pass" in out
    assert not (tmp_path / "o").exists()
    code, out, _ = _run(["--data", data, "--out", tmp_path / "o", *FAST, "--dry-run",
                         "--device", "cuda"], capsys)  # fmt: skip
    if "no GPU here" in out:
        assert "assumed" in out and "not measured" in out


def _bad_cases(tmp: Path, model_dir: Path) -> dict[str, tuple[list, str]]:
    good, _ = _json_instruction(tmp)
    missing = tmp / "missing.jsonl"
    missing.write_text(json.dumps({"instruction": "a", "output": "b"}) + "\n"
                       + json.dumps({"instruction": "c"}) + "\n")  # fmt: skip
    empty = tmp / "empty.json"
    empty.write_text("")
    broken = tmp / "broken.jsonl"
    broken.write_text('{"prompt": "a", "completion": "b"}\n{"prompt": "a", \n')
    chat = tmp / "chat.jsonl"
    chat.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "yo"}]}) + "\n")
    afile = tmp / "afile"
    afile.write_text("x")
    notmodel = tmp / "notmodel"
    notmodel.mkdir()
    return {
        "missing field": ([missing, "--proxy", "scratch"],
                          "missing.jsonl:2: missing field 'output'"),
        "empty file": ([empty, "--proxy", "scratch"], "the file is empty"),
        "unparsable file": ([broken, "--proxy", "scratch"], "broken.jsonl:2: invalid JSON"),
        "not a model": ([good, "--proxy", notmodel], "`--proxy`"),
        "factor 0": ([good, "--proxy", "scratch", "--factor", "0"], "argument --factor"),
        "factor -1": ([good, "--proxy", "scratch", "--factor", "-1"], "argument --factor"),
        "out is a file": ([good, "--proxy", "scratch", "--out", afile], "`--out`"),
        "out below a file": ([good, "--proxy", "scratch", "--out", afile / "sub"], "--out"),
        "no chat template": ([chat, "--proxy", model_dir], "no chat template"),
        "source field absent": ([good, "--proxy", "scratch", "--source-field", "group"],
                                "missing field 'group'"),
        "no such data": ([tmp / "nope.json", "--proxy", "scratch"], "does not exist"),
        "scratch size": ([good, "--proxy", "scratch:7x1"], "scratch:WIDTHxDEPTH"),
    }  # fmt: skip


def test_bad_input_is_one_line_exit_2_before_any_work(tmp_path, capsys, tiny_model_dir,
                                                      monkeypatch):  # fmt: skip
    from llm_validation.experiments import upsample

    monkeypatch.setattr(upsample, "run_upsample", lambda *a, **k: pytest.fail("work started"))
    monkeypatch.setattr(upsample, "plan_upsample", lambda *a, **k: pytest.fail("work started"))
    for name, (args, match) in _bad_cases(tmp_path, tiny_model_dir).items():
        argv = ["--data", *args]
        if "--out" not in argv:
            argv += ["--out", tmp_path / "out"]
        before = set(tmp_path.rglob("*"))
        code, out, err = _run(argv, capsys)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert code == 2, (name, err)
        assert len(lines) == 1 and "Traceback" not in err, (name, err)
        assert match in lines[0], (name, lines[0])
        assert set(tmp_path.rglob("*")) == before, name


def test_what_the_proxy_reads_of_each_layout(tmp_path):
    """The prompt and response of each layout, written out by hand."""
    from llm_validation.data.formats import read_user_data, render_examples
    from llm_validation.data.records import tokenize_examples
    from llm_validation.experiments.upsample import UpsampleConfig, _scratch_tokenizer

    p = tmp_path / "mixed.jsonl"
    chat = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3?"},
            {"role": "assistant", "content": "5"}]  # fmt: skip
    p.write_text(json.dumps({"messages": chat}) + "\n")
    data = read_user_data(p)
    tok = _scratch_tokenizer(UpsampleConfig(data=str(p), proxy="scratch"), data)
    (ex,) = render_examples(data, tok)
    assert ex.prompt == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+3?"
                         "<|im_end|>\n<|im_start|>assistant\n")  # fmt: skip
    assert ex.output == "5<|im_end|>"
    (rec,) = tokenize_examples([ex], tok, max_length=512)
    labelled = [t for t, lab in zip(rec["input_ids"], rec["labels"], strict=True) if lab != -100]
    assert tok.decode(labelled) == "5<|im_end|><|endoftext|>"  # the response, then EOS
    q = tmp_path / "alpaca.json"
    q.write_text(json.dumps([{"instruction": "Add.", "input": "2 and 3", "output": "5"},
                             {"instruction": "Say hi.", "output": "hi"}]))  # fmt: skip
    with_input, plain = render_examples(read_user_data(q))
    assert with_input.prompt.endswith("### Instruction:\nAdd.\n\n### Input:\n2 and 3\n\n"
                                      "### Response:")  # fmt: skip
    assert with_input.prompt.startswith("Below is an instruction that describes a task, paired")
    assert plain.prompt is None and plain.instruction == "Say hi." and plain.output == "hi"
    r = tmp_path / "pc.jsonl"
    r.write_text(json.dumps({"prompt": "Q: 2+3\nA:", "completion": " 5"}) + "\n")
    (pc,) = render_examples(read_user_data(r))
    assert (pc.prompt, pc.output) == ("Q: 2+3\nA:", " 5")


def test_recording_steps_by_hand():
    """20,000 examples at batch 32: 625 steps an epoch, 1/3 of it = 208; 2 * 104**(k/3)."""
    from llm_validation.config import ProxyConfig
    from llm_validation.experiments.upsample import UpsampleConfig, recording_steps
    from llm_validation.train.proxy import plan_proxy

    stop, steps = recording_steps(20_000, UpsampleConfig(data="d", proxy="scratch"))
    assert stop == 208 and steps.tolist() == [0, 2, 9, 44, 208]  # 2 * 104**(1/3) = 9.40
    cfg = ProxyConfig(n_checkpoints=5, batch_size=32)
    assert plan_proxy(20_000, cfg, record_steps=steps).record_steps == (0, 2, 9, 44, 208)
    for bad in ([0, 2, 9, 44, 200], [0, 9, 2, 44, 208], [0, 2, 44, 208]):
        with pytest.raises(ValueError, match="record_steps"):
            plan_proxy(20_000, cfg, record_steps=bad)
    with pytest.raises(ValueError, match="fewer than the 4 recordings"):
        recording_steps(40, UpsampleConfig(data="d", proxy="scratch"))
