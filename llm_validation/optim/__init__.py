"""Torch optimizers of the package: pure update kernels plus thin ``torch.optim`` shells.

Only plain SAM exists so far (:mod:`.sam`); Functional-SAM and the preconditioned variants extend
it by adding their own direction kernels next to :func:`sam_perturbation`.
"""

from .sam import SAM, sam_perturbation

__all__ = ["SAM", "sam_perturbation"]
