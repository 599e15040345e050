r"""Variational problem synthesis (main paper, Section 7.1 and Appendix E; Table 5).

For each hard example, an instruction model is asked (with the exact prompt of Appendix E) to
write a new problem whose solution is the example's solution; the text between ``<question>``
and ``</question>`` becomes a synthetic example paired with the original solution (same source).
Failures are filtered: no ``<question>`` block, an empty or over-long question, the template's
placeholder left in, or a question that merely repeats the original or contains the solution.
Optionally the synthetic examples are *re-clustered*: scored by the proxy's recorded checkpoint
losses and kept only when they fall in the hard cluster (the paper found only ~50 % did).

The two Table 5 settings: ``synth`` = original data + the synthetic rephrasings (instead of
duplicates), ``both`` = original + duplicated hard examples + rephrasings.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from llm_validation.data.records import Example

__all__ = ["SYNTHESIS_PROMPT", "build_prompt", "parse_question", "SynthesisResult", "synthesize"]

#: The prompt of Appendix E (``{soln}`` is the target solution).
SYNTHESIS_PROMPT = """You are creating a math problem with this EXACT target solution:

<solution>
{soln}
</solution>

STEP 1 - Create Problem:
Write a problem that should lead to this solution. Match the type:
- Numbers → "Calculate", "Find", "Determine"
- Equations → "Simplify", "Solve for", "Express"
- Code → Create a realistic scenario requiring a program (do not say
  "write code for this solution")
- Proofs → "Prove that", "Show that"

Include all necessary information. Use high school/college level context.

STEP 2 - Verify Your Problem:
Solve the problem you created step-by-step. Show your work.

STEP 3 - Check Match:
Does your solution match the target? Compare carefully:
- Same numbers/values?
- Same format?
- Same type?

If NO MATCH → Revise your problem in Step 1 and repeat Steps 2-3.
If MATCH → Proceed to output.

FINAL OUTPUT (only after verification):

<question>
[Your verified problem - do NOT include the solution]
</question>

<verification>
[Brief confirmation: "Verified - solving gives {soln}"]
</verification>"""

_QUESTION_RE = re.compile(r"<question>\s*(.*?)\s*</question>", re.DOTALL | re.IGNORECASE)
_PLACEHOLDER = "[Your verified problem"


def build_prompt(solution: str, tokenizer=None) -> str:
    """The Appendix E prompt for ``solution``, in the tokenizer's chat template when it has one."""
    text = SYNTHESIS_PROMPT.replace("{soln}", solution)
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
        )
    return text


def parse_question(completion: str, *, original: str = "", solution: str = "",
                   max_chars: int = 2000) -> tuple[str | None, str]:  # fmt: skip
    r"""The synthetic question in ``completion``, or ``None`` and why it was rejected.

    Returns:
        ``(question, "ok")`` or ``(None, reason)`` with reason ``no_question_tag``, ``empty``,
        ``placeholder``, ``too_long``, ``copy_of_original`` or ``contains_solution``.

    Examples:
        >>> parse_question("<question>\nFind 3 + 4.\n</question> <verification>...")
        ('Find 3 + 4.', 'ok')
        >>> parse_question("I could not do it.")
        (None, 'no_question_tag')
    """
    found = _QUESTION_RE.findall(completion)
    if not found:
        return None, "no_question_tag"
    q = found[-1].strip()
    if not q:
        return None, "empty"
    if _PLACEHOLDER in q:
        return None, "placeholder"
    if len(q) > max_chars:
        return None, "too_long"
    if original and q.strip().lower() == original.strip().lower():
        return None, "copy_of_original"
    sol = solution.strip()
    if len(sol) >= 20 and sol in q:
        return None, "contains_solution"
    return q, "ok"


@dataclasses.dataclass(frozen=True)
class SynthesisResult:
    """Synthetic examples and the bookkeeping of the filter.

    Attributes:
        examples: accepted synthetic examples (``index`` = the original's index).
        rejected: ``{reason: count}`` of the filtered generations.
        attempted: number of hard examples prompted.
        completions: the raw generations (same order as the prompted examples).
    """

    examples: tuple[Example, ...]
    rejected: dict[str, int]
    attempted: int
    completions: tuple[str, ...]

    @property
    def acceptance(self) -> float:
        """Fraction of the prompted examples that gave an accepted problem."""
        return len(self.examples) / self.attempted if self.attempted else 0.0


def synthesize(
    examples: Sequence[Example],
    model,
    tokenizer,
    *,
    max_new_tokens: int = 384,
    batch_size: int = 16,
    max_question_chars: int = 2000,
    progress: bool = False,
) -> SynthesisResult:
    """Rephrase each of ``examples`` (the hard ones) with ``model`` and the Appendix E prompt.

    Generation is greedy, batched (:func:`llm_validation.evaluate.generation.generate`); a rephrased
    example keeps the original's solution (``output``) and source.
    """
    from llm_validation.evaluate.generation import generate

    prompts = [build_prompt(e.output, tokenizer) for e in examples]
    comps = generate(
        model, tokenizer, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size,
        stop_strings=("</question>",), progress=progress, desc="synthesis",
    )  # fmt: skip
    accepted, rejected = [], {}
    for ex, comp in zip(examples, comps, strict=True):
        # The stop string cuts "</question>"; close the tag again before parsing.
        text = comp + "</question>" if "<question>" in comp and "</question>" not in comp else comp
        q, why = parse_question(text, original=ex.instruction, solution=ex.output,
                                max_chars=max_question_chars)  # fmt: skip
        if q is None:
            rejected[why] = rejected.get(why, 0) + 1
        else:
            accepted.append(Example(q, ex.output, ex.source, ex.index))
    return SynthesisResult(tuple(accepted), rejected, len(examples), tuple(comps))
