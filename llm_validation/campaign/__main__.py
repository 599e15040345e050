"""``python -m llm_validation.campaign``: the GPU campaign (see :mod:`llm_validation.campaign`)."""

from llm_validation.campaign import main

if __name__ == "__main__":
    raise SystemExit(main())
