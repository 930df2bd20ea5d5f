"""The parameter layout of a residual function: what a parameter structure implies for ``x``.

A structure is the names, freezing, modifiers, bounds and targets of a :class:`ParameterDict`
(not its free values). For one structure the residual function keeps a private working copy
of the parameters, fresh working specs and a :class:`Layout` (which rows of ``x`` change the
model, the simulation, each sequence's initial state); :class:`ParameterStructure` rebuilds
them when the structure changes.

Which measured signal and time each residual entry belongs to (diagnostics).

Checks of the force laws given to a residual function and of their parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import mujoco
import numpy as np

from mjsysid.data.sequences import ModelSequences
from mjsysid.objective.alignment import PreparedSequence
from mjsysid.objective.control_transform import ControlTransform
from mjsysid.objective.initial_state import (
    INITIAL_KINDS,
    initial_state_overrides,
    law_state_rows,
)
from mjsysid.params.apply import WritePlan, supports_model_edits
from mjsysid.params.parameter import Parameter, ParameterDict, check_modifiers_present
from mjsysid.sim.laws.core import ForceLaw, parameter_name
from mjsysid.sim.lockstep import bind_laws
from mjsysid.util.errors import must_be

_LAYOUT_META = ("kind", "target", "joint", "actuator")
_INERTIAL_KINDS = ("body_mass", "body_mass_ipos", "body_inertia")


@dataclass
class Layout:
    """What one parameter structure implies, computed once per structure.

    Attributes:
      free: The non-frozen parameters of the private working copy, in vector order.
      owner: ``(p,)`` index into ``free`` of every vector entry.
      model_mask: ``(p,)`` entries that change the model. sim_mask: entries that change the
        simulation (model entries and initial-state entries).
      model_edits: Every active modifier has an exact compiled-model fast path.
      overrides: Per sequence, ``(state index, x index)`` of its initial-state parameters.
      law_starts: Per sequence, ``(law, state, rows of x)`` of its force-law state starts.
      spans: Rows of ``x`` of each non-frozen parameter, by name.
      seq_rows: Per sequence, the rows of ``x`` its simulation depends on: the model and
        control-transform entries and its own initial-state entries (all simulation entries
        with a custom build_model or rollout).
      plans: :class:`WritePlan` per ModelSequences index (made on first use).
    """

    free: list[Parameter]
    owner: np.ndarray
    model_mask: np.ndarray
    sim_mask: np.ndarray
    model_edits: bool
    overrides: list[list[tuple[int, int]]]
    law_starts: list[list[tuple[str, str, slice]]]
    spans: dict[str, slice]
    seq_rows: list[np.ndarray]
    plans: dict[int, WritePlan] = field(default_factory=dict)


def spans(sizes: list[int]) -> list[slice]:
    """Consecutive slices of the given sizes, from 0."""
    ends = np.cumsum(sizes).tolist()
    return [slice(e - n, e) for n, e in zip(sizes, ends, strict=True)]


def check_distinct_targets(params: ParameterDict) -> None:
    """Two free parameters must not set the same model quantity (which one wins would depend
    on the order of writes). Signal and control rules may overlap (a later rule overrides)."""
    seen: dict[tuple[str, ...], str] = {}
    for p in params.non_frozen():
        kind, target = p.meta.get("kind"), p.meta.get("target")
        if not isinstance(kind, str) or not isinstance(target, str) or p.modifier is None:
            continue
        what = ("body inertial", target) if kind in _INERTIAL_KINDS else (kind, target)
        other = seen.setdefault(what, p.name)
        if other != p.name:
            raise ValueError(
                f"parameters {other!r} and {p.name!r} both set the {what[0]} of {target!r}: "
                "keep one free (freeze or remove the other)"
            )


def structure_key(params: ParameterDict) -> tuple[object, ...]:
    """What identifies the structure of ``params`` (everything but the free values)."""
    return tuple(
        (
            p.name,
            p.frozen,
            id(p.modifier),
            id(p.model_modifier),
            p.min_value.tobytes(),  # bounds matter: a SignalTransform's window uses them
            p.max_value.tobytes(),
            p.value.tobytes() if p.frozen else p.size,
            # what the meta says a parameter acts on (an initial state's sequence...)
            *map(p.meta.get, _LAYOUT_META),
        )
        for p in params.values()
    )


def control_mask(params: ParameterDict, control_names: Sequence[str]) -> np.ndarray:
    """Entries of ``x`` the control transform reads (``control_names``: its parameters)."""
    names = set(control_names)
    return np.concatenate(
        [np.full(p.size, p.name in names) for p in params.non_frozen()] or [np.zeros(0, bool)]
    )


def masks(
    params: ParameterDict, *, custom: bool, control_names: Sequence[str]
) -> tuple[np.ndarray, np.ndarray]:
    """Entries of ``x`` that change the model, and those that change the simulation.

    Parameters with a model modifier change both; initial-state parameters and those of
    the control transform only change the simulation; parameters without either (sensor
    delay, gain, bias) change neither. With a custom build_model or rollout (``custom``) every
    entry is assumed to matter.
    """
    ps = params.non_frozen()
    if custom:
        everything = np.ones(params.size, dtype=bool)
        return everything, everything
    if not ps:
        return np.zeros(0, dtype=bool), np.zeros(0, dtype=bool)
    model = np.concatenate([np.full(p.size, p.modifier is not None) for p in ps])
    init = np.concatenate([np.full(p.size, p.meta.get("kind") in INITIAL_KINDS) for p in ps])
    return model, model | init | control_mask(params, control_names)


def initial_overrides(
    params: ParameterDict,
    sequences: Sequence[PreparedSequence],
    models_sequences: Sequence[ModelSequences],
) -> list[list[tuple[int, int]]]:
    """Per sequence, ``(state index, x index)`` of each initial-state parameter of it.

    Raises:
      KeyError: An initial-state parameter names no recorded sequence.
    """
    out = [
        initial_state_overrides(params, models_sequences[seq.ms_index].model, seq.label)
        for seq in sequences
    ]
    labels = {seq.label for seq in sequences}
    unknown = [
        p.name
        for p in params.non_frozen()
        if p.meta.get("kind") in INITIAL_KINDS and p.meta.get("target") not in labels
    ]
    if unknown:
        raise KeyError(
            f"initial-state parameters {unknown} name no recorded sequence; "
            f"sequences: {sorted(labels)}"
        )
    return out


def make_layout(
    work: ParameterDict,
    sequences: Sequence[PreparedSequence],
    models_sequences: Sequence[ModelSequences],
    *,
    custom: bool,
    control_names: Sequence[str],
) -> Layout:
    """The :class:`Layout` of ``work`` (raises, as :func:`initial_overrides`, before anything
    is kept)."""
    free = work.non_frozen()
    model_mask, sim_mask = masks(work, custom=custom, control_names=control_names)
    overrides = initial_overrides(work, sequences, models_sequences)
    law_starts = [law_state_rows(work, seq.label) for seq in sequences]
    if custom:
        seq_rows = [np.flatnonzero(sim_mask) for _ in overrides]
    else:
        shared = np.flatnonzero(model_mask | control_mask(work, control_names))
        seq_rows = [
            np.union1d(
                shared, [r for _, r in ov] + [r for *_, rs in ls for r in range(rs.start, rs.stop)]
            )
            for ov, ls in zip(overrides, law_starts, strict=True)
        ]
    return Layout(
        free,
        np.repeat(np.arange(len(free)), [p.size for p in free]),
        model_mask,
        sim_mask,
        supports_model_edits(work),
        overrides,
        law_starts,
        dict(zip([p.name for p in free], spans([p.size for p in free]), strict=True)),
        [rows.astype(np.intp) for rows in seq_rows],
    )


@dataclass
class ParameterStructure:
    """The private working parameters, working specs and :class:`Layout` of one structure.

    A residual function's :meth:`~mjsysid.objective.residual.ResidualFunction.head` views
    get a shallow copy (their own current structure, the specs shared until it changes).

    Attributes:
      models_sequences: The residual function's ModelSequences.
      custom: A custom build_model or rollout is used (every entry matters).
      control_transform: The control transform (its parameters change the simulation).
      specs: Private working copies of the specs (modifiers write into them).
      work: The private copy of the parameters (``None`` before the first call).
      key: Its :func:`structure_key`.
      layout: Its :class:`Layout`.
      law_names: The force laws' parameters (they change the simulation, like the control
        transform's).
    """

    models_sequences: list[ModelSequences]
    custom: bool
    control_transform: ControlTransform | None
    specs: list[mujoco.MjSpec]
    work: ParameterDict | None = None
    key: tuple[object, ...] | None = None
    layout: Layout | None = None
    law_names: list[str] = field(default_factory=list)

    def control_names(self) -> list[str]:
        """The parameters the control transform and the force laws read."""
        ct = self.control_transform
        return [*(ct.parameter_names if ct else []), *self.law_names]

    def update(
        self, params: ParameterDict, sequences: Sequence[PreparedSequence]
    ) -> tuple[ParameterDict, Layout]:
        """The private copy of ``params`` and its layout, rebuilt when the structure changed."""
        key = structure_key(params)
        if self.key != key:
            check_modifiers_present(params.values(), "residual_fn")
            check_distinct_targets(params)
            work = params.copy()
            # Values written by an earlier structure's modifiers must not stay behind (a
            # parameter now frozen or gone keeps the spec's own value): start from the specs.
            self.specs = [ms.spec.copy() for ms in self.models_sequences]
            layout = make_layout(
                work,
                sequences,
                self.models_sequences,
                custom=self.custom,
                control_names=self.control_names(),
            )
            self.work, self.key, self.layout = work, key, layout
        assert self.work is not None and self.layout is not None
        return self.work, self.layout


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


def law_parameter_names(laws: Sequence[ForceLaw]) -> list[str]:
    """The full names of the parameters of ``laws``."""
    return [parameter_name(law, k) for law in laws for k in law.parameters]


def checked_laws(
    laws: Sequence[ForceLaw], models_sequences: Sequence[ModelSequences], custom: object
) -> list[ForceLaw]:
    """The force laws, checked against every model (and refused with a custom rollout)."""
    out = list(laws)
    for law in out:
        if not isinstance(law, ForceLaw):
            raise TypeError(must_be("force_laws", "a sequence of ForceLaw", law))
    if out and custom is not None:
        raise ValueError("force_laws cannot be combined with custom_rollout: apply them there")
    names = [law.name for law in out]
    if len(set(names)) != len(names):
        raise ValueError(must_be("force law names", "unique", names))
    for ms in models_sequences:
        bind_laws(out, ms.model)
        _check_law_data(out, ms)
    return out


def _check_law_data(laws: Sequence[ForceLaw], ms: ModelSequences) -> None:
    """Every sequence holds the recorded inputs and the constants the laws read.

    Raises:
      ValueError: One is missing (the law, the sequence and the names given are said).
    """
    for i, seq in enumerate(ms.sequence_name):
        inputs, constants = ms.law_data(i)
        have = set(inputs.names) if inputs is not None else set()
        for law in laws:
            missing = [k for k in law.inputs if k not in have]
            if missing:
                raise ValueError(
                    must_be(
                        f"{ms.name}/{seq}: inputs",
                        f"the recorded inputs {list(law.inputs)} that force law {law.name!r} reads",
                        sorted(have),
                        f"missing {missing}: give ModelSequences(..., inputs=...) (experiment "
                        "file: a sequence's inputs: {name: column})",
                    )
                )
            absent = [k for k in law.constants if k not in constants]
            if absent:
                raise ValueError(
                    must_be(
                        f"{ms.name}/{seq}: constants",
                        f"the per-recording constants {list(law.constants)} that force law "
                        f"{law.name!r} reads",
                        sorted(constants),
                        f"missing {absent}: give ModelSequences(..., constants={{...}}) "
                        "(experiment file: a sequence's constants: {name: value})",
                    )
                )


def check_law_params(laws: Sequence[ForceLaw], params: ParameterDict) -> None:
    """Every parameter of every law is in ``params`` with its declared size.

    Raises:
      KeyError: One is missing (declare them with ``force_law_params``).
    """
    for law in laws:
        for key, spec in law.parameters.items():
            name = parameter_name(law, key)
            if name not in params.keys():
                raise KeyError(
                    f"force law {law.name!r} needs parameter {name!r}; add "
                    "force_law_params(law, nominal) to the parameters"
                )
            if params[name].size != spec.size:
                raise ValueError(
                    must_be(f"parameter {name!r} size", str(spec.size), params[name].size)
                )
