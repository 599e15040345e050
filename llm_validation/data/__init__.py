"""Data, the pipeline's bottom floor.

Data, the pipeline's bottom floor: records and benchmarks in the MathInstruct format
(:mod:`.records`) and the generated corpus (:mod:`.corpus`). It may import nothing else of
``llm_validation`` (the table is in ``tests/test_layers.py``).
"""
