"""SystemTrajectory: one trajectory as TimeSeries, in ``mujoco.sysid``'s layout.

Design. The fields are the peer's: ``model``, ``control``, ``sensordata`` and ``state``
(:class:`~mjsysid.TimeSeries`; ``state`` may be ``None``) and ``initial_state`` (an array).
The series a rollout makes are :class:`TrajectorySeries`, which also read as the arrays they
hold (``traj.sensordata[k, 0]``, ``traj.state[:, cols]``, ``np.asarray(traj.sensordata)``,
arithmetic); ``traj.times`` is ``sensordata.times``. A custom rollout that has plain arrays
builds its trajectories with :meth:`SystemTrajectory.from_arrays`.

Time convention. Row ``k`` of ``sensordata`` and ``state`` is the instant ``t_k`` the sensors
were read, before step ``k`` (``mujoco.sysid`` stamps it ``t_k + dt``: one step late). State
rows are full-physics states ``[time, qpos, qvel, act, ...]``; their signal mapping
(:func:`state_signal_mapping`) points at the qpos/qvel/act columns *after* the time column
(the peer's points one column early).
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.states import state_size, state_slices
from mjsysid.data.timeseries import SignalType, TimeSeries
from mjsysid.data.timing import warn_if_peer_stamped
from mjsysid.sim import trajectory_files as files
from mjsysid.sim.render import render_states
from mjsysid.util.errors import must_be

#: ``get_sensordata_slice`` kinds -> MuJoCo sensor types.
SENSOR_KINDS = {
    "joint_pos": mujoco.mjtSensor.mjSENS_JOINTPOS,
    "joint_vel": mujoco.mjtSensor.mjSENS_JOINTVEL,
    "joint_torque": mujoco.mjtSensor.mjSENS_JOINTACTFRC,
}


class TrajectorySeries(TimeSeries):
    """A :class:`~mjsysid.TimeSeries` that also reads as its ``data`` array.

    For code written when :class:`SystemTrajectory` held arrays: indexing, ``np.asarray``,
    ``shape``/``ndim``/``dtype`` and arithmetic act on ``data`` and return arrays.
    """

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        return np.asarray(self.data, dtype=dtype)

    def __getitem__(self, key: Any) -> Any:
        return self.data[key]

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def ndim(self) -> int:
        return int(self.data.ndim)

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.data.dtype

    def __add__(self, other: Any) -> np.ndarray:
        return self.data + np.asarray(other)

    __radd__ = __add__

    def __sub__(self, other: Any) -> np.ndarray:
        return self.data - np.asarray(other)

    def __rsub__(self, other: Any) -> np.ndarray:
        return np.asarray(other) - self.data

    def __mul__(self, other: Any) -> np.ndarray:
        return self.data * np.asarray(other)

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> np.ndarray:
        return self.data / np.asarray(other)

    def __neg__(self) -> np.ndarray:
        return -self.data


def _ro(idx: list[int] | range) -> np.ndarray:
    arr = np.asarray(list(idx), dtype=np.int64)
    arr.flags.writeable = False
    return arr


def state_signal_mapping(model: mujoco.MjModel) -> dict[str, tuple[SignalType, np.ndarray]]:
    """Columns of full-physics state rows ``[time, qpos, qvel, act, ...]`` per signal.

    Keys: ``"<joint>_qpos"``/``"<joint>_qvel"`` (a joint without a name: its body's name),
    ``"<actuator>_act"`` for actuators with activation. Indices count the time column.
    """
    sl = state_slices(model)
    width = {0: (7, 6), 1: (4, 3), 2: (1, 1), 3: (1, 1)}  # free, ball, slide, hinge
    qpos, qvel, act = {}, {}, {}
    for j in range(model.njnt):
        name = model.joint(j).name or model.body(int(model.jnt_bodyid[j])).name
        if not name:
            continue
        nq, nv = width[int(model.jnt_type[j])]
        a, d = (
            sl["qpos"].start + int(model.jnt_qposadr[j]),
            sl["qvel"].start + int(model.jnt_dofadr[j]),
        )
        qpos[f"{name}_qpos"] = (SignalType.MjStateQPos, _ro(range(a, a + nq)))
        qvel[f"{name}_qvel"] = (SignalType.MjStateQVel, _ro(range(d, d + nv)))
    for k in range(model.nu):
        adr, num = int(model.actuator_actadr[k]), int(model.actuator_actnum[k])
        if adr >= 0 and num > 0 and model.actuator(k).name:
            s = sl["act"].start + adr
            act[f"{model.actuator(k).name}_act"] = (SignalType.MjStateAct, _ro(range(s, s + num)))
    return {**qpos, **qvel, **act}


def _series(ts: TimeSeries | None) -> TrajectorySeries | None:
    """``ts`` as a :class:`TrajectorySeries` sharing its arrays (``None`` stays)."""
    if ts is None or isinstance(ts, TrajectorySeries):
        return ts
    return TrajectorySeries.trusted(ts.times, ts.data, ts.signal_mapping)  # type: ignore[return-value]


def _array_series(times: np.ndarray, data: Any) -> TrajectorySeries:
    arr = np.asarray(data, dtype=np.float64)
    return TrajectorySeries.trusted(times, arr, None)  # type: ignore[return-value]


@dataclasses.dataclass(init=False, frozen=True, eq=False)
class SystemTrajectory:
    """One trajectory: controls, sensor readings and (optionally) states as TimeSeries.

    ``SystemTrajectory(model, control, sensordata, initial_state, state)`` as in
    ``mujoco.sysid``; measured data stamped the peer's way (one timestep late) gets a
    :class:`~mjsysid.data.timing.PeerTimestampWarning`. From plain arrays:
    :meth:`from_arrays`.

    Attributes:
      model: The model.
      control: ``(nstep, nu)`` controls; row ``k`` applies from ``t_k`` to ``t_{k+1}``.
      sensordata: ``(nstep, nsensordata)`` sensor readings, row ``k`` at ``t_k``.
      initial_state: ``(nstate,)`` full-physics state at the start.
      state: ``(nstep, nstate)`` full-physics states at ``t_k`` (``None`` for measurements).
    """

    model: mujoco.MjModel
    control: TrajectorySeries
    sensordata: TrajectorySeries
    initial_state: np.ndarray
    state: TrajectorySeries | None

    def __init__(
        self,
        model: mujoco.MjModel,
        control: TimeSeries,
        sensordata: TimeSeries,
        initial_state: npt.ArrayLike,
        state: TimeSeries | None = None,
    ) -> None:
        if not isinstance(control, TimeSeries):
            raise TypeError(
                must_be(
                    "control",
                    "a TimeSeries",
                    type(control).__name__,
                    "from arrays use SystemTrajectory.from_arrays(model, times, control, "
                    "sensordata, state)",
                )
            )
        if not isinstance(sensordata, TimeSeries):
            raise TypeError(must_be("sensordata", "a TimeSeries", type(sensordata).__name__))
        if state is not None and not isinstance(state, TimeSeries):
            raise TypeError(must_be("state", "a TimeSeries or None", type(state).__name__))
        x0 = np.asarray(initial_state, dtype=np.float64).reshape(-1)
        self._set(model, _series(control), _series(sensordata), x0, _series(state))
        if isinstance(model, mujoco.MjModel):  # a stand-in model is passed through untouched
            warn_if_peer_stamped(
                sensordata, control, float(x0[0]) if x0.size else None, float(model.opt.timestep)
            )

    def _set(self, model: Any, control: Any, sens: Any, x0: np.ndarray, state: Any) -> None:
        for k, v in (
            ("model", model),
            ("control", control),
            ("sensordata", sens),
            ("initial_state", x0),
            ("state", state),
        ):
            object.__setattr__(self, k, v)

    @classmethod
    def from_arrays(
        cls,
        model: mujoco.MjModel,
        times: npt.ArrayLike,
        control: npt.ArrayLike,
        sensordata: npt.ArrayLike,
        state: npt.ArrayLike | None = None,
    ) -> SystemTrajectory:
        """From plain arrays on one time grid (a custom rollout's output): ``times``
        ``(nstep,)`` (s), ``control`` ``(nstep, nu)``, ``sensordata`` ``(nstep,
        nsensordata)`` and ``state`` ``(nstep, nstate)`` or ``None``; the initial state is
        ``state[0]`` (empty without states)."""
        t = np.asarray(times, dtype=np.float64).reshape(-1)
        st = None if state is None else _array_series(t, state)
        x0 = np.asarray(st.data[0] if st is not None else np.zeros(0), dtype=np.float64)
        return cls.from_series(
            model, _array_series(t, control), _array_series(t, sensordata), x0, st
        )

    @classmethod
    def from_series(
        cls,
        model: mujoco.MjModel,
        control: TimeSeries,
        sensordata: TimeSeries,
        initial_state: np.ndarray,
        state: TimeSeries | None,
    ) -> SystemTrajectory:
        """Builds one without checks or warnings (for series mjsysid made itself)."""
        obj = object.__new__(cls)
        obj._set(model, _series(control), _series(sensordata), initial_state, _series(state))
        return obj

    # -- mjsysid's reads -------------------------------------------------------------------
    @property
    def times(self) -> np.ndarray:
        """``(nstep,)`` sensor times (s)."""
        return self.sensordata.times

    def qpos(self) -> np.ndarray:
        """``(nstep, nq)`` joint positions (needs ``state``)."""
        return self.state_array("read qpos of")[:, state_slices(self.model)["qpos"]]

    def qvel(self) -> np.ndarray:
        """``(nstep, nv)`` joint velocities (needs ``state``)."""
        return self.state_array("read qvel of")[:, state_slices(self.model)["qvel"]]

    def state_array(self, what: str = "read the states of") -> np.ndarray:
        """``(nstep, nstate)`` full-physics states (``state.data``).

        Raises:
          ValueError: ``state`` is ``None`` (a measured trajectory).
        """
        if self.state is None:
            raise ValueError(f"Cannot {what} a trajectory with missing state field (state=None)")
        return self.state.data

    # -- the peer's methods ----------------------------------------------------------------
    @property
    def sensordim(self) -> int:
        """``model.nsensordata``."""
        return int(self.model.nsensordata)

    def check_compatible(self, allow_missing_sensors: bool = False) -> None:
        """Checks the widths of the series and the initial state against the model.

        Raises:
          ValueError: A width that does not match; sensordata narrower than the model's
            sensors only warns (``UserWarning`` naming the missing sensors) with
            ``allow_missing_sensors``.
        """
        check_compatible(self, allow_missing_sensors)

    def split(self, chunk_size: int) -> list[SystemTrajectory]:
        """Consecutive chunks of ``chunk_size`` control steps (the rest dropped); each starts
        from the state row at its first step.

        Raises:
          ValueError: No ``state`` (``"Cannot split ... missing state field"``), or a bad size.
        """
        return split_trajectory(self, chunk_size)

    def get_sensordata_slice(self, sensor: str = "joint_pos") -> np.ndarray:
        """``(nstep, n)`` columns of every sensor of one kind, side by side in model order.

        Args:
          sensor: ``"joint_pos"`` (jointpos), ``"joint_vel"`` (jointvel) or
            ``"joint_torque"`` (jointactuatorfrc).

        Raises:
          ValueError: An unknown kind, or no sensor of that kind in the model and data.
        """
        return sensordata_slice(self, sensor)

    def replace(self, **kwargs: Any) -> SystemTrajectory:
        """A new trajectory with the given fields replaced (others shared, not copied)."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        fields.update(kwargs)
        return SystemTrajectory.from_series(**fields)

    def render(
        self, height: int = 240, width: int = 320, camera: int | str = -1, fps: float = 30
    ) -> list[np.ndarray]:
        """``(height, width, 3)`` uint8 frames of ``state`` (needs an OpenGL context)."""
        return render_states(self.model, self.state_array("render"), fps, width, height, camera)

    def save_to_disk(self, path: str | Path) -> None:
        """Writes an ``.npz`` (no pickle) with the series and their signal mappings."""
        files.save_arrays(path, _arrays(self))

    @staticmethod
    def load_from_disk(
        path: str | Path, model: mujoco.MjModel, allow_missing_sensors: bool = False
    ) -> SystemTrajectory:
        """Reads :meth:`save_to_disk`'s file and checks it against ``model``."""
        z = files.load_arrays(path)
        series: dict[str, TrajectorySeries | None] = {}
        for f in files.FIELDS:
            if f == "state" and z["state_times"].size == 0:
                series[f] = None
                continue
            series[f] = TrajectorySeries(z[f"{f}_times"], z[f"{f}_data"], z[f"{f}_mapping"])
        control, sensordata = series["control"], series["sensordata"]
        assert control is not None and sensordata is not None
        traj = SystemTrajectory.from_series(
            model, control, sensordata, z["initial_state"], series["state"]
        )
        traj.check_compatible(allow_missing_sensors)
        return traj


def _width(ts: TimeSeries) -> int:
    return int(ts.data.shape[1]) if ts.data.ndim > 1 else 1


def _missing_sensors(model: mujoco.MjModel, sens: TimeSeries) -> list[str]:
    have = set(sens.signal_mapping or {})
    return [
        model.sensor(k).name or f"sensor {k}"
        for k in range(model.nsensor)
        if model.sensor(k).name not in have
    ]


def check_compatible(traj: SystemTrajectory, allow_missing_sensors: bool = False) -> None:
    """:meth:`SystemTrajectory.check_compatible`."""
    m = traj.model
    nsens, got = int(m.nsensordata), _width(traj.sensordata)
    if got != nsens:
        msg = (
            f"Sensor data dimension {got} does not match model sensor dimension {nsens}: "
            f"sensordata must be {nsens} columns wide, got {got}"
        )
        if not (allow_missing_sensors and got < nsens):
            raise ValueError(msg)
        missing = _missing_sensors(m, traj.sensordata)
        warnings.warn(f"{msg}; missing sensors: {missing}", UserWarning, stacklevel=3)
    nstate = state_size(m)
    checks = [("control", _width(traj.control), int(m.nu), "columns (one per actuator)")]
    checks.append(("initial_state", int(traj.initial_state.size), nstate, "entries"))
    if traj.state is not None:
        checks.append(("state", _width(traj.state), nstate, "columns (full-physics state)"))
    for what, n, want, unit in checks:
        if n != want:
            raise ValueError(must_be(f"{what} dimension", f"{want} {unit} for this model", n))


def _rows_in(times: np.ndarray, lo: float, hi: float) -> np.ndarray:
    tol = 1e-9 * max(1.0, abs(lo), abs(hi) if np.isfinite(hi) else 0.0)
    return np.flatnonzero((times >= lo - tol) & (times < hi - tol))


def _take(ts: TimeSeries, rows: np.ndarray) -> TrajectorySeries:
    return TrajectorySeries.trusted(ts.times[rows], ts.data[rows], ts.signal_mapping)  # type: ignore[return-value]


def split_trajectory(traj: SystemTrajectory, chunk_size: int) -> list[SystemTrajectory]:
    """:meth:`SystemTrajectory.split`."""
    if traj.state is None:
        raise ValueError("Cannot split rollout with missing state field (state=None)")
    if (
        isinstance(chunk_size, bool)
        or not isinstance(chunk_size, int | np.integer)
        or chunk_size < 1
    ):
        raise ValueError(must_be("chunk_size", "a positive integer number of steps", chunk_size))
    ct = traj.control.times
    out = []
    for i in range(len(ct) // chunk_size):
        a, b = i * chunk_size, (i + 1) * chunk_size
        lo, hi = float(ct[a]), float(ct[b]) if b < len(ct) else np.inf
        state_rows = _rows_in(traj.state.times, lo, hi)
        if state_rows.size == 0:
            raise ValueError(must_be(f"state of chunk {i}", f"rows in [{lo!r}, {hi!r}) s", 0))
        state = _take(traj.state, state_rows)
        sens = _take(traj.sensordata, _rows_in(traj.sensordata.times, lo, hi))
        ctrl = _take(traj.control, np.arange(a, b))
        out.append(SystemTrajectory.from_series(traj.model, ctrl, sens, state.data[0], state))
    return out


def sensordata_slice(traj: SystemTrajectory, sensor: str) -> np.ndarray:
    """:meth:`SystemTrajectory.get_sensordata_slice`."""
    if sensor not in SENSOR_KINDS:
        raise ValueError(must_be("sensor", f"one of {sorted(SENSOR_KINDS)}", sensor))
    m, sens = traj.model, traj.sensordata
    mapping = sens.signal_mapping
    cols: list[int] = []
    for k in np.flatnonzero(m.sensor_type == SENSOR_KINDS[sensor]):
        name = m.sensor(int(k)).name
        if mapping is not None and name in mapping:
            cols.extend(int(c) for c in mapping[name][1])
        elif mapping is None and _width(sens) == m.nsensordata:
            adr, dim = int(m.sensor_adr[k]), int(m.sensor_dim[k])
            cols.extend(range(adr, adr + dim))
    if not cols:
        have = [
            f"{m.sensor(k).name} ({mujoco.mjtSensor(int(m.sensor_type[k])).name})"
            for k in range(m.nsensor)
        ]
        raise ValueError(
            must_be(
                "get_sensordata_slice: sensor",
                f"a kind with sensors in the model and the data, got {sensor!r} "
                f"({SENSOR_KINDS[sensor].name}): none; the model's sensors are {have}",
                sensor,
            )
        )
    data = sens.data if sens.data.ndim > 1 else sens.data[:, None]
    return data[:, cols]


def _arrays(traj: SystemTrajectory) -> dict[str, Any]:
    out: dict[str, Any] = {"initial_state": traj.initial_state}
    for f in files.FIELDS:
        ts = getattr(traj, f)
        out[f"{f}_times"] = np.zeros(0) if ts is None else ts.times
        out[f"{f}_data"] = np.zeros(0) if ts is None else ts.data
        out[f"{f}_mapping"] = files.mapping_to_json(None if ts is None else ts.signal_mapping)
    return out
