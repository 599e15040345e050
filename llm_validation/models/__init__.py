"""Models: the registry, LoRA and the tiny decoders.

Models: resolving and loading a model spec offline (:mod:`.registry`), LoRA adapters (:mod:`.lora`)
and the small decoders and local tokenizer for tests and CPU runs (:mod:`.tiny`). It may import
``data/``, ``config`` and ``runs`` (the table is in ``tests/test_layers.py``).
"""
