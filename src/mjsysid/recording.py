"""Recordings on disk: ``.npz`` and ``.csv`` files with named columns.

A recording holds a time column and named signal columns. Conventions (all overridable by
an explicit column map in the experiment file):

* time: ``time`` (``t`` and ``times`` are accepted too);
* controls: ``ctrl.<actuator>`` (or a column named like the actuator);
* sensors: ``<sensor>``; a d-dimensional sensor is one ``(N, d)`` npz array, or csv columns
  ``<sensor>[0] .. <sensor>[d-1]``;
* joint states: ``<joint>_qpos`` / ``<joint>_qvel``;
* initial state (optional): ``initial_qpos`` ``(nq,)`` and ``initial_qvel`` ``(nv,)``.

:func:`write_recording` writes exactly this layout (``mjsysid simulate`` uses it).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from mjsysid._errors import must_be
from mjsysid.io import atomic_savez, atomic_write_text, load_npz
from mjsysid.timeseries import SignalType, TimeSeries, resolve_signal_name, signal_source_indices

TIME_KEYS = ("time", "t", "times")


def read_columns(path: str | Path) -> dict[str, np.ndarray]:
    """All named columns of an ``.npz`` or ``.csv`` file (csv: header row, numbers below).

    ``name[i]`` csv columns are gathered into one ``(N, d)`` array called ``name``.

    Raises:
      FileNotFoundError: No such file. ValueError: Unknown extension or unreadable content.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return {
            k: np.asarray(v, dtype=np.float64) if v.dtype.kind in "biuf" else v
            for k, v in load_npz(path).items()
        }
    if suffix != ".csv":
        raise ValueError(
            must_be(f"recording {str(path)!r}", "a .npz or .csv file", suffix or path.name)
        )
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {str(path)!r}")
    text = path.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2:
        raise ValueError(
            f"{str(path)!r} must have a header row and data rows, got {len(rows)} rows"
        )
    header = [h.strip() for h in rows[0]]
    body = []
    for i, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) != len(header):
            raise ValueError(
                f"{str(path)!r} line {i}: must have {len(header)} fields, got {len(row)}"
            )
        try:
            body.append([float(x) for x in row])
        except ValueError:
            raise ValueError(
                f"{str(path)!r} line {i}: values must be numbers, got {row!r}"
            ) from None
    data = np.array(body)
    out: dict[str, np.ndarray] = {}
    grouped: dict[str, dict[int, np.ndarray]] = {}
    for j, name in enumerate(header):
        if name.endswith("]") and "[" in name:
            base, idx = name[:-1].split("[", 1)
            if idx.isdigit():
                grouped.setdefault(base, {})[int(idx)] = data[:, j]
                continue
        out[name] = data[:, j]
    for base, cols in grouped.items():
        if sorted(cols) != list(range(len(cols))):
            raise ValueError(
                f"{str(path)!r}: columns {base}[i] must be numbered 0..{len(cols) - 1}, "
                f"got {sorted(cols)}"
            )
        out[base] = np.stack([cols[i] for i in range(len(cols))], axis=1)
    return out


@dataclass
class Recording:
    """One recorded sequence, ready for :class:`ModelSequences`."""

    times: np.ndarray
    control: TimeSeries | None
    sensordata: TimeSeries
    initial_qpos: np.ndarray | None
    initial_qvel: np.ndarray | None


def _column(
    cols: Mapping[str, np.ndarray], key: str | Sequence[str], what: str, n: int
) -> np.ndarray:
    keys = [key] if isinstance(key, str) else list(key)
    parts = []
    for k in keys:
        if k not in cols:
            raise KeyError(f"{what}: the recording has no column {k!r}; it has {sorted(cols)}")
        arr = np.asarray(cols[k], dtype=np.float64)
        arr = arr[:, None] if arr.ndim == 1 else arr
        if arr.shape[0] != n:
            raise ValueError(
                must_be(
                    f"{what}: column {k!r}",
                    f"{n} rows (the time column's length)",
                    f"{arr.shape[0]} rows",
                )
            )
        parts.append(arr)
    return np.concatenate(parts, axis=1)


