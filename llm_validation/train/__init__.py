"""Training: the Trainer machinery, proxy, fine-tuning, from-scratch pre-training.

Training: the shared Trainer machinery (:mod:`.trainer`), proxy loss trajectories (:mod:`.proxy`),
LoRA fine-tuning of the target (:mod:`.finetune`) and from-scratch pre-training for CPU-scale runs
(:mod:`.scratch`). It may import ``data/``, ``config``, ``runs``, ``evaluate/`` and ``models/`` (the
table is in ``tests/test_layers.py``).
"""
