"""``.npz`` files of a :class:`~mjsysid.sim.trajectory.SystemTrajectory` (no pickle).

Keys, as ``mujoco.sysid`` writes them: ``control_times``, ``control_data``,
``sensordata_times``, ``sensordata_data``, ``initial_state``, ``state_times``, ``state_data``
(both ``(0,)`` without a state), and ``control_mapping``, ``sensordata_mapping``,
``state_mapping``: each signal mapping as a JSON string ``{"name": [type, [columns]]}``
(``null`` for none). ``type`` is ``mujoco.sysid``'s integer code (the
:class:`~mjsysid.SignalType` members in declaration order, ``MjSensor`` = 0), so either
toolbox reads the other's files; reading also accepts member names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from mjsysid.data.timeseries import SignalType
from mjsysid.util.errors import must_be
from mjsysid.util.files import atomic_savez, load_npz

FIELDS = ("control", "sensordata", "state")
KEYS = (
    "control_times",
    "control_data",
    "sensordata_times",
    "sensordata_data",
    "initial_state",
    "state_times",
    "state_data",
    "control_mapping",
    "sensordata_mapping",
    "state_mapping",
)


def mapping_to_json(mapping: dict[str, tuple[SignalType, np.ndarray]] | None) -> str:
    """``{"name": [0, [0, 1]], ...}`` (type codes) in mapping order, or ``"null"``."""
    if mapping is None:
        return "null"
    codes = {k: i for i, k in enumerate(SignalType)}
    return json.dumps({n: [codes[k], [int(i) for i in idx]] for n, (k, idx) in mapping.items()})


def _signal_type(value: Any, where: str) -> SignalType:
    members = list(SignalType)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(members):
        return members[value]
    if isinstance(value, str) and value in SignalType.__members__:
        return SignalType[value]
    raise ValueError(must_be(where, f"a SignalType name or 0..{len(members) - 1}", value))


def mapping_from_json(text: str, where: str) -> dict[str, tuple[SignalType, np.ndarray]] | None:
    """Inverse of :func:`mapping_to_json` (also reads the peer's integer types)."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where} must be valid JSON, got an error: {e}") from None
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError(must_be(where, "a JSON object {name: [type, [columns]]}", raw))
    out = {}
    for name, entry in raw.items():
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], list)):
            raise ValueError(must_be(f"{where}[{name!r}]", "[type, [columns]]", entry))
        out[name] = (_signal_type(entry[0], f"{where}[{name!r}] type"), np.asarray(entry[1], int))
    return out


def save_arrays(path: str | Path, arrays: dict[str, Any]) -> Path:
    """Writes the :data:`KEYS` of ``arrays`` atomically."""
    return atomic_savez(path, {k: np.asarray(arrays[k]) for k in KEYS})


def load_arrays(path: str | Path) -> dict[str, Any]:
    """The :data:`KEYS` of a file written by :func:`save_arrays`, mappings decoded."""
    z = load_npz(path, KEYS)
    out: dict[str, Any] = {k: z[k] for k in KEYS if not k.endswith("_mapping")}
    for f in FIELDS:
        out[f"{f}_mapping"] = mapping_from_json(str(z[f"{f}_mapping"]), f"{path}: {f}_mapping")
    return out
