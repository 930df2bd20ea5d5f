"""Robot logs as recordings: MCAP files and ROS 2 bags mapped onto named columns.

A :class:`LogSource` says which message field fills which recording column::

    LogSource(
        columns={"ctrl.motor": "/cmd.data", "encoder": "/joint_states.position[shaft]"},
        stamp="header",            # or "receive": the time the logger received the message
        joint_states="/joint_states",   # optional: <joint>_qpos / <joint>_qvel by joint name
    )

Field paths are ``<topic>.<field>[.<field>...]``, each field optionally indexed: ``[2]`` by
position, ``[shaft]`` by name (the position of ``shaft`` in the message's ``name`` list, as in
``sensor_msgs/JointState``). ``joint_states`` adds, for every joint in that topic's messages
(or the ``joints`` mapping ``{model joint: name in the log}``), the columns
``<joint>_qpos`` (``position``) and ``<joint>_qvel`` (``velocity``, when the messages carry
it).

Time stamps are declared, never guessed: ``stamp="header"`` reads ``header.stamp`` (the
sensor's or driver's clock: right for system identification), ``stamp="receive"`` the log
time at which the recorder received the message (the host's clock: it jitters; see
:mod:`mjsysid.data.timing`). Topics arrive at their own times: all columns are put on one
grid, the stamps of the ``grid`` topic (default: the topic of the first control column, else
of the first column) or a regular step ``grid=<dt>`` s, within the span every topic covers;
sensor columns are interpolated linearly, control columns held (the last command at or
before each grid time). The time column ``time`` counts seconds from the first grid time.

Formats: ``rosbag2`` (a bag folder with ``metadata.yaml``, sqlite3 or mcap storage; a ``.db3``
file) through the ``rosbags`` package; ``mcap`` (a ``.mcap`` file) with ROS 2 (``cdr``)
messages through ``rosbags``, with ``json`` messages through the ``mcap`` package. Both are
in the ``logs`` extra: ``pip install -e '.[logs]'`` in the mjsysid checkout.

A damaged log is a ``ValueError`` naming the file and where: an empty, truncated or corrupt
MCAP file (the byte offset the reader reached), a half-written ``.db3`` or bag, a message that
is not JSON (its topic, its number and the character), nested too deeply, or a field of the
wrong type (``must be numbers, got str``); the values in the file are never echoed. The
messages per column are bounded by the limit ``max_rows``.
"""

from __future__ import annotations

import importlib
import json
import re
import sqlite3
import struct
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from mjsysid.util.errors import finite_real, must_be
from mjsysid.util.limits import check_limit, get_limit

__all__ = ["FORMATS", "STAMPS", "LogSource", "read_log_columns"]

FORMATS = ("mcap", "rosbag2")
STAMPS = ("header", "receive")
_INSTALL = "pip install -e '.[logs]' in the mjsysid checkout"
_PART = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\]]+)\])?$")


@dataclass(frozen=True)
class LogSource:
    """Which message fields of a robot log fill which recording columns.

    Attributes:
      columns: ``{column: "<topic>.<field>[index]"}`` (see the module docstring).
      stamp: ``"header"`` (``header.stamp``) or ``"receive"`` (the log's receive time).
      format: ``"mcap"`` or ``"rosbag2"``; ``None``: from the path (a folder or ``.db3`` is
        a bag, ``.mcap`` an MCAP file).
      joint_states: Topic of ``sensor_msgs/JointState`` messages giving ``<joint>_qpos`` /
        ``<joint>_qvel`` columns.
      joints: ``{model joint: name in the log}`` for ``joint_states`` (default: every name
        in the first message, under its own name).
      grid: The topic whose stamps are the time grid, or a regular step (s); ``None``: the
        topic of the first control column, else of the first column.
    """

    columns: Mapping[str, str] = field(default_factory=dict)
    stamp: str = ""
    format: str | None = None
    joint_states: str | None = None
    joints: Mapping[str, str] | None = None
    grid: str | float | None = None

    def __post_init__(self) -> None:
        if self.stamp not in STAMPS:
            raise ValueError(
                must_be(
                    "stamp",
                    "'header' (the message's header.stamp: the device's clock) or 'receive' "
                    "(when the logger received it: the host's clock); declare which",
                    self.stamp or None,
                )
            )
        if self.format is not None and self.format not in FORMATS:
            raise ValueError(must_be("format", f"one of {list(FORMATS)}", self.format))
        if not self.columns and self.joint_states is None:
            raise ValueError(must_be("source", "columns: or joint_states:", "neither"))
        for column, path in self.columns.items():
            _field_path(column, path)
        if isinstance(self.grid, bool) or (
            self.grid is not None
            and not isinstance(self.grid, str)
            and not (finite_real(self.grid) and float(self.grid) > 0)
        ):
            raise ValueError(must_be("grid", "a topic or a step > 0 (s)", self.grid))


