"""Damaged recordings and robot logs are ValueErrors naming the file and where, never a
traceback from deep inside a reader.

The logs are written here with the real libraries (``mcap``, ``rosbags``), then truncated or
corrupted byte by byte, as a recorder killed mid-write or a bad copy leaves them.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.data.recording import read_columns
from mjsysid.data.robot_logs import LogSource, read_log_columns

rosbag2 = pytest.importorskip("rosbags.rosbag2")
typesys = pytest.importorskip("rosbags.typesys")
mcap_writer = pytest.importorskip("mcap.writer")

STORE = typesys.get_typestore(typesys.Stores.ROS2_HUMBLE)
N = 60  # messages per topic
SOURCE = LogSource(
    columns={"ctrl.motor": "/cmd.vector.x", "shaft_qpos": "/joint_states.position[shaft]"},
    stamp="header",
)


def _stamp(i: int) -> dict:
    return {"sec": 1_700_000_000 + i // 50, "nanosec": (i % 50) * 20_000_000}


def _body(topic: str, i: int) -> dict:
    if topic == "/cmd":
        return {"header": {"stamp": _stamp(i)}, "vector": {"x": 0.01 * i, "y": 0.0, "z": 0.0}}
    return {"header": {"stamp": _stamp(i)}, "name": ["shaft"], "position": [0.002 * i]}


def json_mcap(path: Path, bodies: Callable[[str, int], bytes] | None = None) -> Path:
    """A json MCAP file of ``N`` messages on /cmd and /joint_states (``bodies`` may replace a
    message's bytes)."""
    with path.open("wb") as f:
        w = mcap_writer.Writer(f)
        w.start()
        schema = w.register_schema("any", "jsonschema", b"{}")
        channels = {t: w.register_channel(t, "json", schema) for t in ("/cmd", "/joint_states")}
        for i in range(N):
            t_ns = 1_700_000_000 * 10**9 + i * 20_000_000
            for topic, channel in channels.items():
                data = json.dumps(_body(topic, i)).encode()
                if bodies is not None:
                    data = bodies(topic, i) or data
                w.add_message(channel, t_ns, data, t_ns)
        w.finish()
    return path


def ros_bag(path: Path, storage: str) -> Path:
    plugin = rosbag2.StoragePlugin.MCAP if storage == "mcap" else rosbag2.StoragePlugin.SQLITE3
    T = STORE.types
    with rosbag2.Writer(path, version=9, storage_plugin=plugin) as w:
        cmd = w.add_connection("/cmd", "geometry_msgs/msg/Vector3Stamped", typestore=STORE)
        js = w.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=STORE)
        for i in range(N):
            st = _stamp(i)
            header = T["std_msgs/msg/Header"](
                stamp=T["builtin_interfaces/msg/Time"](sec=st["sec"], nanosec=st["nanosec"]),
                frame_id="",
            )
            t_ns = st["sec"] * 10**9 + st["nanosec"]
            vec = T["geometry_msgs/msg/Vector3"](x=0.01 * i, y=0.0, z=0.0)
            msg = T["geometry_msgs/msg/Vector3Stamped"](header=header, vector=vec)
            w.write(cmd, t_ns, STORE.serialize_cdr(msg, msg.__msgtype__))
            joint = T["sensor_msgs/msg/JointState"](
                header=header,
                name=["shaft"],
                position=np.array([0.002 * i]),
                velocity=np.array([0.0]),
                effort=np.array([], dtype=np.float64),
            )
            w.write(js, t_ns, STORE.serialize_cdr(joint, joint.__msgtype__))
    return path


def _cut(path: Path, fraction: float) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    return path


def _flip(path: Path, at: int, count: int = 12) -> Path:
    data = bytearray(path.read_bytes())
    data[at : at + count] = b"\xff" * count
    path.write_bytes(bytes(data))
    return path


def _bag_file(bag: Path) -> Path:
    return next(p for p in bag.iterdir() if p.suffix in (".db3", ".mcap"))


