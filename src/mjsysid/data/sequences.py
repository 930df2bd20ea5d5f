"""A model spec bundled with the recorded sequences it should reproduce.

Every sequence ``i`` has an initial full-physics state (the state at the first measured
sample, ``sensordata[i].times[0]``; its time entry is set to that time when simulating), a
control series covering the measured time span, and the measured sensor series. All checks
happen at construction, with messages naming the ModelSequences, the sequence and the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.states import state_size
from mjsysid.data.timeseries import SignalType, TimeSeries, signal_source_indices
from mjsysid.data.timing import warn_if_peer_stamped
from mjsysid.util.errors import must_be, short_repr

_TIME_TOL = 1e-9


def _check_name(what: str, name: object) -> None:
    """Names become file names (``<name>.xml`` of the identified model) and labels
    (``<model>/<sequence>/...``): no path separators, no ``.``/``..``, no control
    characters."""
    if not isinstance(name, str) or not name:
        raise ValueError(must_be(what, "a non-empty string", name))
    if "/" in name or "\\" in name or name in (".", "..") or not name.isprintable():
        raise ValueError(
            must_be(
                what,
                "a name usable as a file name (no '/', '\\', control characters; not '.' or '..')",
                name,
            )
        )


def _initial_states(value: Any, where: str) -> list[np.ndarray]:
    """One state or a list of them as float arrays; a flat list of numbers is one state."""
    what = f"{where}: initial_state"
    expected = "a full-physics state (numbers) or a list of them"
    scalar = isinstance(value, np.ndarray) and value.ndim == 0
    if scalar or not isinstance(value, list | tuple | np.ndarray):
        raise TypeError(must_be(what, expected, value))
    if isinstance(value, list | tuple) and value and all(_is_number(v) for v in value):
        value = np.asarray(value, dtype=np.float64)
    out = []
    for state in _as_list(value, np.ndarray):
        try:
            arr = np.asarray(state)
        except ValueError:
            raise ValueError(must_be(what, expected, state)) from None
        if arr.dtype.kind not in "iuf":
            raise TypeError(must_be(what, expected, state))
        out.append(np.array(arr, dtype=np.float64))
    return out


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool)


def _as_list(value: Any, kind: type | tuple[type, ...]) -> list[Any]:
    if value is None or isinstance(value, kind):
        return [value]
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return [value]
    return list(value)


@dataclass(eq=False)
class ModelSequences:
    """A spec plus one or more recorded sequences.

    Args:
      name: Name of this model (used for the identified ``<name>.xml``).
      spec: The ``MjSpec`` to identify; never modified by mjsysid.
      sequence_name: One name, or one per sequence.
      initial_state: ``(nstate,)`` full-physics state (see :func:`create_initial_state`), or a
        list of them.
      control: :class:`TimeSeries` of actuator controls (all actuators; ``None`` for a model
        without actuators), or a list.
      sensordata: Measured :class:`TimeSeries` (sensors and/or joint states), or a list. A
        series without a signal mapping must hold all model sensors in model order.
      rms_reference: Optional, one per sequence: the measured series whose RMS
        normalises the sequence's residual instead of its own data (``None`` entries: its
        own).
        :func:`mjsysid.split_windows` gives every window its whole recording, so the windows
        of a recording weigh each sample alike (a window near zero would otherwise be scaled
        up, its noise with it). Each must hold the same signals as that sequence.

      inputs: Optional, one per sequence (or one for a single sequence): the recorded inputs
        of the force laws (:mod:`mjsysid.sim.laws`): a :class:`TimeSeries` of named columns
        (a servo's goal position, a torque-enable flag, a supply voltage) covering the
        measured time span, held between its rows like the controls; ``None`` entries: none.
      constants: Optional, one per sequence: ``{name: number}`` the per-recording constants
        of the force laws (a firmware gain register, a load mass), which may differ between
        recordings of one experiment.

    Measured data stamped one timestep late, as ``mujoco.sysid``'s rollout stamps it, gets a
    :class:`~mjsysid.data.timing.PeerTimestampWarning` with the fix.

    Attributes:
      model: The spec compiled once at construction (nominal values).
    """

    name: str
    spec: mujoco.MjSpec
    sequence_name: list[str] | str
    initial_state: list[np.ndarray] | np.ndarray
    control: list[TimeSeries | None] | TimeSeries | None
    sensordata: list[TimeSeries] | TimeSeries
    rms_reference: list[TimeSeries | None] | None = None
    inputs: list[TimeSeries | None] | TimeSeries | None = field(default=None, kw_only=True)
    constants: list[dict[str, float]] | dict[str, float] | None = field(default=None, kw_only=True)
    model: mujoco.MjModel = field(init=False, repr=False)

    def __post_init__(self) -> None:
        _check_name("ModelSequences name", self.name)
        if isinstance(self.rms_reference, bool | np.bool_):
            raise TypeError(
                must_be(
                    f"ModelSequences {self.name!r}: rms_reference",
                    "a list of TimeSeries (one per sequence) or None",
                    self.rms_reference,
                    "mujoco.sysid's 7th argument, allow_missing_sensors, is "
                    "mjsysid.compat.ModelSequences's; mjsysid always allows a subset of the "
                    "sensors",
                )
            )
        where = f"ModelSequences {self.name!r}"
        self.model = _compile(self.spec, where)
        self.sequence_name = _as_list(self.sequence_name, str)
        self.initial_state = _initial_states(self.initial_state, where)
        for fname in ("control", "sensordata"):
            if isinstance(getattr(self, fname), np.ndarray):
                raise TypeError(
                    must_be(
                        f"{where}: {fname}",
                        "a TimeSeries or a list of them",
                        "ndarray",
                        "wrap the array with TimeSeries.from_names / from_control_names",
                    )
                )
        self.control = _as_list(self.control, TimeSeries)
        self.sensordata = _as_list(self.sensordata, TimeSeries)
        self._check_names(where)
        for i, seq in enumerate(self.sequence_name):
            self._check_sequence(i, f"{where}, sequence {seq!r}")
        if self.rms_reference is not None:
            self.rms_reference = _rms_references(
                self.rms_reference, self.sequence_name, self.sensordata, where
            )
        self.inputs = _law_inputs(self.inputs, self.sequence_name, self.sensordata, where)
        self.constants = _law_constants(self.constants, self.sequence_name, where)

    # -- validation -------------------------------------------------------------------------
    def _check_names(self, where: str) -> None:
        """As many sequences in every field, at least one, and unique valid names."""
        assert isinstance(self.sequence_name, list) and isinstance(self.initial_state, list)
        assert isinstance(self.control, list) and isinstance(self.sensordata, list)
        counts = {
            "sequence_name": len(self.sequence_name),
            "initial_state": len(self.initial_state),
            "control": len(self.control),
            "sensordata": len(self.sensordata),
        }
        if len(set(counts.values())) != 1:
            raise ValueError(
                f"{where}: sequence_name, initial_state, control and sensordata must have the same "
                f"number of sequences, got {counts}"
            )
        if not self.sequence_name:
            raise ValueError(f"{where}: must have at least one sequence, got none")
        names = self.sequence_name
        for n in names:
            _check_name(f"{where}: sequence_name", n)
        if len(set(names)) != len(names):
            raise ValueError(must_be(f"{where}: sequence_name", "unique names", names))

    def _check_sequence(self, i: int, where: str) -> None:
        model = self.model
        assert isinstance(self.initial_state, list) and isinstance(self.control, list)
        assert isinstance(self.sensordata, list)
        _check_initial_state(model, self.initial_state[i], where)
        meas = self.sensordata[i]
        _check_sensordata(model, meas, where)
        ctrl = self.control[i]
        warn_if_peer_stamped(
            meas,
            ctrl if isinstance(ctrl, TimeSeries) else None,
            float(self.initial_state[i][0]),
            float(model.opt.timestep),
            f"{where}: sensordata",
        )
        if ctrl is None:
            if model.nu:
                raise ValueError(
                    must_be(
                        f"{where}: control",
                        f"a TimeSeries for the model's {model.nu} actuators",
                        None,
                    )
                )
            return
        if not isinstance(ctrl, TimeSeries):
            raise TypeError(must_be(f"{where}: control", "a TimeSeries", type(ctrl).__name__))
        self.control_columns(i)  # validates names and widths
        t0, t1 = meas.times[0], meas.times[-1]
        c0, c1 = ctrl.times[0], ctrl.times[-1]
        if c0 > t0 + _TIME_TOL or c1 < t1 - _TIME_TOL:
            raise ValueError(
                f"{where}: control must cover the sensordata time span "
                f"[{float(t0)!r}, {float(t1)!r}] s, got "
                f"control times [{float(c0)!r}, {float(c1)!r}] s; trim sensordata "
                "(TimeSeries.remove_from_beginning / resample) or record longer"
            )

    def control_columns(self, i: int) -> np.ndarray:
        """Column of control series ``i`` feeding each actuator, shape ``(nu,)``."""
        assert isinstance(self.control, list)
        ctrl, model = self.control[i], self.model
        assert ctrl is not None
        where = f"ModelSequences {self.name!r}, sequence {self.sequence_name[i]!r}: control"
        if ctrl.signal_mapping is None:
            if ctrl.data.shape[1] != model.nu:
                raise ValueError(
                    must_be(
                        where,
                        f"{model.nu} columns (one per actuator)",
                        f"{ctrl.data.shape[1]} columns",
                    )
                )
            return np.arange(model.nu)
        cols = np.full(model.nu, -1)
        for sig, (stype, idx) in ctrl.signal_mapping.items():
            if stype != SignalType.MjCtrl:
                raise ValueError(must_be(f"{where} signal {sig!r}", "SignalType.MjCtrl", stype))
            try:
                act = signal_source_indices(model, sig, stype)
            except KeyError as e:
                raise KeyError(f"{where}: {e.args[0]}") from None
            cols[act[0]] = idx[0]
        missing = [model.actuator(k).name for k in np.flatnonzero(cols < 0)]
        if missing:
            raise ValueError(must_be(where, "a column for every actuator", f"none for {missing}"))
        return cols

    # -- convenience --------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.sequence_name)

    def sequences(self) -> Sequence[tuple[str, np.ndarray, TimeSeries | None, TimeSeries]]:
        """``(sequence_name, initial_state, control, sensordata)`` per sequence."""
        return list(
            zip(
                self.sequence_name,
                self.initial_state,
                self.control,  # type: ignore[arg-type]
                self.sensordata,  # type: ignore[arg-type]
                strict=True,
            )
        )

    def law_data(self, i: int) -> tuple[TimeSeries | None, dict[str, float]]:
        """``(inputs, constants)`` of sequence ``i`` for the force laws."""
        assert isinstance(self.inputs, list) and isinstance(self.constants, list)
        return self.inputs[i], self.constants[i]

    def __repr__(self) -> str:
        return (
            f"ModelSequences({self.name!r}, {len(self)} sequences: "
            f"{short_repr(self.sequence_name)})"
        )


def _compile(spec: Any, where: str) -> mujoco.MjModel:
    """``spec`` compiled once (an ``MjModel`` in its place is refused with a hint)."""
    if isinstance(spec, mujoco.MjModel):
        raise TypeError(
            must_be(
                f"{where}: spec",
                "a mujoco.MjSpec",
                "MjModel",
                "did you pass a compiled MjModel instead of an MjSpec?",
            )
        )
    if not isinstance(spec, mujoco.MjSpec):
        raise TypeError(must_be(f"{where}: spec", "a mujoco.MjSpec", type(spec).__name__))
    try:
        return spec.compile()
    except ValueError as e:
        raise ValueError(f"{where}: spec must compile, got error: {e}") from e


def _per_sequence(value: Any, names: list[str], kind: type, what: str) -> list[Any]:
    """``value`` as one entry per sequence: a single entry broadcast to one sequence, a list
    of exactly one per sequence."""
    if value is None:
        return [None] * len(names)
    if isinstance(value, kind):
        if len(names) != 1:
            raise ValueError(must_be(what, f"a list of {len(names)} entries (one per sequence)", 1))
        return [value]
    out = list(value)
    if len(out) != len(names):
        raise ValueError(must_be(what, f"{len(names)} entries (one per sequence)", len(out)))
    return out


def _law_inputs(
    inputs: Any, names: list[str], sensordata: list[TimeSeries], where: str
) -> list[TimeSeries | None]:
    """One ``None`` or a named series covering the measured span per sequence."""
    out = _per_sequence(inputs, names, TimeSeries, f"{where}: inputs")
    for seq, series, meas in zip(names, out, sensordata, strict=True):
        if series is None:
            continue
        what = f"{where}, sequence {seq!r}: inputs"
        if not isinstance(series, TimeSeries):
            raise TypeError(must_be(what, "a TimeSeries of named columns or None", series))
        if not series.signal_mapping:
            raise ValueError(must_be(what, "a TimeSeries with named columns", "no signal names"))
        if not np.all(np.isfinite(series.data)):
            raise ValueError(must_be(what, "finite numbers", "NaN or inf"))
        t0, t1 = meas.times[0], meas.times[-1]
        if series.times[0] > t0 + _TIME_TOL or series.times[-1] < t1 - _TIME_TOL:
            raise ValueError(
                must_be(
                    f"{what} times",
                    f"covering the sensordata span [{float(t0)!r}, {float(t1)!r}] s",
                    f"[{float(series.times[0])!r}, {float(series.times[-1])!r}] s",
                )
            )
    return out


def _law_constants(constants: Any, names: list[str], where: str) -> list[dict[str, float]]:
    """One ``{name: number}`` per sequence (empty where none were given)."""
    out = _per_sequence(constants, names, dict, f"{where}: constants")
    checked = []
    for seq, entry in zip(names, out, strict=True):
        what = f"{where}, sequence {seq!r}: constants"
        entry = {} if entry is None else entry
        if not isinstance(entry, dict):
            raise TypeError(must_be(what, "a mapping {name: number}", entry))
        values = {}
        for key, value in entry.items():
            ok = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
                value, bool
            )
            if not isinstance(key, str) or not ok or not np.isfinite(float(value)):
                raise ValueError(must_be(f"{what}[{key!r}]", "a finite number", value))
            values[key] = float(value)
        checked.append(values)
    return checked


def _rms_references(
    rms_reference: Sequence[TimeSeries | None],
    names: list[str],
    sensordata: list[TimeSeries],
    where: str,
) -> list[TimeSeries | None]:
    """One ``None`` or a series of the measurement's signals per sequence, as a list."""
    refs = list(rms_reference)
    if len(refs) != len(names):
        raise ValueError(must_be(f"{where}: rms_reference", f"{len(names)} entries", len(refs)))
    for seq, ref, meas in zip(names, refs, sensordata, strict=True):
        if ref is None:
            continue
        if (
            not isinstance(ref, TimeSeries)
            or ref.names != meas.names
            or (ref.data.shape[1] != meas.data.shape[1])
        ):
            raise ValueError(
                must_be(
                    f"{where}, sequence {seq!r}: rms_reference",
                    f"None or a TimeSeries of the same signals {meas.names}",
                    ref.names if isinstance(ref, TimeSeries) else ref,
                )
            )
    return refs


def _check_initial_state(model: mujoco.MjModel, x0: np.ndarray, where: str) -> None:
    """``x0`` is a finite 1-D full-physics state of ``model``."""
    nstate = state_size(model)
    if x0.ndim != 1 or x0.size != nstate:
        raise ValueError(
            must_be(
                f"{where}: initial_state",
                f"a 1-D full-physics state of length {nstate}",
                x0,
                "build it with mjsysid.create_initial_state(model, qpos, qvel)",
            )
        )
    if not np.all(np.isfinite(x0)):
        k = int(np.flatnonzero(~np.isfinite(x0))[0])
        raise ValueError(
            f"{where}: initial_state must be finite, got initial_state[{k}]={float(x0[k])!r}"
        )


def _check_sensordata(model: mujoco.MjModel, meas: Any, where: str) -> None:
    """``meas`` is a series of all model sensors, or one whose every column is a known signal."""
    if not isinstance(meas, TimeSeries):
        raise TypeError(must_be(f"{where}: sensordata", "a TimeSeries", type(meas).__name__))
    if meas.signal_mapping is None:
        if meas.data.shape[1] != model.nsensordata:
            raise ValueError(
                must_be(
                    f"{where}: sensordata",
                    f"{model.nsensordata} columns (all model sensors) when "
                    "it has no signal mapping",
                    f"{meas.data.shape[1]} columns",
                    "build it with TimeSeries.from_names(times, data, model, names=[...])",
                )
            )
        return
    claimed = np.zeros(meas.data.shape[1], dtype=bool)
    for _, cols in meas.signal_mapping.values():
        claimed[cols] = True
    if not claimed.all():
        free = np.flatnonzero(~claimed).tolist()
        raise ValueError(
            must_be(
                f"{where}: sensordata",
                "a signal for every column (each column is compared with a prediction)",
                f"columns {free[:10]}{' ...' if len(free) > 10 else ''} in no signal",
                "Label them in signal_mapping or drop them "
                "(TimeSeries.slice_by_name keeps the named signals only)",
            )
        )
    for sig, (stype, cols) in meas.signal_mapping.items():
        if stype == SignalType.CustomObs:
            continue
        if stype == SignalType.MjCtrl:
            raise ValueError(
                f"{where}: sensordata signal {sig!r} must be a sensor or joint "
                "state, got SignalType.MjCtrl (controls belong in control)"
            )
        try:
            src = signal_source_indices(model, sig, stype)
        except KeyError as e:
            raise KeyError(f"{where}: sensordata: {e.args[0]}") from None
        if len(src) != len(cols):
            raise ValueError(
                must_be(
                    f"{where}: sensordata signal {sig!r}",
                    f"{len(src)} columns",
                    f"{len(cols)} columns",
                )
            )