@dataclass(frozen=True)
class _FieldPath:
    """``topic`` and the ``(field, index)`` parts of one column's field path."""

    topic: str
    parts: tuple[tuple[str, str | None], ...]


def _field_path(column: str, path: Any) -> _FieldPath:
    """The parsed ``<topic>.<field>[index]...`` of ``column``."""
    what = f"source column {column!r}"
    expected = "'<topic>.<field>[index]', e.g. '/joint_states.position[shaft]'"
    if not isinstance(path, str) or "." not in path:
        raise ValueError(must_be(what, expected, path))
    topic, rest = path.split(".", 1)
    parts = []
    for piece in rest.split("."):
        m = _PART.match(piece)
        if not topic or m is None:
            raise ValueError(must_be(what, expected, path))
        parts.append((m.group(1), m.group(2)))
    return _FieldPath(topic, tuple(parts))


def _require(module: str, what: str) -> ModuleType:
    """``module`` imported, or an ImportError naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(
            f"reading {what} needs the {module.split('.')[0]!r} package: {_INSTALL}"
        ) from None


def _format(path: Path, source: LogSource) -> str:
    """The declared format, else the one the path's form says."""
    if source.format is not None:
        return source.format
    if path.is_dir() or path.suffix.lower() == ".db3":
        return "rosbag2"
    if path.suffix.lower() == ".mcap":
        return "mcap"
    raise ValueError(
        must_be(
            f"robot log {str(path)!r}",
            "a ROS 2 bag folder, a .db3 or a .mcap file (or declare format:)",
            path.suffix or path.name,
        )
    )


def _rosbags_messages(path: Path, topics: set[str]) -> Iterator[tuple[str, int, Any]]:
    """``(topic, receive time ns, message)`` of a bag or ROS 2 MCAP file, via rosbags."""
    highlevel = _require("rosbags.highlevel", "ROS 2 bags and ROS 2 MCAP files")
    typesys = _require("rosbags.typesys", "ROS 2 bags and ROS 2 MCAP files")
    store = typesys.get_typestore(typesys.Stores.ROS2_HUMBLE)
    kind = "ROS 2 bag" if path.is_dir() or path.suffix.lower() == ".db3" else "ROS 2 MCAP file"
    errors = _reader_errors()
    count = 0
    try:
        with highlevel.AnyReader([path], default_typestore=store) as reader:
            _check_topics(path, topics, {c.topic for c in reader.connections})
            conns = [c for c in reader.connections if c.topic in topics]
            for conn, t_ns, raw in reader.messages(connections=conns):
                count += 1
                try:
                    msg = reader.deserialize(raw, conn.msgtype)
                except errors as e:
                    raise ValueError(
                        f"robot log {str(path)!r}: message {count:,} (topic {conn.topic!r}, log "
                        f"time {int(t_ns)} ns) does not decode as {conn.msgtype}: "
                        f"{_first_line(e)}"
                    ) from None
                yield conn.topic, int(t_ns), msg
    except errors as e:
        raise _damaged(path, kind, e, messages=count) from None


