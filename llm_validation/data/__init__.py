"""Data, the pipeline's bottom floor.

Data, the pipeline's bottom floor: records and benchmarks in the MathInstruct format
(:mod:`.records`), the generated corpus (:mod:`.corpus`) and users' own instruction data in
JSON/JSONL/``datasets`` form (:mod:`.formats`). It may import nothing else of
``llm_validation`` (the table is in ``tests/test_layers.py``).
"""
