"""Distinct simulations of a batch of candidates, and the simulations kept between calls.

Candidates that differ only in entries of ``x`` a sequence's simulation does not read share
one simulation (:func:`distinct_columns`); the simulations of the last small call (a trial
step) are kept (:class:`SimulationCache`) for the next one (the signal-only columns of the
finite-difference Jacobian that follows simulate that very point).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

SIM_CACHE = 4
"""Calls with at most this many distinct simulations per sequence keep them for the next."""


class DistinctColumns(NamedTuple):
    """Distinct columns of a matrix (see :func:`distinct_columns`).

    Attributes:
      first: ``(u,)`` index of the first column of each distinct value.
      inverse: ``(k,)`` index into ``first`` of every column.
      keys: The bytes of each distinct column.
    """

    first: np.ndarray
    inverse: np.ndarray
    keys: list[bytes]


class SimBatch(NamedTuple):
    """Simulations of one sequence (leading axis: simulations; one simulation without it).

    Attributes:
      state: ``(u, nstep, nstate)`` raw MuJoCo states (one step ahead; ``None`` where not
        needed), sensordata: ``(u, nstep, nsensordata)``, ok: ``(u,)`` finite,
        x0: ``(u, nstate)`` initial states.
    """

    state: Any
    sensordata: np.ndarray
    ok: np.ndarray
    x0: np.ndarray


def distinct_columns(A: np.ndarray) -> DistinctColumns:
    """Distinct columns of ``A (m, k)`` in order of first appearance.

    Returns:
      ``(first, inverse, keys)``: ``(u,)`` index of the first column of each distinct value,
      ``(k,)`` index into ``first`` of every column, so ``A[:, first][:, inverse] == A``, and
      the bytes of each distinct column. Columns that are all distinct give
      ``first == inverse == arange(k)``.
    """
    seen: dict[bytes, int] = {}
    first: list[int] = []
    inverse = np.empty(A.shape[1], dtype=np.intp)
    cols = np.ascontiguousarray(A.T)
    for j in range(cols.shape[0]):
        key = cols[j].tobytes()
        u = seen.get(key)
        if u is None:
            u = seen[key] = len(first)
            first.append(j)
        inverse[j] = u
    return DistinctColumns(np.asarray(first, dtype=np.intp), inverse, list(seen))


def sim_rows(
    pred: SimBatch | None,
    run: list[int],
    keys: list[bytes],
    cache: dict[bytes, SimBatch],
) -> list[SimBatch]:
    """Every distinct simulation of one sequence, in order: the ones simulated now (``run``,
    views into ``pred``) and the cached ones."""
    at = {u: j for j, u in enumerate(run)}
    return [
        SimBatch._make(a[at[u]] for a in pred) if u in at and pred is not None else cache[key]
        for u, key in enumerate(keys)
    ]


def stacked(sims: list[SimBatch], with_state: bool) -> SimBatch:
    """The fields of ``sims`` stacked (new arrays); the states ``None`` unless asked.
    (``np.array`` of a list: the same copy as ``np.stack``, at less cost.)"""
    state = np.array([s[0] for s in sims]) if with_state else None
    sens, ok, x0 = (np.array([s[f] for s in sims]) for f in (1, 2, 3))
    return SimBatch(state, sens, ok, x0)


@dataclass
class SimulationCache:
    """The distinct simulations of the last small call, per sequence, by simulation key (the
    bytes of the sequence's rows of ``x``), for one parameter structure ``key``."""

    entries: dict[int, dict[bytes, SimBatch]] = field(default_factory=dict)
    key: tuple[object, ...] | None = None

    def clear(self) -> None:
        """Forgets every kept simulation."""
        self.entries = {}
        self.key = None

    def valid_for(self, key: tuple[object, ...] | None) -> dict[int, dict[bytes, SimBatch]]:
        """The kept simulations when they are of structure ``key`` (else none)."""
        return self.entries if self.key == key else {}

    def keep(
        self,
        per_seq: Sequence[DistinctColumns],
        preds: dict[int, SimBatch],
        mixed: dict[int, list[SimBatch]],
        key: tuple[object, ...] | None,
        copy: bool,
    ) -> None:
        """Keeps this call's simulations when every sequence has at most :data:`SIM_CACHE`.

        ``copy``: keep copies (code that may write into the predictions receives them), else
        views of this call's rollout arrays.
        """
        if not all(len(d.first) <= SIM_CACHE for d in per_seq):
            return
        self.entries = {}
        for i, d in enumerate(per_seq):
            sims: Iterable[SimBatch] = mixed.get(i) or [
                SimBatch._make(a[u] for a in preds[i]) for u in range(len(d.keys))
            ]
            self.entries[i] = {
                k: SimBatch._make(a.copy() for a in sim) if copy else sim
                for k, sim in zip(d.keys, sims, strict=True)
            }
        self.key = key
