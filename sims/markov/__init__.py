"""Seed 004: sparse-attention Markov chains and the head-coupling tensor gradient flow.

Yüksel, Alvarez Lucendo, Flammarion: transformers learn the chain in stages.

Modules: :mod:`.chain` (data, Eq. 1-3, best restricted predictors), :mod:`.models` (minimal and
full transformers), :mod:`.train` (Table 2 training, scheduler, stage metrics and bands),
:mod:`.tensor_dynamics` (Section 3, App. D), :mod:`.experiments` (named scales),
:mod:`.beyond` (SAM / upsampling stage uniformity), :mod:`.plotting` (shared panels).
The coupling-time law of the tensor flow is derived in :mod:`theory.markov_coupling`.
"""