def _mcap_encodings(path: Path) -> dict[str, str]:
    """``{topic: message encoding}`` of an MCAP file."""
    reader_mod = _require("mcap.reader", "MCAP files")
    with path.open("rb") as f:
        try:
            summary = reader_mod.make_reader(f).get_summary()
        except _reader_errors() as e:
            raise _damaged(path, "MCAP file", e, offset=f.tell()) from None
    if summary is None:
        raise ValueError(
            f"robot log {str(path)!r} must be an MCAP file with a summary section, got none "
            "(its footer is damaged, or the recorder did not finish the file)"
        )
    return {c.topic: c.message_encoding for c in summary.channels.values()}


def _mcap_json_messages(path: Path, topics: set[str]) -> Iterator[tuple[str, int, Any]]:
    """``(topic, receive time ns, message dict)`` of the json-encoded MCAP ``topics``."""
    reader_mod = _require("mcap.reader", "MCAP files")
    errors = _reader_errors()
    count = 0
    with path.open("rb") as f:
        try:
            for _schema, channel, message in reader_mod.make_reader(f).iter_messages(
                topics=sorted(topics)
            ):
                count += 1
                t_ns = int(message.log_time)
                yield channel.topic, t_ns, _json(path, channel.topic, count, t_ns, message.data)
        except errors as e:
            raise _damaged(path, "MCAP file", e, offset=f.tell(), messages=count) from None


def _json(path: Path, topic: str, count: int, t_ns: int, data: bytes) -> Any:
    """One message's JSON, or a ValueError naming the file, the message and the character."""
    where = f"robot log {str(path)!r}: message {count:,} (topic {topic!r}, log time {t_ns} ns)"
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{where} must be JSON, got an error at character {e.pos}: {e.msg}"
        ) from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{where} must be UTF-8 JSON, got a bad byte at {e.start}") from None
    except RecursionError:
        raise ValueError(
            f"{where} must be JSON nested at most a few hundred levels deep, got deeper nesting"
        ) from None


def _first_line(e: BaseException) -> str:
    """``Type: first line`` of an error (later lines of a reader's message may quote the
    file, e.g. a YAML snippet of a bag's metadata)."""
    text = str(e).strip()
    first = text.splitlines()[0] if text else ""
    return (
        type(e).__name__
        if not first or first == type(e).__name__
        else f"{type(e).__name__}: {first}"
    )


def _damaged(
    path: Path, kind: str, e: BaseException, *, offset: int | None = None, messages: int = 0
) -> ValueError:
    """A reader's failure as a ValueError naming the file, the offset and the messages read."""
    try:
        size = path.stat().st_size if path.is_file() else None
    except OSError:
        size = None
    if size == 0:
        return ValueError(f"robot log {str(path)!r} must be {_a(kind)}, got an empty file")
    where = []
    if offset is not None:
        where.append(f"at byte {offset:,}" + (f" of {size:,}" if size is not None else ""))
    if messages:
        where.append(f"after {messages:,} messages")
    at = f" ({', '.join(where)})" if where else ""
    return ValueError(
        f"robot log {str(path)!r} must be a readable {kind}, got a truncated or damaged one"
        f"{at}: {_first_line(e)}"
    )


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "AEIMOU" else "a ") + noun


def _reader_errors() -> tuple[type[BaseException], ...]:
    """What the log readers raise on a damaged file (the optional packages' own errors where
    they are installed); a bug of ours is none of them and still shows its traceback."""
    errors: list[type[BaseException]] = [
        EOFError,
        struct.error,
        zlib.error,
        sqlite3.Error,
        UnicodeDecodeError,
        RecursionError,
        OverflowError,
    ]
    for module, name in (
        ("mcap.exceptions", "McapError"),
        ("rosbags.highlevel", "AnyReaderError"),
        ("rosbags.rosbag2", "ReaderError"),
        ("rosbags.serde", "SerdeError"),
        ("apsw", "Error"),
        ("zstandard", "ZstdError"),
    ):
        try:
            errors.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            continue  # not installed: it cannot raise either
    return tuple(errors)


