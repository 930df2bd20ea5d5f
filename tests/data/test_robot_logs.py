"""Robot logs: ROS 2 bags and MCAP files written here with rosbags and mcap, read back."""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.data.excitation import multisine
from mjsysid.data.recording import load_recording
from mjsysid.data.robot_logs import LogSource, _require, read_log_columns
from mjsysid.data.timing import TimingWarning

rosbag2 = pytest.importorskip("rosbags.rosbag2")
typesys = pytest.importorskip("rosbags.typesys")
mcap_writer = pytest.importorskip("mcap.writer")

XML = Path(ms.__file__).parent / "examples" / "dcmotor" / "dcmotor.xml"
TAU, KV = 0.03, 0.003
T0 = 1_700_000_000  # s, a plausible ROS time
STORE = typesys.get_typestore(typesys.Stores.ROS2_HUMBLE)


class Motor:
    """The true motor driven at 50 Hz; joint states logged at 100 Hz."""

    def __init__(self) -> None:
        self.spec = mujoco.MjSpec.from_file(str(XML))
        self.model = self.spec.compile()
        truth = self.params()
        truth.update_from_vector([TAU, KV])
        n = 2000
        duty = 0.8 * multisine(n // 10, 1, 0.02, amplitude=1.0, f0=0.2, f1=4.0, seed=3)
        held = np.repeat(duty, 10, axis=0)
        model = ms.apply_param_modifiers(truth, self.spec)
        (traj,) = ms.sysid_rollout(model, None, held, ms.create_initial_state(self.model))
        self.t = traj.times  # every 2 ms
        self.u, self.qpos, self.qvel = held[:, 0], traj.state[:, 1], traj.state[:, 2]

    def params(self) -> ms.ParameterDict:
        return ms.ParameterDict(
            [
                ms.make_parameter("actuator_filter_tau", self.model, "motor"),
                ms.make_parameter("actuator_kv", self.model, "motor"),
            ]
        )

    def messages(self, jitter: float = 0.0) -> list[tuple[str, int, int, object]]:
        """``(topic, receive ns, stamp ns, value)``: /cmd every 20 ms, /joint_states every
        10 ms, received 1 ms late with ``jitter`` (s) of spread (times in integer ns: float
        seconds of ROS time would lose 0.1 µs)."""
        rng = np.random.default_rng(0)
        out: list[tuple[str, int, int, object]] = []
        for k in range(0, self.t.size, 5):
            stamp = T0 * 1_000_000_000 + 2_000_000 * k  # the 2 ms timestep
            received = stamp + 1_000_000 + round(jitter * 1e9 * rng.standard_normal())
            if k % 10 == 0:
                out.append(("/cmd", received, stamp, self.u[k]))
            out.append(("/joint_states", received, stamp, (self.qpos[k], self.qvel[k])))
        return out

    def fit(self, rec: object) -> np.ndarray:
        x0 = ms.create_initial_state(self.model, time=float(rec.times[0]))  # type: ignore[attr-defined]
        seqs = ms.ModelSequences(
            "m",
            self.spec,
            ["s"],
            [x0],
            [rec.control],  # type: ignore[attr-defined]
            [rec.sensordata],  # type: ignore[attr-defined]
        )
        opt, _ = ms.optimize(self.params(), ms.build_residual_fn([seqs]), max_iters=50)
        return opt.as_vector()


@pytest.fixture(scope="module")
def motor() -> Motor:
    return Motor()


def _ros_message(topic: str, stamp: int, value: object) -> tuple[str, object]:
    sec, nanosec = divmod(stamp, 1_000_000_000)
    header = STORE.types["std_msgs/msg/Header"](
        stamp=STORE.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec),
        frame_id="",
    )
    if topic == "/cmd":
        vec = STORE.types["geometry_msgs/msg/Vector3"](x=float(value), y=0.0, z=0.0)  # type: ignore[arg-type]
        return "geometry_msgs/msg/Vector3Stamped", STORE.types["geometry_msgs/msg/Vector3Stamped"](
            header=header, vector=vec
        )
    if topic == "/plain":
        return "std_msgs/msg/Float64", STORE.types["std_msgs/msg/Float64"](data=float(value))  # type: ignore[arg-type]
    q, v = value  # type: ignore[misc]
    return "sensor_msgs/msg/JointState", STORE.types["sensor_msgs/msg/JointState"](
        header=header,
        name=["wheel", "shaft"],
        position=np.array([0.0, q]),
        velocity=np.array([0.0, v]),
        effort=np.array([], dtype=np.float64),
    )


def write_bag(path: Path, messages: list, storage: str = "sqlite3") -> Path:
    plugin = rosbag2.StoragePlugin.MCAP if storage == "mcap" else rosbag2.StoragePlugin.SQLITE3
    conns: dict[str, object] = {}
    with rosbag2.Writer(path, version=9, storage_plugin=plugin) as w:
        for topic, t_ns, stamp, value in messages:
            msgtype, msg = _ros_message(topic, stamp, value)
            if topic not in conns:
                conns[topic] = w.add_connection(topic, msgtype, typestore=STORE)
            w.write(conns[topic], t_ns, STORE.serialize_cdr(msg, msgtype))
    return path


