"""What a capture leaves on disk: the recording and its sidecar.

The recording has the layout :func:`mjsysid.data.recording.load_recording` reads: ``time``
(s, the device clock from the first row), ``ctrl.<actuator>`` (the commands as applied, in
control units) and one column per recorded field (named by its ``column``). It is written
column by column rather than with :func:`~mjsysid.data.recording.write_recording`, which needs
a model and writes model sensors only (a capture also records joint states such as
``shaft_qvel`` and does not need the model).

The sidecar ``<recording stem>.capture.yaml`` holds how the capture went: rates, dropped,
repeated, malformed and foreign lines, host and device clock jitter, soft-limit
interventions, late commands, and why it ended.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from mjsysid.util.errors import must_be
from mjsysid.util.files import atomic_savez, atomic_write_text


def write_columns(path: str | Path, columns: Mapping[str, np.ndarray]) -> Path:
    """Writes 1-D columns of one length as ``.npz`` arrays or ``.csv`` columns."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return atomic_savez(path, {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()})
    if suffix != ".csv":
        raise ValueError(must_be("recording", "a .npz or .csv file name", str(path)))
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(list(columns))
    for row in zip(*columns.values(), strict=True):
        w.writerow([repr(float(x)) for x in row])
    return atomic_write_text(path, out.getvalue())


def sidecar_path(recording: str | Path) -> Path:
    """``run1.npz`` -> ``run1.capture.yaml``."""
    recording = Path(recording)
    return recording.with_name(recording.stem + ".capture.yaml")


def _spacing(times: np.ndarray) -> dict[str, float] | None:
    """Median, std, min and max of the spacing of ``times (N,)`` (s)."""
    if times.size < 2:
        return None
    d = np.diff(times)
    return {
        "median_s": float(np.median(d)),
        "std_s": float(np.std(d)),
        "min_s": float(np.min(d)),
        "max_s": float(np.max(d)),
    }


def timing_summary(device_t: np.ndarray, host_t: np.ndarray, rate: float) -> dict[str, Any]:
    """Rates and jitter of the device clock and of the host's arrival times (both s)."""
    dev, host = _spacing(device_t), _spacing(host_t)
    out: dict[str, Any] = {"nominal_hz": float(rate)}
    if dev is not None and host is not None:
        latency = host_t - device_t
        latency = latency - np.min(latency)
        out.update(
            device_hz=1.0 / dev["median_s"] if dev["median_s"] > 0 else None,
            host_hz=1.0 / host["median_s"] if host["median_s"] > 0 else None,
            device_spacing=dev,
            host_spacing=host,
            latency_spread_s={"std": float(np.std(latency)), "max": float(np.max(latency))},
        )
    return out


def write_sidecar(path: str | Path, summary: Mapping[str, Any]) -> Path:
    """Writes the capture summary as YAML."""
    return atomic_write_text(path, yaml.safe_dump(dict(summary), sort_keys=False))
