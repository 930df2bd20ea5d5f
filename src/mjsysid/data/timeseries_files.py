"""File formats of a :class:`~mjsysid.data.timeseries.TimeSeries`: npz, CSV, mapping JSON.

``.npz`` keys: ``times`` ``(N,)`` [s], ``data`` ``(N,)`` or ``(N, D)``, ``signal_mapping_json``
(JSON: ``null`` or a list of ``{"name", "type", "indices"}`` in mapping order) and
``schema_version``. Written atomically, read without pickle; the arrays themselves are
validated by the ``TimeSeries`` constructor.

CSV (:func:`save_series_csv`): one row per sample, ``time, column 0, column 1, ...``, ``%.18e``,
comma-separated, no header (the layout of ``mujoco.sysid``'s ``save_to_csv``; read it back with
``np.loadtxt(path, delimiter=",")``).

Mapping JSON (:func:`encode_signal_mapping`): ``{"name": [type, [indices]]}`` with the type as
``mujoco.sysid``'s integer code (MjSensor 0, CustomObs 1, MjStateQPos 2, MjStateQVel 3,
MjStateAct 4, MjCtrl 5), so either toolbox reads the other's files.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.lib.format as npy_format

from mjsysid.data.signals import SignalType, signal_type_code, signal_type_from_json
from mjsysid.util.errors import must_be, short_repr
from mjsysid.util.files import atomic_savez, atomic_write_text, load_npz
from mjsysid.util.limits import check_limit

TIMESERIES_SCHEMA_VERSION = 1
_NPZ_KEYS = ("times", "data", "signal_mapping_json", "schema_version")

SignalMapping = dict[str, tuple["SignalType", np.ndarray]]


def save_series_npz(
    path: str | Path, times: np.ndarray, data: np.ndarray, mapping: SignalMapping | None
) -> Path:
    """Writes ``times`` ``(N,)``, ``data`` ``(N, D)`` and ``mapping`` to ``path`` (atomically).

    Returns:
      The path written (exactly ``path``; no suffix is added).
    """
    if mapping is None:
        mapping_json = "null"
    else:
        mapping_json = json.dumps(
            [
                {"name": n, "type": kind.name, "indices": [int(i) for i in idx]}
                for n, (kind, idx) in mapping.items()
            ]
        )
    return atomic_savez(
        path,
        {
            "times": times,
            "data": data,
            "signal_mapping_json": np.array(mapping_json),
            "schema_version": np.array(TIMESERIES_SCHEMA_VERSION, dtype=np.int64),
        },
    )


def load_series_npz(path: str | Path) -> tuple[np.ndarray, np.ndarray, SignalMapping | None]:
    """``(times, data, mapping)`` read from a file written by :func:`save_series_npz`.

    The file format and the mapping's structure are checked; the arrays are not.

    Raises:
      FileNotFoundError: No such file.
      ValueError: Not a readable npz, missing keys, a newer schema version or a malformed
        mapping.
    """
    where = f"{str(path)!r}"
    # numpy leaks the file handle when np.load meets a broken zip (a ResourceWarning), and
    # zipfile/zlib errors are not ValueErrors: rule such files out before loading.
    if Path(path).is_file() and not zipfile.is_zipfile(path):
        raise ValueError(
            f"{where} is not a readable .npz file (not a zip archive: truncated or a "
            "foreign format)"
        )
    if Path(path).is_file():
        check_npz_headers(path, where)
    try:
        z = load_npz(path, required=_NPZ_KEYS)
    except (zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(f"{where} is not a readable .npz file ({e})") from None
    _check_version(where, z["schema_version"])
    raw = z["signal_mapping_json"]
    if raw.shape != () or raw.dtype.kind != "U":
        raise ValueError(must_be(f"{where}: signal_mapping_json", "a JSON string", raw))
    try:
        decoded = json.loads(str(raw))
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{where}: signal_mapping_json must be valid JSON, got an error: {e}"
        ) from None
    mapping = None if decoded is None else _mapping_from_json(where, decoded)
    return z["times"], z["data"], mapping


def _check_version(where: str, version: np.ndarray) -> None:
    if version.shape != () or version.dtype.kind not in "iu":
        raise ValueError(must_be(f"{where}: schema_version", "an integer", version))
    if int(version) > TIMESERIES_SCHEMA_VERSION:
        raise ValueError(
            f"{where}: schema_version must be <= {TIMESERIES_SCHEMA_VERSION}, got "
            f"{int(version)}; the file was written by a newer mjsysid, upgrade to read it"
        )
    if int(version) < 1:
        raise ValueError(must_be(f"{where}: schema_version", ">= 1", int(version)))


def _mapping_from_json(where: str, decoded: Any) -> SignalMapping:
    if not isinstance(decoded, list):
        raise ValueError(
            must_be(f"{where}: signal_mapping_json", "null or a list of signals", decoded)
        )
    known = {k.name: k for k in SignalType}
    out: SignalMapping = {}
    for i, entry in enumerate(decoded):
        what = f"{where}: signal_mapping_json[{i}]"
        if (
            not isinstance(entry, dict)
            or set(entry) != {"name", "type", "indices"}
            or not isinstance(entry["name"], str)
            or not isinstance(entry["indices"], list)
            or not all(isinstance(j, int) and not isinstance(j, bool) for j in entry["indices"])
        ):
            raise ValueError(
                must_be(
                    what,
                    '{"name": str, "type": str, "indices": [int, ...]}',
                    short_repr(entry),
                )
            )
        if entry["type"] not in known:
            raise ValueError(must_be(f"{what} type", f"one of {list(known)}", entry["type"]))
        if entry["name"] in out:
            raise ValueError(f"{what}: names must be unique, got {entry['name']!r} twice")
        out[entry["name"]] = (known[entry["type"]], np.array(entry["indices"], dtype=np.intp))
    return out


def save_series_csv(path: str | Path, times: np.ndarray, data: np.ndarray) -> Path:
    """Writes ``[times | data]`` as CSV (``%.18e``, no header), atomically.

    Args:
      path: Target file (no suffix is added).
      times: ``(N,)`` [s].
      data: ``(N,)`` or ``(N, D)``; 1-D data is one column.

    Returns:
      The path written.
    """
    table = np.column_stack([times, data.reshape(times.shape[0], -1)])
    buf = io.StringIO()
    np.savetxt(buf, table, delimiter=",", fmt="%.18e")
    return atomic_write_text(path, buf.getvalue())


def encode_signal_mapping(signal_mapping: SignalMapping) -> str:
    """A signal mapping as JSON text ``{"name": [type code, [indices]]}`` (no pickle needed).

    The type is ``mujoco.sysid``'s integer code (see the module docstring); mapping order is
    kept. :func:`decode_signal_mapping` is the inverse.
    """
    if not isinstance(signal_mapping, Mapping):
        raise TypeError(
            must_be("signal_mapping", "a dict {name: (SignalType, indices)}", signal_mapping)
        )
    out: dict[str, list[Any]] = {}
    for name, (kind, idx) in signal_mapping.items():
        if not isinstance(kind, SignalType):
            raise TypeError(must_be(f"signal_mapping[{name!r}] type", "a SignalType", kind))
        out[str(name)] = [signal_type_code(kind), [int(i) for i in np.ravel(idx)]]
    return json.dumps(out)


def _decoded_entry(name: str, entry: Any) -> tuple[SignalType, np.ndarray]:
    what = f"encoded signal mapping[{name!r}]"
    if not isinstance(entry, list) or len(entry) != 2:
        raise ValueError(must_be(what, "a [type, [indices]] pair", short_repr(entry)))
    kind = signal_type_from_json(entry[0])
    if kind is None:
        codes = ", ".join(f"{k.name}/{signal_type_code(k)}" for k in SignalType)
        raise ValueError(must_be(f"{what} type", f"a SignalType name or code ({codes})", entry[0]))
    idx = entry[1] if isinstance(entry[1], list) else [entry[1]]
    if not all(isinstance(j, int) and not isinstance(j, bool) for j in idx):
        raise ValueError(must_be(f"{what} indices", "a list of integers", short_repr(entry[1])))
    return kind, np.array(idx, dtype=np.intp)


def decode_signal_mapping(encoded: str) -> SignalMapping:
    """The signal mapping of JSON text from :func:`encode_signal_mapping`.

    Accepts the type as ``mujoco.sysid``'s integer code or as a :class:`SignalType` name, so
    files of either toolbox decode.

    Raises:
      ValueError: Not valid JSON, or not ``{"name": [type, [indices]]}``.
    """
    if not isinstance(encoded, str):
        raise TypeError(must_be("encoded", "a JSON string", encoded))
    try:
        decoded = json.loads(encoded)
    except json.JSONDecodeError as e:
        raise ValueError(f"encoded must be valid JSON, got an error: {e}") from None
    if not isinstance(decoded, dict):
        raise ValueError(
            must_be("encoded", 'a JSON object {"name": [type, [indices]]}', short_repr(decoded))
        )
    return {str(name): _decoded_entry(str(name), entry) for name, entry in decoded.items()}


def _member_header(z: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> tuple[Any, int | None]:
    """``(shape, bytes)`` of one ``.npy`` member (header and data; ``None`` for pickled
    objects), read from its header only."""
    try:
        with z.open(info) as f:
            version = npy_format.read_magic(f)
            if version == (1, 0):
                shape, _, dtype = npy_format.read_array_header_1_0(f)
            elif version in ((2, 0), (3, 0)):
                shape, _, dtype = npy_format.read_array_header_2_0(f)
            else:  # pragma: no cover - numpy knows no other versions
                raise ValueError(f"unknown .npy format version {version}")
            offset = f.tell()
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        raise ValueError(
            f"{where} is not a readable .npz file ({e}; in array {info.filename!r})"
        ) from None
    if dtype.hasobject:  # pickled: np.load refuses it without reading it (allow_pickle)
        return shape, None
    return shape, offset + math.prod(shape) * dtype.itemsize


def check_npz_headers(path: str | Path, where: str) -> None:
    """Checks each ``.npy`` header of an ``.npz`` archive before any data is read.

    Refuses an array whose row count (first axis) or byte size exceeds the limits
    ``max_rows`` / ``max_file_bytes`` of :mod:`mjsysid.util.limits`, and one whose stored
    (uncompressed) size disagrees with what its header claims (a corrupt or forged file).

    Raises:
      ValueError: Unreadable archive, a size over a limit or a header that lies.
    """
    try:
        with zipfile.ZipFile(path) as z:
            total = 0
            for info in z.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                shape, claimed = _member_header(z, info, where)
                name = info.filename[:-4]
                if shape:
                    check_limit("max_rows", int(shape[0]), f"{where}: array {name!r}: rows")
                if claimed is None:
                    continue
                check_limit("max_file_bytes", claimed, f"{where}: array {name!r}: bytes")
                if claimed != info.file_size:
                    raise ValueError(
                        f"{where}: array {name!r} header claims shape {tuple(shape)} "
                        f"({claimed:,} bytes) but {info.file_size:,} bytes are stored; the "
                        "file is corrupt: write it again"
                    )
                total += claimed
            check_limit("max_file_bytes", total, f"{where}: all arrays: bytes")
    except (OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"{where} is not a readable .npz file ({e})") from None