def _messages(path: Path, source: LogSource, topics: set[str]) -> Iterator[tuple[str, int, Any]]:
    """The messages of ``topics``, whatever the format."""
    if _format(path, source) == "rosbag2":
        yield from _rosbags_messages(path, topics)
        return
    encodings = _mcap_encodings(path)
    _check_topics(path, topics, set(encodings))
    kinds = {encodings[t] for t in topics}
    if kinds == {"json"}:
        yield from _mcap_json_messages(path, topics)
    elif kinds == {"cdr"}:
        yield from _rosbags_messages(path, topics)
    else:
        raise ValueError(
            must_be(
                f"robot log {str(path)!r}: the message encoding of {sorted(topics)}",
                "'cdr' (ROS 2) or 'json', one for all topics read",
                {t: encodings[t] for t in sorted(topics)},
            )
        )


def _check_topics(path: Path, wanted: set[str], present: set[str]) -> None:
    missing = sorted(wanted - present)
    if missing:
        raise KeyError(
            f"robot log {str(path)!r}: no topic {missing}; the log has topics {sorted(present)}"
        )


def _get(msg: Any, name: str) -> Any:
    if isinstance(msg, Mapping):
        if name not in msg:
            raise KeyError(name)
        return msg[name]
    if not hasattr(msg, name):
        raise KeyError(name)
    return getattr(msg, name)


def _value(msg: Any, fp: _FieldPath, column: str) -> np.ndarray:
    """The field of ``msg`` that ``fp`` names, as a flat float array."""
    value, parent = msg, msg
    for name, index in fp.parts:
        try:
            parent, value = value, _get(value, name)
        except KeyError:
            fields = sorted(value) if isinstance(value, Mapping) else _fields(value)
            raise KeyError(
                f"source column {column!r}: the messages of {fp.topic!r} have no field "
                f"{name!r}; fields: {fields}"
            ) from None
        if index is not None:
            value = _indexed(parent, value, index, column)
    return _numbers(value, f"source column {column!r}: field {'.'.join(n for n, _ in fp.parts)}")


_KIND_NAMES = {"U": "str", "S": "bytes", "b": "bool", "O": "mixed values", "c": "complex"}


def _numbers(value: Any, what: str) -> np.ndarray:
    """``value`` as a flat float array: a number or a (nested) list of numbers; a string, a
    bool, a mapping or a number too large for a float is refused by its type (the value
    itself is not echoed)."""
    try:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    except (ValueError, TypeError, OverflowError):  # ragged lists
        arr = None
    if arr is not None and arr.dtype.kind in "iuf":
        return arr.astype(np.float64).reshape(-1)
    if isinstance(value, int) and not isinstance(value, bool):
        got = "an integer too large for a float"
    elif isinstance(value, list | tuple):
        kind = "mixed values" if arr is None else _KIND_NAMES.get(arr.dtype.kind, arr.dtype.name)
        got = f"a list of {kind}"
    else:
        got = type(value).__name__
    raise ValueError(f"{what} must be numbers, got {got}")


def _fields(msg: Any) -> list[str]:
    names = getattr(type(msg), "__dataclass_fields__", {})
    return [n for n in names if not n.startswith("__")]


def _indexed(parent: Any, value: Any, index: str, column: str) -> Any:
    """``value[index]``: by position, or by the index's place in ``parent.name``."""
    if index.isdigit():
        i = int(index)
    else:
        names = list(_get(parent, "name")) if _has(parent, "name") else []
        if index not in names:
            raise KeyError(
                f"source column {column!r}: no name {index!r} in the message's name list {names}"
            )
        i = names.index(index)
    if i >= len(value):
        raise ValueError(must_be(f"source column {column!r}: index", f"< {len(value)}", i))
    return value[i]


def _has(msg: Any, name: str) -> bool:
    return name in msg if isinstance(msg, Mapping) else hasattr(msg, name)