def _bad_json(value_of: Callable[[int], object]) -> Callable[[str, int], bytes]:
    """Message 7 of /cmd with vector.x replaced."""

    def bodies(topic: str, i: int) -> bytes:
        if topic != "/cmd" or i != 7:
            return b""
        body = _body(topic, i)
        body["vector"]["x"] = value_of(i)
        return json.dumps(body).encode()

    return bodies


def _raw(data: bytes) -> Callable[[str, int], bytes]:
    return lambda topic, i: data if topic == "/cmd" and i == 7 else b""


# (name, make the damaged log in tmp_path -> path, the message) ----------------------------
LOG_BAD_INPUTS: list[tuple[str, Callable[[Path], Path], str]] = [
    (
        "empty mcap",
        lambda d: _cut(json_mcap(d / "a.mcap"), 0.0),
        r"must be an MCAP file, got an empty file",
    ),
    (
        "mcap cut at 10 %",
        lambda d: _cut(json_mcap(d / "a.mcap"), 0.1),
        r"must be a readable MCAP file, got a truncated or damaged one \(at byte [\d,]+ of [\d,]+",
    ),
    (
        "mcap cut at 50 %",
        lambda d: _cut(json_mcap(d / "a.mcap"), 0.5),
        r"must be a readable MCAP file, got a truncated or damaged one \(at byte [\d,]+ of [\d,]+",
    ),
    (
        "mcap cut at 99 %",
        lambda d: _cut(json_mcap(d / "a.mcap"), 0.99),
        r"must be a readable MCAP file, got a truncated or damaged one \(at byte",
    ),
    (
        "mcap without its last byte",
        lambda d: _cut(json_mcap(d / "a.mcap"), 1 - 1e-9),
        r"a.mcap' must be a",
    ),
    (
        "mcap footer overwritten",
        lambda d: _flip(json_mcap(d / "a.mcap"), -30, 22),
        r"a.mcap' must be a",
    ),
    (
        "mcap footer zeroed",
        lambda d: _zero_footer(json_mcap(d / "a.mcap")),
        r"must be an MCAP file with a summary section, got none",
    ),
    (
        "mcap magic overwritten",
        lambda d: _flip(json_mcap(d / "a.mcap"), 0, 8),
        r"a.mcap' must be a readable MCAP file",
    ),
    (
        "json nested 100000 deep",
        lambda d: json_mcap(d / "a.mcap", _raw(b"[" * 100_000 + b"]" * 100_000)),
        r"message \d+ \(topic '/cmd', log time \d+ ns\) must be JSON nested at most a few",
    ),
    (
        "json syntax",
        lambda d: json_mcap(d / "a.mcap", _raw(b'{"header": {')),
        r"message \d+ \(topic '/cmd', log time \d+ ns\) must be JSON, got an error at character 12",
    ),
    (
        "json not utf-8",
        lambda d: json_mcap(d / "a.mcap", _raw(b'{"a": "\xff\xfe"}')),
        r"message \d+ \(topic '/cmd', log time \d+ ns\) must be",
    ),
    (
        "json string for a number",
        lambda d: json_mcap(d / "a.mcap", _bad_json(lambda i: "12.5")),
        r"message 8 of topic '/cmd' \(log time \d+ ns\): source column 'ctrl.motor': "
        r"field vector.x must be numbers, got str",
    ),
    (
        "json bool for a number",
        lambda d: json_mcap(d / "a.mcap", _bad_json(lambda i: True)),
        r"field vector.x must be numbers, got bool",
    ),
    (
        "json object for a number",
        lambda d: json_mcap(d / "a.mcap", _bad_json(lambda i: {"v": 1})),
        r"field vector.x must be numbers, got dict",
    ),
    (
        "json list of strings",
        lambda d: json_mcap(d / "a.mcap", _bad_json(lambda i: ["1", "2"])),
        r"field vector.x must be numbers, got a list of str",
    ),
    (
        "json ragged list",
        lambda d: json_mcap(d / "a.mcap", _bad_json(lambda i: [1, [2, 3]])),
        r"field vector.x must be numbers, got a list of mixed values",
    ),
    (
        "json integer of 400 digits",
        lambda d: json_mcap(
            d / "a.mcap",
            _raw(
                b'{"header": {"stamp": {"sec": 1700000000, "nanosec": 0}}, "vector": {"x": 1'
                + b"0" * 400
                + b"}}"
            ),
        ),
        r"field vector.x must be numbers, got an integer too large for a float",
    ),
    (
        "json stamp as text",
        lambda d: json_mcap(
            d / "a.mcap",
            _raw(b'{"header": {"stamp": {"sec": "now", "nanosec": 0}}, "vector": {"x": 1}}'),
        ),
        r"message 8 of topic '/cmd' .*: header.stamp.sec must be an integer in \[0, [\d,]+\], "
        r"got str",
    ),
    (
        "json stamp of 1e30 s",
        lambda d: json_mcap(
            d / "a.mcap",
            _raw(b'{"header": {"stamp": {"sec": 1e30, "nanosec": 0}}, "vector": {"x": 1}}'),
        ),
        r"header.stamp.sec must be an integer in \[0, [\d,]+\], got float",
    ),
    (
        "json negative nanosec",
        lambda d: json_mcap(
            d / "a.mcap",
            _raw(b'{"header": {"stamp": {"sec": 1700000000, "nanosec": -5}}, "vector": {"x": 1}}'),
        ),
        r"header.stamp.nanosec must be an integer in \[0, 999,999,999\], got -5",
    ),
    (
        "json list instead of an object",
        lambda d: json_mcap(d / "a.mcap", _raw(b"[1, 2, 3]")),
        r"message 8 of topic '/cmd' .*stamp: header needs messages with a header.stamp",
    ),
    (
        "half-written .db3",
        lambda d: _cut(_bag_file(ros_bag(d / "bag", "sqlite3")), 0.5),
        r"bag.db3' must be a readable ROS 2 bag, got a truncated or damaged one: "
        r"AnyReaderError: Cannot open database",
    ),
    (
        "a .db3 cut at 95 %",
        lambda d: _cut(_bag_file(ros_bag(d / "bag", "sqlite3")), 0.95),
        r"bag.db3' must be a readable ROS 2 bag",
    ),
    (
        "empty .db3",
        lambda d: _cut(_bag_file(ros_bag(d / "bag", "sqlite3")), 0.0),
        r"bag.db3' must be a ROS 2 bag, got an empty file",
    ),
    (
        "bag folder with a half-written .db3",
        lambda d: (_cut(_bag_file(ros_bag(d / "bag", "sqlite3")), 0.5), d / "bag")[1],
        r"'[^']*bag' must be a readable ROS 2 bag, got a truncated or damaged one",
    ),
    (
        "bag folder with a cut .mcap",
        lambda d: (_cut(_bag_file(ros_bag(d / "bag", "mcap")), 0.7), d / "bag")[1],
        r"'[^']*bag' must be a readable ROS 2 bag, got a truncated or damaged one: AnyReaderError",
    ),
    (
        "bag metadata not YAML",
        lambda d: _write(
            ros_bag(d / "bag", "sqlite3"),
            "metadata.yaml",
            "rosbag2_bagfile_information: {version: 9, secret_token",
        ),
        r"'[^']*bag' must be a readable ROS 2 bag, got a truncated or damaged one: "
        r"AnyReaderError: Could not load YAML",
    ),
    (
        "bag metadata a list",
        lambda d: _write(ros_bag(d / "bag", "sqlite3"), "metadata.yaml", "[1, 2]"),
        r"must be a readable ROS 2 bag, got a truncated or damaged one: "
        r"AnyReaderError: Invalid bag metadata",
    ),
    (
        "ros mcap cut at 60 %",
        lambda d: _cut(_bag_file(ros_bag(d / "bag", "mcap")), 0.6),
        r"bag.mcap' must be a readable MCAP file, got a truncated or damaged one \(at byte",
    ),
]


