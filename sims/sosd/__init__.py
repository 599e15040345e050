"""Seed 002's spectral-stability onset (SoSD).

Seed 002's spectral-stability onset (SoSD): singular distributions, the Lemma A.4 bound and the
recorders (:mod:`.spectral`), the Section 4 toy (:mod:`.toy`, run as ``python -m sims.sosd_toy``)
and the spectra of the linear-attention, Markov and LM runs (:mod:`.bridge`). It may import
``runtime/``, ``optim/``, the top-level science modules, ``lm/``, ``markov/`` and
``linear_attention/`` (the table is in ``tests/test_layers.py``).
"""