def load_recording(
    path: str | Path,
    model: mujoco.MjModel,
    *,
    time: str | None = None,
    control: Mapping[str, str] | None = None,
    sensors: Mapping[str, str | Sequence[str]] | None = None,
) -> Recording:
    """Reads a recording and maps its columns onto the model's actuators and sensors.

    Args:
      path: ``.npz`` or ``.csv`` file.
      model: The compiled model (for names and widths).
      time: Name of the time column (default: the first of ``time``, ``t``, ``times``).
      control: ``{actuator: column}``; default ``ctrl.<actuator>`` or ``<actuator>`` for every
        actuator (all actuators are required).
      sensors: ``{signal: column or [columns]}``; default every model sensor and joint state
        (``<joint>_qpos``/``_qvel``) with a column of that name.

    Raises:
      KeyError: A named column or signal does not exist (lists what does).
      ValueError: Lengths or widths do not match, or no sensor column was found.
    """
    where = f"recording {str(path)!r}"
    cols = read_columns(path)
    tkey = time or next((k for k in TIME_KEYS if k in cols), None)
    if tkey is None or tkey not in cols:
        raise KeyError(f"{where}: no time column {time or TIME_KEYS!r}; it has {sorted(cols)}")
    times = np.asarray(cols[tkey], dtype=np.float64).reshape(-1)
    n = times.size
    # controls
    ctrl_ts = None
    if model.nu:
        names = [model.actuator(i).name for i in range(model.nu)]
        cmap = dict(control) if control is not None else {}
        unknown = sorted(set(cmap) - set(names))
        if unknown:
            raise KeyError(
                f"{where}: control names {unknown} are not actuators of the model; "
                f"actuators: {names}"
            )
        data = []
        for a in names:
            key = cmap.get(a) or (f"ctrl.{a}" if f"ctrl.{a}" in cols else a)
            if key not in cols:
                raise KeyError(
                    f"{where}: no control column for actuator {a!r} (looked for "
                    f"{key!r}); map it under control: in the experiment file"
                )
            data.append(_column(cols, key, where, n))
        ctrl_ts = TimeSeries.from_control_names(times, np.concatenate(data, axis=1), model)
    # sensors
    if sensors is None:
        chosen: dict[str, str | Sequence[str]] = {}
        for i in range(model.nsensor):
            s = model.sensor(i).name
            if s and s in cols:
                chosen[s] = s
        for j in range(model.njnt):
            jn = model.joint(j).name
            for suffix in ("_qpos", "_qvel"):
                if jn and f"{jn}{suffix}" in cols and f"{jn}{suffix}" not in chosen:
                    chosen[f"{jn}{suffix}"] = f"{jn}{suffix}"
        if not chosen:
            raise ValueError(
                f"{where}: must contain at least one column named like a model sensor "
                f"or joint state, got columns {sorted(cols)}"
            )
    else:
        chosen = dict(sensors)
    names_typed = []
    blocks = []
    for sig, key in chosen.items():
        canonical, stype = resolve_signal_name(model, sig)
        width = len(signal_source_indices(model, canonical, stype))
        block = _column(cols, key, where, n)
        if block.shape[1] != width:
            raise ValueError(
                must_be(f"{where}: signal {sig!r}", f"{width} columns", f"{block.shape[1]}")
            )
        names_typed.append((canonical, stype))
        blocks.append(block)
    sens_ts = TimeSeries.from_names(times, np.concatenate(blocks, axis=1), model, names=names_typed)
    qpos0 = cols.get("initial_qpos")
    qvel0 = cols.get("initial_qvel")
    return Recording(
        times,
        ctrl_ts,
        sens_ts,
        None if qpos0 is None else np.asarray(qpos0, dtype=np.float64).reshape(-1),
        None if qvel0 is None else np.asarray(qvel0, dtype=np.float64).reshape(-1),
    )


def initial_state_from_sensors(
    model: mujoco.MjModel, sens: TimeSeries, *, fill: float | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``(qpos, qvel)`` at the first sample, from joint sensors and joint-state columns.

    Entries without a measurement are ``fill`` when given, else ``qpos0`` and zero velocity.
    """
    qpos, qvel = model.qpos0.copy(), np.zeros(model.nv)
    if fill is not None:
        qpos[:], qvel[:] = fill, fill
    assert sens.signal_mapping is not None
    for name, (stype, cols) in sens.signal_mapping.items():
        first = sens.data[0, cols]
        if stype == SignalType.MjStateQPos:
            qpos[signal_source_indices(model, name, stype)] = first
        elif stype == SignalType.MjStateQVel:
            qvel[signal_source_indices(model, name, stype)] = first
        elif stype == SignalType.MjSensor:
            i = model.sensor(name).id
            if int(model.sensor_objtype[i]) != int(mujoco.mjtObj.mjOBJ_JOINT):
                continue
            j = int(model.sensor_objid[i])
            if int(model.jnt_type[j]) not in (
                int(mujoco.mjtJoint.mjJNT_HINGE),
                int(mujoco.mjtJoint.mjJNT_SLIDE),
            ):
                continue
            if int(model.sensor_type[i]) == int(mujoco.mjtSensor.mjSENS_JOINTPOS):
                qpos[model.jnt_qposadr[j]] = first[0]
            elif int(model.sensor_type[i]) == int(mujoco.mjtSensor.mjSENS_JOINTVEL):
                qvel[model.jnt_dofadr[j]] = first[0]
    return qpos, qvel


def write_recording(
    path: str | Path,
    model: mujoco.MjModel,
    times: np.ndarray,
    control: np.ndarray,
    sensordata: np.ndarray,
    *,
    initial_qpos: np.ndarray | None = None,
    initial_qvel: np.ndarray | None = None,
) -> Path:
    """Writes a recording in the layout :func:`load_recording` reads by default.

    ``sensordata`` holds all model sensors, ``(N, nsensordata)``; ``control`` is ``(N, nu)``.
    The format follows the extension: ``.npz`` or ``.csv``.
    """
    path = Path(path)
    cols: dict[str, np.ndarray] = {"time": np.asarray(times, dtype=np.float64)}
    for i in range(model.nu):
        cols[f"ctrl.{model.actuator(i).name}"] = control[:, i]
    for i in range(model.nsensor):
        s = model.sensor(i)
        name = s.name or f"sensor{i}"
        adr, dim = int(model.sensor_adr[i]), int(model.sensor_dim[i])
        cols[name] = sensordata[:, adr] if dim == 1 else sensordata[:, adr : adr + dim]
    if path.suffix.lower() == ".npz":
        if initial_qpos is not None:
            cols["initial_qpos"] = np.asarray(initial_qpos, dtype=np.float64)
        if initial_qvel is not None:
            cols["initial_qvel"] = np.asarray(initial_qvel, dtype=np.float64)
        return atomic_savez(path, cols)
    if path.suffix.lower() != ".csv":
        raise ValueError(must_be("path", "a .npz or .csv file name", str(path)))
    header, columns = [], []
    for k, v in cols.items():
        if v.ndim == 1:
            header.append(k)
            columns.append(v)
        else:
            for j in range(v.shape[1]):
                header.append(f"{k}[{j}]")
                columns.append(v[:, j])
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(header)
    for row in np.stack(columns, axis=1):
        w.writerow([repr(float(x)) for x in row])
    return atomic_write_text(path, out.getvalue())
