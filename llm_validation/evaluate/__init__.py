"""Evaluation: generation, scoring and the sandbox.

Evaluation: zero-shot generation on the benchmarks (:mod:`.generation`), answer extraction and
scoring (:mod:`.scoring`) and the sandbox that runs model-written programs (:mod:`.execution`). It
may import ``data/``, ``config`` and ``runs`` (the table is in ``tests/test_layers.py``).
"""
