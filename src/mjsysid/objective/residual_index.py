"""Which measured signal and time each residual entry belongs to (diagnostics)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mjsysid.objective.alignment import PreparedSequence


def describe_entry(
    sequences: Sequence[PreparedSequence], offsets: np.ndarray, i: int, built_in: bool
) -> str:
    """Which model, sequence, signal and time residual entry ``i`` belongs to.

    Args:
      sequences: The sequences, in residual order. offsets: ``(nseq + 1,)`` block starts.
      built_in: The blocks are the built-in residual (else a block is described by sample
        and column only where its size is that of the measured data).
    """
    b = int(np.searchsorted(offsets, i, side="right") - 1)
    if b < 0 or b >= len(sequences):
        return f"residual entry {i}"
    seq = sequences[b]
    local = i - int(offsets[b])
    ncol = seq.meas.data.shape[1]
    if built_in or offsets[b + 1] - offsets[b] == seq.meas.data.size:
        row, col = divmod(local, ncol)
        if row < seq.meas.times.size:
            return (
                f"{seq.label}, signal {seq.column_labels[col]!r} at t={seq.meas.times[row]:.6g} s"
            )
    return f"{seq.label}, residual entry {local}"


def signal_ids(sequences: Sequence[PreparedSequence]) -> np.ndarray:
    """``(n,)`` id of the measured signal behind each entry of the built-in residual."""
    ids: dict[str, int] = {}
    parts = []
    for seq in sequences:
        col_ids = np.empty(seq.meas.data.shape[1], dtype=np.int64)
        assert seq.meas.signal_mapping is not None
        for sig, (_, cols) in seq.meas.signal_mapping.items():
            col_ids[cols] = ids.setdefault(sig, len(ids))
        parts.append(np.tile(col_ids, seq.meas.times.size))
    return np.concatenate(parts)
