"""Experiments: the pipeline, the demo, the confirmation and the sharpness diagnostics.

Experiments built from the floors below: the pipeline's stages on one run folder (:mod:`.pipeline`),
the tiny demo (:mod:`.demo`), the end-to-end confirmation (:mod:`.confirm`), the sharpness
diagnostics on a real LM (:mod:`.sharpness`) and the upsampling data tool (:mod:`.upsample`).
It may import every floor below (``data/``, ``config``, ``runs``, ``evaluate/``, ``models/``,
``select/``, ``train/``), never ``campaign/`` or the CLI (the table is in ``tests/test_layers.py``).
"""
