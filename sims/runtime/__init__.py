"""The simulations' plumbing: CLI, I/O, parallel runs, errors, extras, devices, figures.

The plumbing every simulation uses: the CLI contract (:mod:`.cli`, :mod:`.errors`), result files
with provenance and run locks (:mod:`.io`), parallel sweeps and their executors (:mod:`.parallel`,
:mod:`.executors`), optional extras (:mod:`.extras`), device checks (:mod:`.devices`) and figure
saving (:mod:`.plotting`). It may import nothing else of ``sims`` (the table is in
``tests/test_layers.py``).
"""
