"""Selection: which examples to upsample, and synthesis.

Selection: choosing the examples to upsample from proxy loss trajectories (:mod:`.clustering`) and
variational problem synthesis (:mod:`.synthesis`). It may import ``data/``, ``config``, ``runs``,
``evaluate/`` and ``models/`` (the table is in ``tests/test_layers.py``).
"""
