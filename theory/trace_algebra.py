"""Matrix identities for symbolic dimensions: a small tensor-network ("free trace") algebra.

The checks of :mod:`theory.attention_model` and :mod:`theory.merged_kq` multiply out matrices of
a fixed size (d = 2, 3). This module proves the same identities **for every dimension**: an
expression is a sum of tensor networks whose nodes are named matrices (letters with symbolic
dimension labels ``"d"``, ``"H"``, ``"D"``; ``"1"`` for the trivial side of a vector) joined by
contracted indices. Two expressions are equal for all dimensions and all values of the letters
when their networks, brought to a canonical form, have equal coefficients. The canonical form uses
only rules that hold in every dimension:

* a product is read along its index path; a closed loop is a trace, invariant under cyclic
  rotation and under transposition (``tr X = tr Xᵀ``);
* a path that passes through a trivial (``"1"``) side splits into scalar factors ``uᵀ A w``,
  each equal to its transpose;
* symmetric letters (``Σ``, ``E[Σ̂²]``) equal their transpose; an identity node merges its two
  indices, and an identity loop is the dimension ``d``.

The rules are sound (equal canonical forms ⟹ equal matrices in every dimension). They are not
complete: an identity that needs, e.g., Σ and E[Σ̂²] to commute is not recognised, so a check
that does not reach zero here is *not* a refutation — refutations use explicit matrices.

Gaussian expectations act on the networks as well: ``E[x_i x_j] = C_ij`` and, for more copies,
the sum over pairings (Isserlis), which :func:`isserlis_from_mgf` derives at order 4 from the
moment generating function with rules that do not depend on the dimension. The sample covariance
``Σ̂ = (1/N) Σ_n x_n x_nᵀ`` is expanded into the ``n = m`` and ``n ≠ m`` parts before taking
expectations, so ``E[Σ̂ A Σ̂]`` is derived, not typed.

Examples:
    >>> alg = Algebra()
    >>> A, B = alg.letter("A", "d", "d"), alg.letter("B", "d", "d")
    >>> alg.equal((A * B).trace(), (B.T * A.T).trace())
    True
    >>> alg.equal((A * B).trace(), (B * A.T).trace())
    False
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable, Mapping

import sympy as sp

__all__ = [
    "Algebra",
    "MatExpr",
    "isserlis_from_mgf",
    "isserlis_pairings",
]

ONE = "1"
_ROW, _COL = -1, -2  # labels of the free row / column index of every term


@dataclasses.dataclass(frozen=True)
class _Letter:
    name: str
    rows: str
    cols: str
    symmetric: bool


# A node is (letter, row index, column index); an index is an int, None on a trivial side.
Node = tuple[str, "int | None", "int | None"]


@dataclasses.dataclass(frozen=True)
class _Term:
    coeff: sp.Expr
    nodes: tuple[Node, ...]


class Algebra:
    """A set of named letters (matrices with dimension labels) and the canonical form.

    Args:
        dims: optional map from dimension label to the SymPy symbol used for an identity loop
            (default: a positive integer symbol with the label's name).
    """

    def __init__(self, dims: Mapping[str, sp.Expr] | None = None):
        self.letters: dict[str, _Letter] = {}
        self._dims = dict(dims or {})
        self._counter = itertools.count(1)

    # -- construction ---------------------------------------------------------------------------
    def dim(self, label: str) -> sp.Expr:
        """The SymPy value of dimension ``label`` (``tr I_label``)."""
        if label == ONE:
            return sp.Integer(1)
        if label not in self._dims:
            self._dims[label] = sp.Symbol(label, positive=True, integer=True)
        return self._dims[label]

    def letter(self, name: str, rows: str, cols: str, *, symmetric: bool = False) -> MatExpr:
        """Declare (or reuse) letter ``name`` of shape ``rows x cols`` and return it.

        Raises:
            ValueError: if ``name`` is reserved/empty, redeclared with another shape, or declared
                symmetric while not square.
        """
        if not name or name == "I" or "'" in name or ":" in name:
            raise ValueError(f"`name` must be non-empty, not 'I', without quote or colon; got "
                             f"{name!r}.")  # fmt: skip
        if symmetric and rows != cols:
            raise ValueError(f"symmetric letter {name!r} must be square; got {rows} x {cols}.")
        new = _Letter(name, rows, cols, symmetric)
        old = self.letters.setdefault(name, new)
        if old != new:
            raise ValueError(f"letter {name!r} already declared as {old}; got {new}.")
        node = (name, _ROW if rows != ONE else None, _COL if cols != ONE else None)
        return MatExpr(self, (rows, cols), [_Term(sp.Integer(1), (node,))])

    def eye(self, dim: str) -> MatExpr:
        """Identity matrix of dimension ``dim``."""
        if dim == ONE:
            return self.scalar(1)
        return MatExpr(self, (dim, dim), [_Term(sp.Integer(1), ((f"I:{dim}", _ROW, _COL),))])

    def scalar(self, value) -> MatExpr:
        """A 1 x 1 expression with SymPy value ``value``."""
        return MatExpr(self, (ONE, ONE), [_Term(sp.sympify(value), ())])

    def zero(self, rows: str, cols: str) -> MatExpr:
        """The zero matrix of shape ``rows x cols``."""
        return MatExpr(self, (rows, cols), [])

    def _fresh(self) -> int:
        return next(self._counter)

    # -- canonical form ---------------------------------------------------------------------------
    def _emit(self, letter: str, forward: bool) -> str:
        if letter.startswith("I:"):
            return "I"
        sym = self.letters[letter].symmetric
        return letter if (forward or sym) else letter + "'"

    def _rt(self, word: tuple[str, ...]) -> tuple[str, ...]:
        """Reverse-transpose of a word (the word of the transposed product)."""
        out = []
        for w in reversed(word):
            base = w[:-1] if w.endswith("'") else w
            if base == "I" or self.letters[base].symmetric:
                out.append(base)
            else:
                out.append(base if w.endswith("'") else base + "'")
        return tuple(out)

    def canonical(self, term: _Term) -> tuple[sp.Expr, tuple]:
        """``(coefficient, key)`` of a term; equal keys mean equal networks in every dimension."""
        coeff = term.coeff
        nodes = list(term.nodes)
        # 1. contract identity nodes (merge their two indices)
        changed = True
        while changed:
            changed = False
            for pos, (name, i, j) in enumerate(nodes):
                if not name.startswith("I:") or (i in (_ROW, _COL) and j in (_ROW, _COL)):
                    continue
                del nodes[pos]
                if i == j:  # an identity loop: tr I = dim
                    coeff *= self.dim(name[2:])
                else:
                    keep, drop = (j, i) if j in (_ROW, _COL) else (i, j)
                    nodes = [(n, keep if a == drop else a, keep if b == drop else b)
                             for n, a, b in nodes]  # fmt: skip
                changed = True
                break
        # 2. walk the paths
        where: dict[int, list[tuple[int, int]]] = {}
        for pos, (_, i, j) in enumerate(nodes):
            for side, idx in ((0, i), (1, j)):
                if idx is not None:
                    where.setdefault(idx, []).append((pos, side))
        for idx, sides in where.items():
            expected = 1 if idx in (_ROW, _COL) else 2
            if len(sides) != expected:
                raise RuntimeError(f"index {idx} appears {len(sides)} times (expected {expected}).")
        used = [False] * len(nodes)

        def walk(pos: int, side: int) -> tuple[list[str], int | None]:
            """Traverse starting by entering node ``pos`` at ``side``; return word and end index."""
            word = []
            while True:
                used[pos] = True
                name, i, j = nodes[pos]
                word.append(self._emit(name, forward=(side == 0)))
                out = j if side == 0 else i
                if out is None or out in (_ROW, _COL):
                    return word, out
                nxt = [(p, s) for p, s in where[out] if not (p == pos and s == 1 - side)]
                pos, side = nxt[0]
                if used[pos]:  # closed a loop
                    return word, out

        main: tuple = ()
        if _ROW in where:
            w, end = walk(*where[_ROW][0])
            if end == _COL:
                main = ("path", tuple(w))
            else:
                tail: tuple = ()
                if _COL in where:
                    w2, _ = walk(*where[_COL][0])  # walked backwards from the column index
                    tail = self._rt(tuple(w2))
                main = ("outer", tuple(w), tail)
        elif _COL in where:
            w2, _ = walk(*where[_COL][0])
            main = ("row", self._rt(tuple(w2)))
        scalars = []
        for pos, (_, i, j) in enumerate(nodes):  # chains with a trivial end
            if used[pos] or (i is not None and j is not None):
                continue
            w, _ = walk(pos, 0 if i is None else 1)
            w = tuple(w)
            scalars.append(("chain", min(w, self._rt(w))))
        for pos in range(len(nodes)):  # remaining: closed loops (traces)
            if used[pos]:
                continue
            w, _ = walk(pos, 0)
            w = tuple(w)
            rots = [w[k:] + w[:k] for k in range(len(w))]
            rw = self._rt(w)
            rots += [rw[k:] + rw[:k] for k in range(len(rw))]
            scalars.append(("trace", min(rots)))
        return coeff, (main, tuple(sorted(scalars)))

    def normal_form(self, expr: MatExpr) -> dict[tuple, sp.Expr]:
        """Canonical key -> simplified coefficient (zero coefficients dropped)."""
        out: dict[tuple, sp.Expr] = {}
        for t in expr.terms:
            c, key = self.canonical(t)
            out[key] = out.get(key, 0) + c
        return {k: c for k, c in ((k, sp.cancel(sp.together(sp.expand(c)))) for k, c in
                                  out.items()) if c != 0}  # fmt: skip

    def residual(self, a: MatExpr, b: MatExpr) -> dict[tuple, sp.Expr]:
        """Normal form of ``a - b`` (empty when the identity is proved for every dimension)."""
        if a.shape != b.shape:
            raise ValueError(f"shapes differ: {a.shape} vs {b.shape}.")
        return self.normal_form(a - b)

    def equal(self, a: MatExpr, b: MatExpr, *, expect: bool = True) -> bool:
        """Whether ``a = b`` is proved for every dimension (see the module docstring).

        Inside a running claim the outcome is logged (:func:`theory.verify.record`), with
        ``expect=False`` where the check needs the two to differ (a printed form that is wrong).
        """
        from .verify import record

        return record("trace-algebra equal", not self.residual(a, b), expected=expect)


def _relabel(nodes: Iterable[Node], mapping: Callable[[int], int]) -> tuple[Node, ...]:
    return tuple((n, None if i is None else mapping(i), None if j is None else mapping(j))
                 for n, i, j in nodes)  # fmt: skip


class MatExpr:
    """A sum of tensor networks with one free row and one free column index (see module doc)."""

    def __init__(self, alg: Algebra, shape: tuple[str, str], terms: list[_Term]):
        self.alg, self.shape, self.terms = alg, shape, terms

    # -- arithmetic -------------------------------------------------------------------------------
    def _coerce(self, other) -> MatExpr:
        if isinstance(other, MatExpr):
            return other
        return self.alg.scalar(other)

    def __add__(self, other) -> MatExpr:
        other = self._coerce(other)
        if self.shape != other.shape:
            if self.shape == (ONE, ONE) and not self.terms:
                return other
            raise ValueError(f"cannot add shapes {self.shape} and {other.shape}.")
        return MatExpr(self.alg, self.shape, self.terms + other.terms)

    __radd__ = __add__

    def __neg__(self) -> MatExpr:
        return self * -1

    def __sub__(self, other) -> MatExpr:
        return self + (-self._coerce(other))

    def __rsub__(self, other) -> MatExpr:
        return self._coerce(other) - self

    def _scale(self, c) -> MatExpr:
        c = sp.sympify(c)
        return MatExpr(self.alg, self.shape, [_Term(t.coeff * c, t.nodes) for t in self.terms])

    def __mul__(self, other) -> MatExpr:
        if not isinstance(other, MatExpr):
            return self._scale(other)
        if self.shape == (ONE, ONE) or other.shape == (ONE, ONE):
            shape = other.shape if self.shape == (ONE, ONE) else self.shape
            terms = [_Term(a.coeff * b.coeff,
                           self._inner_fresh(a.nodes) + self._inner_fresh(b.nodes))
                     for a in self.terms for b in other.terms]  # fmt: skip
            return MatExpr(self.alg, shape, terms)
        if self.shape[1] != other.shape[0]:
            raise ValueError(f"cannot multiply {self.shape} by {other.shape}.")
        terms = []
        for a in self.terms:
            for b in other.terms:
                k = self.alg._fresh()
                ma: dict[int, int] = {}
                mb: dict[int, int] = {}

                def la(i, ma=ma, k=k):
                    if i == _ROW:
                        return _ROW
                    if i == _COL:
                        return k
                    return ma.setdefault(i, self.alg._fresh())

                def lb(i, mb=mb, k=k):
                    if i == _COL:
                        return _COL
                    if i == _ROW:
                        return k
                    return mb.setdefault(i, self.alg._fresh())

                terms.append(_Term(a.coeff * b.coeff, _relabel(a.nodes, la) + _relabel(b.nodes,
                                                                                         lb)))
        return MatExpr(self.alg, (self.shape[0], other.shape[1]), terms)

    def _inner_fresh(self, nodes) -> tuple[Node, ...]:
        """Give the contracted (non-free) indices of a term fresh labels."""
        m: dict[int, int] = {}
        return _relabel(nodes, lambda i: i if i in (_ROW, _COL) else m.setdefault(i,
                                                                                  self.alg._fresh()))

    def __rmul__(self, other) -> MatExpr:
        return self._scale(other)

    @property
    def T(self) -> MatExpr:  # noqa: N802 - matrix transpose
        """Transpose."""

        def swap(i):
            return {_ROW: _COL, _COL: _ROW}.get(i, i)

        return MatExpr(self.alg, (self.shape[1], self.shape[0]),
                       [_Term(t.coeff, _relabel(t.nodes, swap)) for t in self.terms])

    def trace(self) -> MatExpr:
        """Trace (a 1 x 1 expression).

        Raises:
            ValueError: if the expression is not square.
        """
        if self.shape[0] != self.shape[1]:
            raise ValueError(f"trace of a non-square expression {self.shape}.")
        if self.shape == (ONE, ONE):
            return self
        terms = []
        for t in self.terms:
            k = self.alg._fresh()
            terms.append(_Term(t.coeff, _relabel(t.nodes, lambda i, k=k: k if i in (_ROW, _COL)
                                                 else i)))  # fmt: skip
        return MatExpr(self.alg, (ONE, ONE), terms)

    # -- substitution, derivatives -------------------------------------------------------------
    def _replace_nodes(self, which: Callable[[Node], bool], by: Callable[[Node], MatExpr],
                       single: bool) -> MatExpr:  # fmt: skip
        """Replace nodes selected by ``which`` by the network ``by(node)``.

        All selected nodes at once, or (``single``) one at a time summed over the positions: the
        product rule.
        """
        out: list[_Term] = []
        for t in self.terms:
            positions = [p for p, n in enumerate(t.nodes) if which(n)]
            choices = [[p] for p in positions] if single else ([positions] if positions else [])
            if not choices:
                if not single:
                    out.append(t)
                continue
            for chosen in choices:
                partial = [_Term(t.coeff, tuple(n for p, n in enumerate(t.nodes)
                                                if p not in chosen))]  # fmt: skip
                for p in chosen:
                    name, i, j = t.nodes[p]
                    rep = by(t.nodes[p])
                    new = []
                    for a in partial:
                        for b in rep.terms:
                            m: dict[int, int] = {}

                            def lab(x, i=i, j=j, m=m):
                                if x == _ROW:
                                    return i
                                if x == _COL:
                                    return j
                                return m.setdefault(x, self.alg._fresh())

                            nb = _relabel(b.nodes, lab)
                            new.append(_Term(a.coeff * b.coeff, a.nodes + nb))
                    partial = new
                out += partial
        return MatExpr(self.alg, self.shape, out)

    def subs(self, mapping: Mapping[str, MatExpr]) -> MatExpr:
        """Replace letters by expressions of the same shape (e.g. ``M -> R + v k qᵀ``).

        Raises:
            ValueError: on a shape mismatch.
        """
        for name, e in mapping.items():
            let = self.alg.letters[name]
            if e.shape != (let.rows, let.cols):
                raise ValueError(f"`{name}` has shape {(let.rows, let.cols)}; got {e.shape}.")
        return self._replace_nodes(lambda n: n[0] in mapping, lambda n: mapping[n[0]],
                                   single=False)  # fmt: skip

    def subs_coeff(self, mapping: Mapping) -> MatExpr:
        """Substitute in the (commutative) SymPy coefficients."""
        return MatExpr(self.alg, self.shape,
                       [_Term(sp.sympify(t.coeff).subs(mapping), t.nodes) for t in self.terms])

    def diff(self, name: str, direction: MatExpr) -> MatExpr:
        """Directional derivative ``d/dε expr(name + ε·direction)`` at ε = 0 (exact)."""
        let = self.alg.letters[name]
        if direction.shape != (let.rows, let.cols):
            raise ValueError(f"direction for `{name}` must have shape {(let.rows, let.cols)}; "
                             f"got {direction.shape}.")  # fmt: skip
        return self._replace_nodes(lambda n: n[0] == name, lambda n: direction, single=True)

    def diff_coeff(self, sym: sp.Symbol) -> MatExpr:
        """Derivative with respect to a scalar symbol appearing in the coefficients."""
        return MatExpr(self.alg, self.shape,
                       [_Term(sp.diff(t.coeff, sym), t.nodes) for t in self.terms])

    # -- expectations -----------------------------------------------------------------------------
    def expect_gaussian(self, x: str, cov: MatExpr) -> MatExpr:
        """``E_x`` for a vector letter ``x ~ N(0, cov)`` independent of the other letters.

        Odd numbers of copies give 0; an even number gives the sum over pairings (Isserlis), each
        pair ``x_i x_j`` becoming the network ``cov_ij`` (see :func:`isserlis_from_mgf`).
        """
        let = self.alg.letters[x]
        if let.cols != ONE:
            raise ValueError(f"`{x}` must be a column vector; got shape {(let.rows, let.cols)}.")
        out: list[_Term] = []
        for t in self.terms:
            pos = [p for p, n in enumerate(t.nodes) if n[0] == x]
            if len(pos) % 2:
                continue
            rest = tuple(n for p, n in enumerate(t.nodes) if p not in pos)
            if not pos:
                out.append(t)
                continue
            for pairing in isserlis_pairings(pos):
                partial = [_Term(t.coeff, rest)]
                for p, q in pairing:
                    i, j = t.nodes[p][1], t.nodes[q][1]
                    new = []
                    for a in partial:
                        for b in cov.terms:
                            m: dict[int, int] = {}

                            def lab(z, i=i, j=j, m=m):
                                if z == _ROW:
                                    return i
                                if z == _COL:
                                    return j
                                return m.setdefault(z, self.alg._fresh())

                            new.append(_Term(a.coeff * b.coeff, a.nodes + _relabel(b.nodes, lab)))
                    partial = new
                out += partial
        return MatExpr(self.alg, self.shape, out)

    def expect_sample_cov(self, name: str, x: str, cov: MatExpr, N) -> MatExpr:
        """``E`` over ``name = Σ̂ = (1/N) Σ_n x_n x_nᵀ`` with i.i.d. ``x_n ~ N(0, cov)``.

        Each occurrence of ``Σ̂`` is written as ``x_n x_nᵀ / N``; a product of ``m`` copies is the
        average over the index tuples ``(n_1..n_m)`` grouped by which indices coincide (set
        partitions; a block of size b has N(N-1)... choices), and each block gets its own
        independent Gaussian vector. Supports up to 3 copies per term.
        """
        let = self.alg.letters[name]
        if let.rows != let.cols or not let.symmetric:
            raise ValueError(f"`{name}` must be a symmetric square letter.")
        N = sp.sympify(N)
        vec_rows = let.rows
        out = self.alg.zero(*self.shape)
        by_count: dict[int, list[_Term]] = {}
        for t in self.terms:
            by_count.setdefault(sum(1 for n in t.nodes if n[0] == name), []).append(t)
        for m, terms in by_count.items():
            part = MatExpr(self.alg, self.shape, terms)
            if m == 0:
                out = out + part
                continue
            if m > 3:
                raise ValueError(f"at most 3 copies of `{name}` per term; got {m}.")
            for blocks in _set_partitions(list(range(m))):
                # number of index tuples with exactly this coincidence pattern, over N^m
                count = sp.Integer(1)
                for r in range(len(blocks)):
                    count *= N - r
                weight = count / N**m
                vecs = [self.alg.letter(f"{x}__{b}", vec_rows, ONE) for b in range(len(blocks))]
                owner = {k: b for b, blk in enumerate(blocks) for k in blk}
                e = part._replace_occurrences(name, [vecs[owner[k]] * vecs[owner[k]].T
                                                     for k in range(m)])  # fmt: skip
                for b in range(len(blocks)):
                    e = e.expect_gaussian(f"{x}__{b}", cov)
                out = out + e * weight
        return out

    def _replace_occurrences(self, name: str, reps: list[MatExpr]) -> MatExpr:
        """Replace the k-th occurrence of ``name`` in every term by ``reps[k]``."""
        out = []
        for t in self.terms:
            counter = itertools.count()
            occ = {p: next(counter) for p, n in enumerate(t.nodes) if n[0] == name}
            partial = [_Term(t.coeff, tuple(n for p, n in enumerate(t.nodes) if p not in occ))]
            for p, k in occ.items():
                _, i, j = t.nodes[p]
                new = []
                for a in partial:
                    for b in reps[k].terms:
                        m: dict[int, int] = {}

                        def lab(z, i=i, j=j, m=m):
                            if z == _ROW:
                                return i
                            if z == _COL:
                                return j
                            return m.setdefault(z, self.alg._fresh())

                        new.append(_Term(a.coeff * b.coeff, a.nodes + _relabel(b.nodes, lab)))
                partial = new
            out += partial
        return MatExpr(self.alg, self.shape, out)

    def evaluate(self, values: Mapping[str, object], dims: Mapping[str, int],
                 coeffs: Mapping | None = None):  # fmt: skip
        """Numeric value for concrete matrices (an independent check of the canonical form).

        Args:
            values: letter name -> array of the declared shape (vectors as ``(n,)``).
            dims: dimension label -> size (for identity matrices).
            coeffs: substitution for the SymPy symbols in the coefficients.

        Returns:
            A numpy array of shape ``(rows, cols)`` (``1`` for a trivial side).
        """
        import numpy as np

        letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
        rows = 1 if self.shape[0] == ONE else dims[self.shape[0]]
        cols = 1 if self.shape[1] == ONE else dims[self.shape[1]]
        total = np.zeros((rows, cols))
        for t in self.terms:
            c = float(sp.sympify(t.coeff).subs(dict(coeffs or {})))
            names: dict[int, str] = {}

            def lab(i, names=names):
                return names.setdefault(i, letters[len(names)])

            ops, subs = [], []
            for name, i, j in t.nodes:
                if name.startswith("I:"):
                    arr = np.eye(dims[name[2:]])
                else:
                    arr = np.asarray(values[name], float)
                    arr = arr.reshape(arr.shape[0], -1) if arr.ndim == 1 and j is not None else arr
                idx = "".join(lab(x) for x in (i, j) if x is not None)
                ops.append(arr.reshape(-1) if len(idx) == 1 else arr)
                subs.append(idx)
            out = "".join(lab(x) for x in (_ROW, _COL) if x in names)
            val = np.einsum(",".join(subs) + "->" + out, *ops) if ops else np.array(1.0)
            total += c * np.asarray(val).reshape(rows, cols)
        return total

    def __repr__(self) -> str:
        nf = self.alg.normal_form(self)
        return f"MatExpr{self.shape}({len(nf)} canonical terms)"


def _set_partitions(items: list[int]) -> list[list[list[int]]]:
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    out = []
    for part in _set_partitions(rest):
        out.append([[first], *part])
        for k in range(len(part)):
            out.append(part[:k] + [[first, *part[k]]] + part[k + 1:])
    return out


def isserlis_pairings(items: list) -> list[list[tuple]]:
    """All perfect matchings of ``items`` (empty list for an odd count)."""
    if not items:
        return [[]]
    if len(items) % 2:
        return []
    first, rest = items[0], items[1:]
    out = []
    for k, other in enumerate(rest):
        for m in isserlis_pairings(rest[:k] + rest[k + 1:]):
            out.append([(first, other), *m])
    return out


def isserlis_from_mgf(order: int = 4) -> tuple[sp.Expr, sp.Expr]:
    """``E[x_a x_b ...]`` from the MGF ``exp(tᵀΣt/2)`` by dimension-free rules, and the pairing sum.

    With ``g_a = (Σt)_a``: ``∂_i exp(φ) = g_i exp(φ)`` and ``∂_i g_a = Σ_ai`` hold in every
    dimension, so repeated differentiation at ``t = 0`` gives the moment for symbolic ``d``.

    Returns:
        ``(derived, pairings)``: both as polynomials in a symmetric function ``S(i, j)`` of index
        symbols; they are equal iff Isserlis' formula holds at this order.
    """
    if not isinstance(order, int) or order < 1 or order > 8:
        raise ValueError(f"`order` must be an int in 1..8; got {order!r}.")
    idx = sp.symbols(f"i1:{order + 1}")
    f = sp.Symbol("f")
    g = sp.Function("g")
    S = sp.Function("S")

    def s(a, b):  # symmetric: canonical argument order
        return S(*sorted((a, b), key=str))

    def D(expr, i):  # noqa: N802 - the derivative operator
        expr = sp.expand(expr)
        if expr.is_Add:
            return sp.Add(*[D(a, i) for a in expr.args])
        factors = expr.as_ordered_factors() if expr.is_Mul else [expr]
        total = 0
        for k, fac in enumerate(factors):
            base, exp = fac.as_base_exp()
            if base == f:
                dfac = exp * base ** (exp - 1) * g(i) * f
            elif isinstance(base, sp.Function) and base.func == g:
                dfac = exp * base ** (exp - 1) * s(base.args[0], i)
            else:
                continue
            total += sp.Mul(*factors[:k], dfac, *factors[k + 1:])
        return sp.expand(total)

    expr = f
    for i in idx:
        expr = D(expr, i)
    derived = sp.expand(expr.subs(f, 1).replace(lambda e: isinstance(e, sp.Function)
                                                and e.func == g, lambda e: 0))  # fmt: skip
    pairs = sp.expand(sum(sp.Mul(*[s(a, b) for a, b in m]) for m in isserlis_pairings(list(idx))))
    return derived, pairs
