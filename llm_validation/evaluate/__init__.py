"""Evaluation: generation and scoring.

Evaluation: zero-shot generation on the benchmarks (:mod:`.generation`) and answer extraction and
scoring (:mod:`.scoring`); program-of-thought completions run in the package's one sandbox,
:mod:`llm_validation.execution`. It may import ``data/``, ``config``, ``runs`` and ``execution``
(the table is in ``tests/test_layers.py``).
"""