def write_json_mcap(path: Path, messages: list) -> Path:
    with path.open("wb") as f:
        w = mcap_writer.Writer(f)
        w.start()
        schema = w.register_schema("motor", "jsonschema", b"{}")
        channels: dict[str, int] = {}
        for topic, t_ns, stamp, value in messages:
            if topic not in channels:
                channels[topic] = w.register_channel(topic, "json", schema)
            sec, nanosec = divmod(stamp, 1_000_000_000)
            header = {"stamp": {"sec": sec, "nanosec": nanosec}}
            if topic == "/cmd":
                body = {"header": header, "vector": {"x": float(value), "y": 0.0, "z": 0.0}}
            else:
                q, v = value
                body = {
                    "header": header,
                    "name": ["wheel", "shaft"],
                    "position": [0.0, float(q)],
                    "velocity": [0.0, float(v)],
                }
            w.add_message(channels[topic], t_ns, json.dumps(body).encode(), t_ns)
        w.finish()
    return path


SOURCE = LogSource(
    columns={"ctrl.motor": "/cmd.vector.x"},
    joint_states="/joint_states",
    joints={"shaft": "shaft"},
    stamp="header",
)


def _check_columns(cols: dict[str, np.ndarray], motor: Motor) -> None:
    assert set(cols) == {"time", "ctrl.motor", "shaft_qpos", "shaft_qvel"}
    np.testing.assert_allclose(cols["time"], motor.t[::10][: cols["time"].size], atol=1e-12)
    n = cols["time"].size
    np.testing.assert_allclose(cols["ctrl.motor"], motor.u[::10][:n])
    np.testing.assert_allclose(cols["shaft_qpos"], motor.qpos[::10][:n], atol=1e-12)


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_bag_header_stamps_on_the_command_grid(motor: Motor, tmp_path: Path, storage: str) -> None:
    bag = write_bag(tmp_path / "bag", motor.messages(jitter=0.002), storage)
    cols = read_log_columns(bag, SOURCE, hold={"ctrl.motor"})
    _check_columns(cols, motor)
    rec = load_recording(bag, motor.model, source=SOURCE)
    np.testing.assert_allclose(motor.fit(rec), [TAU, KV], rtol=1e-3)


def test_bare_mcap_file_of_a_bag(motor: Motor, tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "bag", motor.messages(), "mcap")
    (mcap_file,) = bag.glob("*.mcap")
    _check_columns(read_log_columns(mcap_file, SOURCE, hold={"ctrl.motor"}), motor)


def test_json_mcap(motor: Motor, tmp_path: Path) -> None:
    path = write_json_mcap(tmp_path / "log.mcap", motor.messages())
    source = LogSource(
        columns={"ctrl.motor": "/cmd.vector.x", "shaft_qpos": "/joint_states.position[shaft]"},
        stamp="header",
    )
    cols = read_log_columns(path, source, hold={"ctrl.motor"})
    assert set(cols) == {"time", "ctrl.motor", "shaft_qpos"}
    np.testing.assert_allclose(cols["shaft_qpos"], motor.qpos[::10][: cols["time"].size])


def test_receive_times_jitter_and_warn(motor: Motor, tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "bag", motor.messages(jitter=0.002))
    source = LogSource(columns=SOURCE.columns, joint_states="/joint_states", stamp="receive")
    with pytest.warns(
        TimingWarning, match=r"time stamps jitter: median step \d+\.\d+ ms, spread \d+\.\d+ ms"
    ):
        load_recording(bag, motor.model, source=source, ignore_columns=["wheel_qpos", "wheel_qvel"])


def test_regular_grid_step_and_held_commands(motor: Motor, tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "bag", motor.messages())
    source = LogSource(
        columns={"ctrl.motor": "/cmd.vector.x"},
        joint_states="/joint_states",
        joints={"shaft": "shaft"},
        stamp="header",
        grid=0.005,
    )
    cols = read_log_columns(bag, source, hold={"ctrl.motor"})
    assert np.allclose(np.diff(cols["time"]), 0.005)
    np.testing.assert_allclose(cols["ctrl.motor"][1:4], motor.u[0])  # held within 20 ms
    # 15 ms is between joint-state samples at 10 and 20 ms: interpolated
    np.testing.assert_allclose(
        cols["shaft_qpos"][3], 0.5 * (motor.qpos[5] + motor.qpos[10]), rtol=1e-9, atol=1e-15
    )


def test_mistakes_name_what_the_log_has(motor: Motor, tmp_path: Path) -> None:
    msgs = [m for m in motor.messages()[:40]]
    bag = write_bag(tmp_path / "bag", msgs + [("/plain", msgs[-1][1] + 1, 0.0, 1.0)] * 1)
    with pytest.raises(KeyError, match=r"no topic \['/nope'\]; the log has topics"):
        read_log_columns(bag, LogSource(columns={"x": "/nope.data"}, stamp="receive"))
    with pytest.raises(KeyError, match=r"no field 'vectr'; fields: \['header', 'vector'\]"):
        read_log_columns(bag, LogSource(columns={"x": "/cmd.vectr.x"}, stamp="header"))
    with pytest.raises(KeyError, match=r"no name 'elbow' in the message's name list"):
        read_log_columns(
            bag, LogSource(columns={"x": "/joint_states.position[elbow]"}, stamp="header")
        )
    with pytest.raises(ValueError, match=r"declare stamp: receive"):
        read_log_columns(bag, LogSource(columns={"x": "/plain.data"}, stamp="header"))
    with pytest.raises(ValueError, match=r"stamp must be 'header' .* declare which"):
        LogSource(columns={"x": "/plain.data"})
    with pytest.raises(ValueError, match=r"source column 'x' must be '<topic>.<field>"):
        LogSource(columns={"x": "no_field"}, stamp="receive")


def test_missing_package_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"pip install -e '\.\[logs\]' in the mjsysid checkout"):
        _require("mjsysid_no_such_module", "robot logs")