def _zero_footer(path: Path) -> Path:
    data = bytearray(path.read_bytes())
    data[-30:-8] = b"\x00" * 22
    path.write_bytes(bytes(data))
    return path


def _write(bag: Path, name: str, text: str) -> Path:
    (bag / name).write_text(text)
    return bag


@pytest.mark.parametrize(
    ("name", "make", "match"), LOG_BAD_INPUTS, ids=[c[0] for c in LOG_BAD_INPUTS]
)
def test_log_bad_inputs(tmp_path, name, make, match):
    path = make(tmp_path)
    with pytest.raises((ValueError, KeyError)) as info:
        read_log_columns(path, SOURCE, hold={"ctrl.motor"})
    text = str(info.value.args[0])
    assert f"robot log {str(path)!r}" in text
    assert re.search(match, text), text
    assert "secret_token" not in text  # what the file says is not echoed


def test_the_undamaged_logs_read(tmp_path):
    for path in (json_mcap(tmp_path / "a.mcap"), ros_bag(tmp_path / "bag", "sqlite3")):
        cols = read_log_columns(path, SOURCE, hold={"ctrl.motor"})
        assert cols["time"].size == N and np.ptp(cols["shaft_qpos"]) > 0


def test_a_damaged_log_in_an_experiment_is_an_error_message(tmp_path, capsys):
    """Through ``mjsysid check``: the message names the experiment key and the log; exit 1."""
    log = _cut(json_mcap(tmp_path / "a.mcap"), 0.5)
    model = Path(__file__).parents[2] / "src" / "mjsysid" / "examples" / "dcmotor" / "dcmotor.xml"
    shutil.copy(model, tmp_path / "dcmotor.xml")
    source = {"stamp": "header", "columns": dict(SOURCE.columns)}
    exp = {
        "model": "dcmotor.xml",
        "sequences": [{"name": "run", "file": "a.mcap", "source": source}],
        "parameters": [{"kind": "actuator_kv", "target": "motor", "nominal": 0.002}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    code = main(["check", str(tmp_path / "exp.yaml")])
    err = capsys.readouterr().err
    assert code == 2  # (check: 2 for errors)
    assert err.startswith(f"error: {tmp_path / 'exp.yaml'}: sequences[0]")
    assert f"robot log {str(log)!r} must be a readable MCAP file" in err
    assert "Traceback" not in err


# recordings -------------------------------------------------------------------------------
RECORDING_BAD_INPUTS = [
    (
        "csv field over csv's limit",
        b"time,a\n0," + b"1" * 200_000 + b"\n1,2\n",
        r"line 2: not readable as CSV: field larger than field limit",
    ),
    (
        "csv not utf-8",
        b"time,\xe9\n0,1\n1,2\n",
        r"must be a UTF-8 text file \(a CSV\), got a byte that is not UTF-8 at offset 5",
    ),
    ("csv binary", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", r"must be a UTF-8 text file"),
]


@pytest.mark.parametrize(
    ("name", "data", "match"), RECORDING_BAD_INPUTS, ids=[c[0] for c in RECORDING_BAD_INPUTS]
)
def test_recording_bad_inputs(tmp_path, name, data, match):
    path = tmp_path / "run.csv"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=match) as info:
        read_columns(path)
    assert str(info.value).startswith(repr(str(path)))


def test_a_recording_error_through_the_command_line(tmp_path):
    (tmp_path / "run.csv").write_bytes(b"time,a\n0," + b"1" * 200_000 + b"\n")
    model = Path(__file__).parents[2] / "src" / "mjsysid" / "examples" / "dcmotor" / "dcmotor.xml"
    shutil.copy(model, tmp_path / "dcmotor.xml")
    exp = {
        "model": "dcmotor.xml",
        "sequences": [{"name": "run", "file": "run.csv"}],
        "parameters": [{"kind": "actuator_kv", "target": "motor", "nominal": 0.002}],
    }
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(tmp_path / "exp.yaml")], stdout=out, stderr=err) == 2  # errors
    assert "line 2: not readable as CSV" in err.getvalue()
