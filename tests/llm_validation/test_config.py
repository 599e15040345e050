from __future__ import annotations

import json

import pytest

from llm_validation.config import (
    FinetuneConfig,
    ProxyConfig,
    SelectionConfig,
    config_hash,
    config_to_dict,
    load_config,
)


def test_defaults_are_the_papers_settings():
    cfg = load_config()
    f, p = cfg.finetune, cfg.proxy
    assert (f.lora_rank, f.lora_alpha, f.lora_dropout) == (128, 512.0, 0.05)
    assert (f.batch_size, f.epochs, f.lr, f.warmup_ratio, f.scheduler) == (
        128, 3.0, 2e-5, 0.03, "cosine",
    )  # fmt: skip
    assert cfg.data.max_length == 512 and cfg.data.val_fraction == 0.05
    assert cfg.data.split_seed == 42
    assert (p.epoch_fraction, p.n_checkpoints) == (1 / 3, 5)
    assert (cfg.selection.n_clusters, cfg.selection.upsample_factor) == (2, 1)


def test_file_overrides_and_relative_paths(tmp_path):
    (tmp_path / "sub").mkdir()
    cfg_file = tmp_path / "sub" / "run.json"
    cfg_file.write_text(json.dumps({
        "data": {"train_file": "mi.json", "benchmark_dir": "../bench"},
        "proxy": {"model": "./proxy_model", "n_checkpoints": 15},
        "finetune": {"settings": ["ft", "easy"], "optimizer": "muon"},
    }))  # fmt: skip
    cfg = load_config(cfg_file, {"finetune.lr": 1e-4, "selection.features": "last"})
    assert cfg.data.train_file == str(tmp_path / "sub" / "mi.json")
    assert cfg.data.benchmark_dir == str(tmp_path / "sub" / ".." / "bench")
    assert cfg.proxy.model == str(tmp_path / "sub" / "proxy_model")
    assert cfg.proxy.n_checkpoints == 15
    assert cfg.finetune.settings == ("ft", "easy") and cfg.finetune.lr == 1e-4
    assert cfg.selection.features == "last"
    # named models stay names
    assert load_config(None, {"proxy.model": "smollm2-135m-instruct"}).proxy.model == (
        "smollm2-135m-instruct"
    )


def test_toml_config(tmp_path):
    p = tmp_path / "run.toml"
    p.write_text('run_dir = "out"\n[proxy]\nn_checkpoints = 10\n')
    cfg = load_config(p)
    assert cfg.proxy.n_checkpoints == 10 and cfg.run_dir == "out"


def test_unknown_keys_suggest_the_nearest(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"finetune": {"lora_rnak": 8}}))
    with pytest.raises(ValueError, match=r"'lora_rnak' \(did you mean 'lora_rank'\?\)"):
        load_config(p)
    p.write_text(json.dumps({"fine_tune": {}}))
    with pytest.raises(ValueError, match="unknown section"):
        load_config(p)
    with pytest.raises(ValueError, match="does not exist"):
        load_config(tmp_path / "nope.json")
    p.write_text("{bad json")
    with pytest.raises(ValueError, match="is not valid"):
        load_config(p)


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        (ProxyConfig, {"epoch_fraction": 0}, r"`proxy.epoch_fraction` must be a number > 0"),
        (ProxyConfig, {"n_checkpoints": 0}, r"`proxy.n_checkpoints` must be an int >= 1"),
        (ProxyConfig, {"optimizer": "adam"}, r"`proxy.optimizer` must be one of"),
        (ProxyConfig, {"schedule_epochs": 0.1}, r"`proxy.schedule_epochs`"),
        (SelectionConfig, {"features": "mean"}, r"`selection.features`"),
        (SelectionConfig, {"upsample_factor": 0}, r"`selection.upsample_factor`"),
        (FinetuneConfig, {"settings": ("ft", "hard")}, r"`finetune.settings` must be one of"),
        (FinetuneConfig, {"lora_dropout": 1.5}, r"`finetune.lora_dropout`"),
        (FinetuneConfig, {"lora_targets": "everything"}, r"`finetune.lora_targets`"),
        (FinetuneConfig, {"batch_size": True}, r"`finetune.batch_size` must be an int"),
    ],
)
def test_bad_values_name_the_key(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_unknown_benchmark_in_config():
    with pytest.raises(ValueError, match=r"`data.benchmarks` must be one of gsm8k"):
        load_config(None, {"data.benchmarks": ["gsm8k", "aqua"]})


def test_hash_tracks_values():
    a, b = load_config(), load_config(None, {"proxy.lr": 1e-3})
    assert config_hash(a) != config_hash(b)
    assert config_hash(a) == config_hash(load_config())
    assert json.loads(json.dumps(config_to_dict(a)))["finetune"]["settings"] == ["ft", "ft_up"]


def test_committed_configs_load():
    from pathlib import Path

    import llm_validation

    folder = Path(llm_validation.__file__).parent / "configs"
    found = sorted(folder.glob("*.json"))
    assert len(found) >= 3
    for path in found:
        cfg = load_config(path)
        assert cfg.finetune.model in ("gemma3-270m", "smollm2-135m-instruct"), path