def _stamp(msg: Any, topic: str, receive_ns: int, stamp: str) -> int:
    """The message's time (integer ns, exact): its header stamp or its receive time."""
    if stamp == "receive":
        return receive_ns
    try:
        st = _get(_get(msg, "header"), "stamp")
        sec, nanosec = _get(st, "sec"), _get(st, "nanosec")
        for name, v, top in (("sec", sec, 2**62 // 1_000_000_000), ("nanosec", nanosec, 10**9 - 1)):
            ok = isinstance(v, int | np.integer) and not isinstance(v, bool) and 0 <= v <= top
            if not ok:
                got = type(v).__name__ if not isinstance(v, int | np.integer) else f"{int(v):,}"
                raise ValueError(
                    f"header.stamp.{name} must be an integer in [0, {top:,}], got {got}"
                )
        return int(sec) * 1_000_000_000 + int(nanosec)
    except (KeyError, TypeError):
        raise ValueError(
            f"topic {topic!r}: stamp: header needs messages with a header.stamp, and these "
            "have none (e.g. std_msgs); declare stamp: receive (the logger's clock)"
        ) from None


@dataclass
class _Series:
    """One column's samples as they arrived: ``times (M,)`` ns and ``values (M, d)``."""

    topic: str
    times: list[int] = field(default_factory=list)
    values: list[np.ndarray] = field(default_factory=list)

    def add(self, t: int, value: np.ndarray) -> None:
        if self.values and value.shape != self.values[0].shape:
            raise ValueError(
                must_be(
                    f"topic {self.topic!r}: every message's field",
                    f"{self.values[0].size} values (as in the first message)",
                    value.size,
                )
            )
        self.times.append(t)
        self.values.append(value)

    def arrays(self, column: str, t0: int) -> tuple[np.ndarray, np.ndarray]:
        """``(times (M,) s after t0 ns, values (M, d))`` sorted by time, repeated stamps
        dropped (the last message of a stamp is kept)."""
        if len(self.times) < 2:
            raise ValueError(
                must_be(
                    f"source column {column!r} (topic {self.topic!r})",
                    "2 or more messages",
                    len(self.times),
                )
            )
        ns = np.asarray(self.times, dtype=np.int64) - t0  # exact: float64 s of ROS time
        v = np.stack(self.values)  # would lose 0.1 µs
        order = np.argsort(ns, kind="stable")
        ns, v = ns[order], v[order]
        keep = np.append(np.diff(ns) > 0, True)
        return ns[keep] * 1e-9, v[keep]


def _collect(path: Path, source: LogSource) -> dict[str, _Series]:
    """Every column's samples, read in one pass over the log (at most ``max_rows`` each)."""
    paths = {c: _field_path(c, p) for c, p in source.columns.items()}
    topics = {fp.topic for fp in paths.values()}
    if source.joint_states is not None:
        topics.add(source.joint_states)
    series = {c: _Series(fp.topic) for c, fp in paths.items()}
    joints = dict(source.joints) if source.joints is not None else None
    counts = dict.fromkeys(topics, 0)
    limit = get_limit("max_rows")
    for topic, t_ns, msg in _messages(path, source, topics):
        counts[topic] += 1
        if counts[topic] > limit:
            check_limit("max_rows", counts[topic], f"robot log {str(path)!r}: topic {topic!r}")
        try:
            t = _stamp(msg, topic, t_ns, source.stamp)
            for c, fp in paths.items():
                if fp.topic == topic:
                    series[c].add(t, _value(msg, fp, c))
            if topic == source.joint_states:
                if joints is None:
                    joints = {str(n): str(n) for n in _get(msg, "name")}
                _add_joint_states(series, set(paths), topic, t, msg, joints)
        except KeyError as e:
            raise KeyError(f"{_where(path, topic, counts[topic], t_ns)}: {e.args[0]}") from None
        except (ValueError, TypeError) as e:
            raise ValueError(f"{_where(path, topic, counts[topic], t_ns)}: {e}") from None
    return series


def _where(path: Path, topic: str, count: int, t_ns: int) -> str:
    return f"robot log {str(path)!r}, message {count:,} of topic {topic!r} (log time {t_ns} ns)"


def _add_joint_states(
    series: dict[str, _Series],
    mapped: set[str],
    topic: str,
    t: int,
    msg: Any,
    joints: Mapping[str, str],
) -> None:
    """``<joint>_qpos`` / ``<joint>_qvel`` samples of one JointState message."""
    names = [str(n) for n in _get(msg, "name")]
    position = _numbers(_get(msg, "position"), f"joint_states {topic!r}: field position")
    velocity = _numbers(_get(msg, "velocity"), f"joint_states {topic!r}: field velocity")
    for joint, name in joints.items():
        if name not in names:
            raise KeyError(
                f"joint_states {topic!r}: a message at {t * 1e-9!r} s has no joint {name!r} "
                f"(for the model joint {joint!r}); it has {names}"
            )
        i = names.index(name)
        pairs = [("_qpos", position)] + ([("_qvel", velocity)] if velocity.size else [])
        for suffix, values in pairs:
            column = f"{joint}{suffix}"
            if column in mapped:
                raise ValueError(
                    f"source: column {column!r} comes from both columns: and joint_states:"
                )
            series.setdefault(column, _Series(topic)).add(t, values[i : i + 1])


def _grid(
    source: LogSource,
    data: dict[str, tuple[np.ndarray, np.ndarray]],
    hold: set[str],
    series: dict[str, _Series],
) -> np.ndarray:
    """The grid times (s): the grid topic's stamps or a regular step, inside the span that
    every sensor column covers and after every control column's first command."""
    start = max(float(t[0]) for t, _ in data.values())
    ends = [float(t[-1]) for c, (t, _) in data.items() if c not in hold]
    end = min(ends) if ends else max(float(t[-1]) for t, _ in data.values())
    if isinstance(source.grid, (int, float)):
        n = int(np.floor((end - start) / float(source.grid) + 1e-9))
        grid = start + float(source.grid) * np.arange(n + 1)
    else:
        first = next((c for c in series if c in hold), next(iter(series)))
        topic = source.grid or series[first].topic
        owners = [c for c in series if series[c].topic == topic]
        if not owners:
            raise KeyError(
                must_be(
                    "source grid",
                    f"a topic read by a column, one of "
                    f"{sorted({s.topic for s in series.values()})}",
                    topic,
                )
            )
        stamps = data[owners[0]][0]
        grid = stamps[(stamps >= start - 1e-12) & (stamps <= end + 1e-12)]
    if grid.size < 2:
        raise ValueError(
            must_be(
                "robot log",
                "topics whose times overlap (2 or more grid times in common)",
                f"the common span [{start!r}, {end!r}] s",
            )
        )
    return grid


def _on_grid(t: np.ndarray, v: np.ndarray, grid: np.ndarray, held: bool) -> np.ndarray:
    """``v`` sampled at ``grid``: held (last sample at or before) or linearly interpolated."""
    if held:
        idx = np.clip(np.searchsorted(t, grid + 1e-12, side="right") - 1, 0, t.size - 1)
        out = v[idx]
    else:
        out = np.stack([np.interp(grid, t, v[:, j]) for j in range(v.shape[1])], axis=1)
    return out[:, 0] if out.shape[1] == 1 else out


def read_log_columns(
    path: str | Path, source: LogSource, *, hold: set[str] | frozenset[str] = frozenset()
) -> dict[str, np.ndarray]:
    """The columns ``source`` names, read from a robot log and put on one time grid.

    Args:
      path: ROS 2 bag folder, ``.db3`` or ``.mcap`` file.
      source: The field-to-column mapping, the time stamps and the grid.
      hold: Columns that are commands: held between their samples (the others are sensors:
        interpolated linearly).

    Returns:
      ``{"time": (M,) s from the first grid time, column: (M,) or (M, d)}``.

    Raises:
      ImportError: The ``logs`` extra is not installed (names the pip command).
      FileNotFoundError: No such log.
      KeyError: A topic, field, joint or name that the log does not have (lists what it has).
      ValueError: An undeclared or impossible stamp, too few messages, no common span.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such robot log: {str(path)!r}")
    series = _collect(path, source)
    if "time" in series:
        raise ValueError("source: 'time' is the time column; give the column another name")
    t0 = min(min(s.times) for s in series.values() if s.times) if series else 0
    data = {c: s.arrays(c, t0) for c, s in series.items()}
    grid = _grid(source, data, set(hold), series)
    out = {"time": grid - grid[0]}
    for c, (t, v) in data.items():
        out[c] = _on_grid(t, v, grid, c in hold)
    return out
