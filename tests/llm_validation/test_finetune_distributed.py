"""``accelerate launch --num_processes 2``: LoRA fine-tuning with SAM and FSAM on 2 CPU processes.

One launch runs :func:`llm_validation.train.finetune.finetune` three times on 2 processes (gloo):
``sam`` and ``fsam`` with ``sync_perturbation=True`` (the default) and ``fsam`` with ``False``.
With ``True`` the 2-process adapters equal one process with gradient accumulation 2 (the same
effective batch of 8); with ``False`` each replica perturbs with its own gradient, which moves
the adapters measurably elsewhere. The exact per-replica update is checked against an
independent construction in ``tests/sims/optim/test_optim_distributed.py``.

An SGD base and a large ρ make the SAM part of the update large (Adam's first step is
``sign(G)``, which would hide it). This file is also the workers' script: run by ``accelerate
launch`` with ``--worker``.

On a machine without GPUs ``accelerate launch --cpu --num_processes 2`` starts **one** process
(accelerate's simple launcher; it needs mpirun for several CPU processes); ``--multi_gpu`` goes
through ``torch.distributed.run`` and, with ``use_cpu``, gives 2 gloo processes. The workers
record the world size they saw, so a launch that silently runs one process fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RUNS = {  # run name -> (optimizer, optimizer_kwargs)
    "sam": ("sam", {"rho": 0.5, "base": "sgd"}),
    "fsam": ("fsam", {"rho": 0.5, "base": "sgd"}),
    "fsam_local": ("fsam", {"rho": 0.5, "base": "sgd", "sync_perturbation": False}),
}
N_EXAMPLES, MAX_LENGTH = 16, 48


def _cfg(model_dir, name, **over):
    from llm_validation.config import FinetuneConfig

    optimizer, kwargs = RUNS[name] if name in RUNS else ("sgd", {})
    base = dict(
        model=str(model_dir), lora_rank=4, lora_alpha=8.0, lora_dropout=0.0,
        lora_targets="attention", epochs=1, lr=0.05, warmup_ratio=0.0, batch_size=8,
        per_device_batch_size=4, seed=0, optimizer=optimizer, optimizer_kwargs=kwargs,
        dtype="float32", scheduler="constant",
    )  # fmt: skip
    return FinetuneConfig(**{**base, **over})


def _examples(records_file):
    from llm_validation.data.records import Example

    records = json.loads(Path(records_file).read_text())[:N_EXAMPLES]
    return [Example(r["instruction"], r["output"], r["source"], i) for i, r in enumerate(records)]


def _finetune(model_dir, records_file, out, name, **over):
    from llm_validation.train.finetune import finetune

    return finetune(_examples(records_file), None, _cfg(model_dir, name, **over),
                    Path(out) / name, max_length=MAX_LENGTH, progress=False)  # fmt: skip


def _worker(model_dir, records_file, out):
    import torch

    torch.set_num_threads(1)
    dist = torch.distributed
    for name in RUNS:
        res = _finetune(model_dir, records_file, out, name)
        world = dist.get_world_size() if dist.is_initialized() else 1  # as training saw it
        if int(os.environ.get("RANK", "0")) == 0:
            (Path(out) / name / "steps.txt").write_text(f"{res.steps} {world}")
    from llm_validation.train.trainer import end_distributed

    end_distributed()  # as `python -m llm_validation` does: no SIGABRT from gloo at exit


if __name__ == "__main__" and "--worker" in sys.argv:
    _worker(*sys.argv[sys.argv.index("--worker") + 1 :])
    raise SystemExit(0)

import pytest  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")


def _adapter(path):
    from safetensors.torch import load_file

    return load_file(str(Path(path) / "final" / "adapter_model.safetensors"))


def _delta(a, b):
    """Largest entry of ``a − b`` relative to ``b``'s largest, over the LoRA ``B`` factors (which
    start at 0, so their values are the update)."""
    keys = [k for k in b if "lora_B" in k]
    return max(float((a[k] - b[k]).abs().max()) for k in keys) / max(
        float(b[k].abs().max()) for k in keys
    )


@pytest.mark.slow
def test_two_process_sam_and_fsam_through_finetune(tiny_model_dir, records, tmp_path):
    records_file = tmp_path / "records.json"
    records_file.write_text(json.dumps(records))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path.cwd())}
    two = tmp_path / "two"
    proc = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2",
         "--multi_gpu", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
         __file__, "--worker", str(tiny_model_dir), str(records_file), str(two)],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    one = tmp_path / "one"
    for name in ("sam", "fsam", "plain_sgd"):
        res = _finetune(tiny_model_dir, records_file, one, name)
        assert res.steps == 2  # 16 examples, effective batch 8 (accumulation 2 here)
    for name in RUNS:
        # 2 steps on 2 processes (accumulation 1 per process)
        assert (two / name / "steps.txt").read_text() == "2 2"
    plain = _adapter(one / "plain_sgd")
    for name in ("sam", "fsam"):
        w1, w2 = _adapter(one / name), _adapter(two / name)
        assert set(w1) == set(w2) and any("lora_B" in k for k in w1)
        # float32 all-reduce vs in-process accumulation: rounding-level differences only
        assert _delta(w2, w1) < 1e-4, name
        assert _delta(w1, plain) > 1e-2, name  # the SAM part of the update is large here
    # per-replica perturbations (sync_perturbation=False) give another update
    assert _delta(_adapter(two / "fsam_local"), _adapter(two / "fsam")) > 1e-3


def test_finetune_takes_the_configured_fsam_step(tiny_model_dir, records, tmp_path):
    """One process, one step on all 16 examples: ``finetune`` (config -> ``make_optimizer`` ->
    ``SAMFamilyTrainer``) equals a Functional-SAM step written directly with ``SAMFamily`` on
    the same LoRA model and batch (ρ, base and lr as configured; a dropped option would show)."""
    import peft

    from llm_validation.data.records import tokenize_examples
    from llm_validation.models.lora import apply_lora
    from llm_validation.models.registry import load_model
    from llm_validation.train.trainer import collate
    from sims.optim import SAMFamily

    records_file = tmp_path / "records.json"
    records_file.write_text(json.dumps(records))
    res = _finetune(tiny_model_dir, records_file, tmp_path, "fsam", batch_size=16,
                    per_device_batch_size=16)  # fmt: skip
    assert res.steps == 1
    cfg = _cfg(tiny_model_dir, "fsam")

    def by_hand(rho):
        model, tok = load_model(tiny_model_dir, dtype="float32")
        model = apply_lora(model, rank=cfg.lora_rank, alpha=cfg.lora_alpha, dropout=0.0,
                           targets=cfg.lora_targets, seed=cfg.seed)  # fmt: skip
        batch = collate(tokenize_examples(_examples(records_file), tok, max_length=MAX_LENGTH),
                        tok.pad_token_id)  # fmt: skip
        opt = SAMFamily([p for p in model.parameters() if p.requires_grad], torch.optim.SGD,
                        rho, variant="fsam", lr=0.05)  # fmt: skip
        model.train()
        opt.step(lambda: (lambda out: (out.loss, out.logits))(model(**batch)))
        return peft.get_peft_model_state_dict(model)

    want, got = by_hand(0.5), _adapter(tmp_path / "fsam")
    assert set(got) == set(want)
    assert _delta(got, want) < 1e-4  # float32, the batch in another order
    assert _delta(want, by_hand(0.0)) > 1e-2  # ρ = 0.5 matters: a dropped ρ would show
