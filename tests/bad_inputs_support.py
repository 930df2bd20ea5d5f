"""A catalogue of bad inputs: each one must fail early, with the right type and a clear message.

Every case is one bad input, the exact exception type and a message fragment that names the
argument, what was expected and what was received. Inputs are rejected at construction or
build time (TimeSeries, Parameter, ModelSequences, build_residual_fn) or, for what only
``optimize`` can know, at the start point before any iteration.

Covers every silent failure of the peer in ``shared/peer-notes.md``: NaN in data, zero sensor
column, start outside the bounds, min > max, equal bounds, short control, NaN in controls and
initial state, a delay pattern matching no sensor, a modifier that changes nothing, unknown
names in weights, saved parameters losing modifiers and metadata, and parameters left at a
perturbed point after optimize.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import yaml

import mjsysid as ms
import mjsysid.data.recording
import mjsysid.objective.signal_transform
import mjsysid.output.results
from conftest import ARM2, BOX, SERVO, excitation, simulate
from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment

NAN, INF = float("nan"), float("inf")
N = 100  # samples per sequence: small problems, every case runs in milliseconds


# --------------------------------------------------------------------------------------------
# Shared problems (built once per module; nothing below mutates them)


@dataclass
class Arm:
    """A 2-link arm with data from known masses, and a servo whose kp can make it diverge."""

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    x0: np.ndarray
    ctrl: np.ndarray
    times: np.ndarray
    sens: ms.TimeSeries
    control: ms.TimeSeries
    seqs: ms.ModelSequences
    rf: ms.ResidualFunction
    servo_spec: mujoco.MjSpec
    servo_model: mujoco.MjModel
    servo_rf: ms.ResidualFunction
    box_model: mujoco.MjModel
    results: Path

    def masses(self) -> ms.ParameterDict:
        return ms.ParameterDict(
            [ms.body_inertia_param(self.spec, self.model, b) for b in ("link1", "link2")]
        )

    def seq(self, **kw: Any) -> ms.ModelSequences:
        args = {
            "name": "arm2",
            "spec": self.spec,
            "sequence_name": "s",
            "initial_state": self.x0,
            "control": self.control,
            "sensordata": self.sens,
        }
        args.update(kw)
        return ms.ModelSequences(**args)

    def sensors(self, data: np.ndarray) -> ms.TimeSeries:
        return ms.TimeSeries.from_names(self.times, data, self.model)


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory):
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    truth = ms.ParameterDict([ms.body_inertia_param(spec, model, b) for b in ("link1", "link2")])
    truth.update_from_vector([1.3, 0.5])
    x0 = ms.create_initial_state(model, qpos=[0.3, -0.2])
    ctrl = excitation(N, model.nu)
    sens, control = simulate(spec, truth, ctrl, x0)
    seqs = ms.ModelSequences("arm2", spec, "s", x0, control, sens)
    rf = ms.build_residual_fn(seqs, nthread=1)

    servo_spec = mujoco.MjSpec.from_string(SERVO)
    servo_model = servo_spec.compile()
    sx0 = ms.create_initial_state(servo_model)
    s_sens, s_ctrl = simulate(servo_spec, None, excitation(N, 1), sx0)
    servo_rf = ms.build_residual_fn(
        ms.ModelSequences("servo", servo_spec, "s", sx0, s_ctrl, s_sens), nthread=1
    )

    a = Arm(
        spec,
        model,
        x0,
        ctrl,
        sens.times,
        sens,
        control,
        seqs,
        rf,
        servo_spec,
        servo_model,
        servo_rf,
        mujoco.MjSpec.from_string(BOX).compile(),
        tmp_path_factory.mktemp("results") / "fit",
    )
    p0 = a.masses()
    opt, res = ms.optimize(p0, rf, max_iters=5)
    ms.save_results(a.results, seqs, p0, opt, res, rf)
    yield a
    rf.close()
    servo_rf.close()


@dataclass
class Ctx:
    """What a case builds its bad input from: the shared problems and a fresh folder."""

    arm: Arm
    tmp: Path

    def __getattr__(self, name: str) -> Any:
        return getattr(self.arm, name)

    def file(self, name: str, text: str) -> Path:
        path = self.tmp / name
        path.write_text(text)
        return path

    def params_yaml(self, entry: str, header: str = "schema_version: 1\n") -> Path:
        return self.file("p.yaml", f"{header}parameters:\n- {{{entry}}}\n")

    def results_copy(self, edit: Callable[[Path], None]) -> Path:
        folder = self.tmp / "copy"
        shutil.copytree(self.arm.results, folder)
        edit(folder)
        return folder

    def summary_edit(self, fn: Callable[[dict], None]) -> Path:
        def edit(folder: Path) -> None:
            summary = yaml.safe_load((folder / "result.yaml").read_text())
            fn(summary)
            (folder / "result.yaml").write_text(yaml.safe_dump(summary))

        return self.results_copy(edit)

    def ts_file(self) -> bytes:
        ms.TimeSeries(np.arange(5.0), np.ones((5, 2))).save_to_disk(self.tmp / "ts.npz")
        return (self.tmp / "ts.npz").read_bytes()

    def experiment(self, text: str | None = None, **overrides: Any) -> Path:
        """The bundled arm experiment (absolute paths), with top-level keys overridden."""
        base = bundled_examples()["arm"].parent
        exp = yaml.safe_load((base / "experiment.yaml").read_text())
        exp["model"] = str(base / "arm.xml")
        for s in exp["sequences"]:
            s["file"] = str(base / s["file"])
        exp.update(overrides)
        return self.file("exp.yaml", yaml.safe_dump(exp) if text is None else text)

    def recording(self, **changes: Any) -> Path:
        """The arm example's first recording with some arrays replaced, as an experiment."""
        base = bundled_examples()["arm"].parent
        with np.load(base / "run1.npz", allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        for key, fn in changes.items():
            arrays[key] = fn(arrays[key])
        np.savez(self.tmp / "rec.npz", **arrays)
        return self.experiment(sequences=[{"name": "r", "file": str(self.tmp / "rec.npz")}])

    def blocker(self) -> Path:
        """A plain file where a folder is needed: nothing can be written below it."""
        path = self.tmp / "not_a_folder"
        path.write_text("x")
        return path


# --------------------------------------------------------------------------------------------
# Helpers for the cases


def _arm_run1() -> Path:
    return bundled_examples()["arm"].parent / "run1.npz"


def _case(case_id: str, make: Callable[[Ctx], Any], exc: type[BaseException], match: str) -> Any:
    return pytest.param(make, exc, match, id=case_id)


def _boom(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
    raise RuntimeError("kaboom")


def _negative_geom_mass(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
    spec.geom("g1").mass = p.value[0] - 2.0  # 1.0 -> -1.0: the spec no longer compiles


def _model_boom(model: mujoco.MjModel, p: ms.Parameter) -> None:
    raise IndexError("bad index")


def _noop(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
    """A modifier that never changes the model."""


def _with(params: ms.ParameterDict, *extra: ms.Parameter) -> ms.ParameterDict:
    for p in extra:
        params.add(p)
    return params


def _set_value(p: ms.Parameter, value: Any) -> None:
    p.value = value


def _zero_column(c: Ctx, col: int) -> ms.TimeSeries:
    data = np.array(c.sens.data)
    data[:, col] = 0.0
    return c.sensors(data)


def _with_nan(a: np.ndarray, index: tuple[int, ...]) -> np.ndarray:
    out = np.array(a, dtype=np.float64)
    out[index] = NAN
    return out


def _transform_fit(c: Ctx, st: ms.SignalTransform, *extra: ms.Parameter) -> Any:
    rf = ms.build_residual_fn(c.seqs, modify_residual=st.apply, nthread=1)
    try:
        return ms.optimize(_with(c.masses(), *extra), rf, max_iters=3)
    finally:
        rf.close()


def _checkpoint(c: Ctx, params: ms.ParameterDict) -> Path:
    path = c.tmp / "fit.ckpt.npz"
    ms.optimize(params, c.rf, max_iters=1, checkpoint=path)
    return path


def _resume_narrower(c: Ctx) -> Any:
    """Resume with bounds that exclude the checkpointed point (the user tightened them)."""
    path = _checkpoint(c, c.masses())
    narrow = ms.ParameterDict(
        [
            ms.body_inertia_param(c.spec, c.model, "link1", mass_bounds=(0.5, 1.05)),
            ms.body_inertia_param(c.spec, c.model, "link2"),
        ]
    )
    return ms.optimize(narrow, c.rf, max_iters=100, checkpoint=path, resume=True)


def _truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt_middle(data: bytes) -> bytes:
    b = bytearray(data)
    b[len(b) // 2] ^= 0xFF
    return bytes(b)


def _pickled_npz(path: Path) -> Path:
    np.savez(
        path,
        times=np.arange(3.0),
        data=np.array([object(), 1, 2], dtype=object),
        signal_mapping_json=np.array("null"),
        schema_version=np.array(1),
    )
    return path


def _ts_npz(path: Path, times: Any, version: int = 1) -> Path:
    np.savez(
        path,
        times=np.asarray(times, dtype=np.float64),
        data=np.ones(len(times)),
        signal_mapping_json=np.array("null"),
        schema_version=np.array(version),
    )
    return path


GOOD = "name: a, nominal: 1.0, min_value: 0.0, max_value: 2.0"
ARM_SIGNALS = r"\['j1_pos', 'j2_pos', 'j1_vel', 'j2_vel', 'tip_pos', 'tip_gyro'\]"


# --------------------------------------------------------------------------------------------
# The table

CASES = [
    # ---- TimeSeries: times, data, widths, names --------------------------------------------
    _case(
        "ts-times-nan",
        lambda c: ms.TimeSeries([0.0, NAN, 2.0], np.ones(3)),
        ValueError,
        r"times must be finite, got nan at index 1",
    ),
    _case(
        "ts-times-inf",
        lambda c: ms.TimeSeries([0.0, 1.0, INF], np.ones(3)),
        ValueError,
        r"times must be finite, got inf at index 2",
    ),
    _case(
        "ts-times-unsorted",
        lambda c: ms.TimeSeries([0.0, 2.0, 1.0], np.ones(3)),
        ValueError,
        r"times must be strictly increasing, got times\[2\]=1\.0 <= times\[1\]=2\.0",
    ),
    _case(
        "ts-times-repeated",
        lambda c: ms.TimeSeries([0.0, 1.0, 1.0], np.ones(3)),
        ValueError,
        r"times must be strictly increasing, got times\[2\]=1\.0 <= times\[1\]=1\.0",
    ),
    _case(
        "ts-times-2d",
        lambda c: ms.TimeSeries(np.zeros((2, 2)), np.ones(2)),
        ValueError,
        r"times must be a 1-D array, got shape \(2, 2\)",
    ),
    _case(
        "ts-times-empty",
        lambda c: ms.TimeSeries(np.zeros(0), np.ones((0, 1))),
        ValueError,
        r"times must have at least one sample, got 0",
    ),
    _case(
        "ts-data-nan-peer",
        lambda c: c.sensors(_with_nan(c.sens.data, (7, 4))),
        ValueError,
        r"data must be finite, got nan at row 7, column 4",
    ),
    _case(
        "ts-data-inf",
        lambda c: ms.TimeSeries([0.0, 1.0, 2.0], [[1.0], [-INF], [2.0]]),
        ValueError,
        r"data must be finite, got -inf at row 1, column 0",
    ),
    _case(
        "ts-data-strings",
        lambda c: ms.TimeSeries([0.0, 1.0], ["a", "b"]),
        TypeError,
        r"data must be a real numeric array, got array\(shape=\(2,\)",
    ),
    _case(
        "ts-data-3d",
        lambda c: ms.TimeSeries([0.0, 1.0], np.ones((2, 2, 2))),
        ValueError,
        r"data must be a 1-D \(N,\) or 2-D \(N, D\) array, got shape \(2, 2, 2\)",
    ),
    _case(
        "ts-length-mismatch",
        lambda c: ms.TimeSeries([0.0, 1.0, 2.0], np.ones(4)),
        ValueError,
        r"times and data must have the same length, got 3 and 4",
    ),
    _case(
        "ts-width-mismatch",
        lambda c: c.sensors(c.sens.data[:, :5]),
        ValueError,
        r"data must have 10 columns \(j1_pos:1, j2_pos:1, .*tip_gyro:3\), got 5",
    ),
    _case(
        "ts-control-width-mismatch",
        lambda c: ms.TimeSeries.from_control_names(c.times, np.ones((N, 3)), c.model),
        ValueError,
        r"data must have 2 columns \(m1:1, m2:1\), got 3",
    ),
    _case(
        "ts-control-nan-peer",
        lambda c: ms.TimeSeries.from_control_names(c.times, _with_nan(c.ctrl, (5, 1)), c.model),
        ValueError,
        r"data must be finite, got nan at row 5, column 1",
    ),
    _case(
        "ts-control-times-nan",
        lambda c: ms.TimeSeries.from_control_names(_with_nan(c.times, (3,)), c.ctrl, c.model),
        ValueError,
        r"times must be finite, got nan at index 3",
    ),
    _case(
        "ts-unknown-sensor",
        lambda c: ms.TimeSeries.from_names(c.times, c.sens.data[:, :1], c.model, ["j3_pos"]),
        KeyError,
        r"unknown signal 'j3_pos' \(not a sensor or a state of the model; sensors: "
        r"\['j1_pos'.*did you mean 'j2_pos'\?",
    ),
    _case(
        "ts-unknown-actuator",
        lambda c: ms.TimeSeries.from_control_names(c.times, c.ctrl[:, :1], c.model, ["m3"]),
        KeyError,
        r"unknown actuator 'm3' for MjCtrl \(model actuators: \['m1', 'm2'\]\)",
    ),
    _case(
        "ts-unknown-joint",
        lambda c: ms.TimeSeries.from_names(
            c.times, c.sens.data[:, :1], c.model, [("j7", ms.SignalType.MjStateQPos)]
        ),
        KeyError,
        r"unknown joint 'j7' for MjStateQPos .*model joints: \['j1', 'j2'\]",
    ),
    _case(
        "ts-resample-outside-span",
        lambda c: ms.TimeSeries([0.0, 1.0, 2.0], np.ones(3)).resample([0.5, 3.0]),
        ValueError,
        r"new_times must lie within the series span \[0\.0, 2\.0\], got "
        r"new_times\[1\]=3\.0; no extrapolation",
    ),
    # ---- initial states and rollouts ----------------------------------------------------------
    _case(
        "state-qpos-nan",
        lambda c: ms.create_initial_state(c.model, qpos=[0.1, NAN]),
        ValueError,
        r"qpos must be finite, got qpos\[1\]=nan",
    ),
    _case(
        "state-qvel-inf",
        lambda c: ms.create_initial_state(c.model, qvel=[INF, 0.0]),
        ValueError,
        r"qvel must be finite, got qvel\[0\]=inf",
    ),
    _case(
        "state-qpos-wrong-length",
        lambda c: ms.create_initial_state(c.model, qpos=[0.1]),
        ValueError,
        r"qpos must be an array of length 2, got array\(shape=\(1,\)",
    ),
    _case(
        "state-qpos-unknown-joint",
        lambda c: ms.create_initial_state(c.model, qpos={"j9": 0.1}),
        KeyError,
        r"qpos: the model has no joint named 'j9'; known: \['j1', 'j2'\]",
    ),
    _case(
        "state-model-is-spec",
        lambda c: ms.create_initial_state(c.spec),
        TypeError,
        r"model must be a compiled mujoco.MjModel, got 'MjSpec'",
    ),
    _case(
        "rollout-control-nan",
        lambda c: ms.sysid_rollout(c.model, None, _with_nan(c.ctrl, (3, 0)), c.x0),
        ValueError,
        r"control must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "rollout-initial-state-nan",
        lambda c: ms.sysid_rollout(c.model, None, c.ctrl, _with_nan(c.x0, (1,))),
        ValueError,
        r"initial_states must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "rollout-control-width",
        lambda c: ms.sysid_rollout(c.model, None, c.ctrl[:, :1], c.x0),
        ValueError,
        r"control must be shape \(nbatch, nstep, 2\), got array\(shape=\(1, 100, 1\)",
    ),
    # ---- ModelSequences ---------------------------------------------------------------------
    _case(
        "seq-initial-state-nan-peer",
        lambda c: c.seq(initial_state=_with_nan(c.x0, (2,))),
        ValueError,
        r"ModelSequences 'arm2', sequence 's': initial_state must be finite, got "
        r"initial_state\[2\]=nan",
    ),
    _case(
        "seq-initial-state-length",
        lambda c: c.seq(initial_state=c.x0[:-1]),
        ValueError,
        r"initial_state must be a 1-D full-physics state of length 5, got "
        r"array\(shape=\(4,\).*create_initial_state",
    ),
    _case(
        "seq-control-shorter-peer",
        lambda c: c.seq(
            control=ms.TimeSeries.from_control_names(c.times[:50], c.ctrl[:50], c.model)
        ),
        ValueError,
        r"control must cover the sensordata time span \[0\.0, 0\.198\] s, got "
        r"control times \[0\.0, 0\.098\] s",
    ),
    _case(
        "seq-control-starts-late",
        lambda c: c.seq(
            control=ms.TimeSeries.from_control_names(c.times[10:], c.ctrl[10:], c.model)
        ),
        ValueError,
        r"control must cover the sensordata time span \[0\.0, 0\.198\] s, got "
        r"control times \[0\.02, 0\.198\] s",
    ),
    _case(
        "seq-count-mismatch",
        lambda c: c.seq(sequence_name=["a", "b"]),
        ValueError,
        r"must have the same number of sequences, got \{'sequence_name': 2, "
        r"'initial_state': 1, 'control': 1, 'sensordata': 1\}",
    ),
    _case(
        "seq-spec-is-model",
        lambda c: c.seq(spec=c.model),
        TypeError,
        r"spec must be a mujoco.MjSpec, got 'MjModel'\. did you pass a compiled "
        r"MjModel instead of an MjSpec\?",
    ),
    _case(
        "seq-control-missing",
        lambda c: c.seq(control=None),
        ValueError,
        r"control must be a TimeSeries for the model's 2 actuators, got None",
    ),
    _case(
        "seq-control-missing-actuator",
        lambda c: c.seq(
            control=ms.TimeSeries.from_control_names(c.times, c.ctrl[:, :1], c.model, ["m1"])
        ),
        ValueError,
        r"control must be a column for every actuator, got \"none for \['m2'\]\"",
    ),
    _case(
        "seq-raw-sensordata-width",
        lambda c: c.seq(sensordata=ms.TimeSeries(c.times, c.sens.data[:, :3])),
        ValueError,
        r"sensordata must be 10 columns \(all model sensors\) when it has no signal "
        r"mapping, got '3 columns'",
    ),
    _case(
        "seq-sensor-of-another-model",
        lambda c: c.seq(
            sensordata=ms.TimeSeries.from_names(c.times, np.ones((N, 2)), c.servo_model)
        ),
        KeyError,
        r"sequence 's': sensordata: unknown sensor 'angle' \(model sensors: "
        r"\['j1_pos'",
    ),
    _case(
        "seq-duplicate-names",
        lambda c: c.seq(
            sequence_name=["a", "a"],
            initial_state=[c.x0, c.x0],
            control=[c.control, c.control],
            sensordata=[c.sens, c.sens],
        ),
        ValueError,
        r"sequence_name must be unique names, got \['a', 'a'\]",
    ),
    _case(
        "seq-sensordata-is-array",
        lambda c: c.seq(sensordata=c.sens.data),
        TypeError,
        r"sensordata must be a TimeSeries.*got 'ndarray'",
    ),
    _case(
        "seq-control-is-array",
        lambda c: c.seq(control=c.ctrl),
        TypeError,
        r"control must be a TimeSeries.*got 'ndarray'",
    ),
    # ---- Parameter and ParameterDict --------------------------------------------------------
    _case(
        "param-min-gt-max-peer",
        lambda c: ms.Parameter("a", 1.0, 2.0, 0.0),
        ValueError,
        r"parameter 'a': min_value must be <= max_value, got min_value\[0\]=2\.0 > "
        r"max_value\[0\]=0\.0",
    ),
    _case(
        "param-equal-bounds-peer",
        lambda c: ms.Parameter("a", 1.0, 1.0, 1.0),
        ValueError,
        r"parameter 'a': min_value must be < max_value for a non-frozen parameter, "
        r"got both equal to 1\.0 at index 0\. Freeze it",
    ),
    _case(
        "param-nominal-outside-bounds",
        lambda c: ms.Parameter("a", 3.0, 0.0, 2.0),
        ValueError,
        r"parameter 'a': nominal must lie within \[min_value, max_value\], got "
        r"nominal\[0\]=3\.0 outside \[0\.0, 2\.0\]",
    ),
    _case(
        "param-shape-mismatch",
        lambda c: ms.Parameter("a", [1.0, 1.0], [0.0], [2.0, 2.0]),
        ValueError,
        r"parameter 'a': nominal, min_value and max_value must have the same shape, "
        r"got \(2,\), \(1,\) and \(2,\)",
    ),
    _case(
        "param-nominal-2d",
        lambda c: ms.Parameter("a", [[1.0]], [[0.0]], [[2.0]]),
        ValueError,
        r"parameter 'a': nominal must be a scalar or a 1-D array, got "
        r"array\(shape=\(1, 1\)",
    ),
    _case(
        "param-nominal-nan",
        lambda c: ms.Parameter("a", NAN, 0.0, 2.0),
        ValueError,
        r"parameter 'a': nominal must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "param-bound-nan",
        lambda c: ms.Parameter("a", 1.0, NAN, 2.0),
        ValueError,
        r"parameter 'a': min_value must be a number \(\+-inf allowed\), not NaN, "
        r"got array",
    ),
    _case(
        "param-nominal-empty",
        lambda c: ms.Parameter("a", [], [], []),
        ValueError,
        r"parameter 'a': nominal must be non-empty, got array\(shape=\(0,\)",
    ),
    _case(
        "param-nominal-text",
        lambda c: ms.Parameter("a", "one", 0.0, 2.0),
        ValueError,
        r"parameter 'a': nominal must be a number or a sequence of numbers, got "
        r"'one'",
    ),
    _case(
        "param-empty-name",
        lambda c: ms.Parameter("", 1.0, 0.0, 2.0),
        ValueError,
        r"Parameter name must be a non-empty string, got ''",
    ),
    _case(
        "param-modifier-not-callable",
        lambda c: ms.Parameter("a", 1.0, 0.0, 2.0, modifier=3),
        ValueError,
        r"parameter 'a': modifier must be callable or None, got 3",
    ),
    _case(
        "param-value-wrong-shape",
        lambda c: _set_value(ms.Parameter("a", 1.0, 0.0, 2.0), [1.0, 2.0]),
        ValueError,
        r"parameter 'a': value must be shape \(1,\), got array\(shape=\(2,\)",
    ),
    _case(
        "param-value-nan",
        lambda c: _set_value(ms.Parameter("a", 1.0, 0.0, 2.0), NAN),
        ValueError,
        r"parameter 'a': value must be finite, got array\(shape=\(1,\), \[nan\]\)",
    ),
    _case(
        "param-meta-not-plain-data",
        lambda c: ms.Parameter("a", 1.0, 0.0, 2.0, meta={"scale": np.ones(2)}),
        TypeError,
        r"parameter 'a': meta\['scale'\] must be plain data .*got .*ndarray",
    ),
    _case(
        "pd-duplicate-name",
        lambda c: ms.ParameterDict(
            [ms.Parameter("a", 1.0, 0.0, 2.0), ms.Parameter("a", 1.0, 0.0, 2.0)]
        ),
        ValueError,
        r"ParameterDict already has a parameter named 'a'; names must be unique",
    ),
    _case(
        "pd-add-not-a-parameter",
        lambda c: ms.ParameterDict().add({"name": "a"}),
        TypeError,
        r"ParameterDict.add: param must be a Parameter, got \{'name': 'a'\}",
    ),
    _case(
        "pd-vector-wrong-length",
        lambda c: c.masses().update_from_vector([1.0, 2.0, 3.0]),
        ValueError,
        r"update_from_vector: x must be a 1-D array of length 2 \(one entry per "
        r"non-frozen scalar\), got array\(shape=\(3,\)",
    ),
    _case(
        "pd-vector-nan",
        lambda c: c.masses().update_from_vector([1.0, NAN]),
        ValueError,
        r"update_from_vector: x must be finite, got x\[1\]=nan \(link2_mass\)",
    ),
    _case(
        "pd-unknown-name",
        lambda c: c.masses()["link3_mass"],
        KeyError,
        r"no parameter named 'link3_mass'; known parameters: \['link1_mass', "
        r"'link2_mass'\]",
    ),
    # ---- parameter kinds: unknown element names -------------------------------------------
    _case(
        "kind-unknown",
        lambda c: ms.make_parameter("joint_dampin", c.model, "j1"),
        ValueError,
        r"kind must be one of \['actuator_filter_tau', .*\], got 'joint_dampin'",
    ),
    _case(
        "kind-unknown-joint",
        lambda c: ms.make_parameter("joint_damping", c.model, "j9"),
        KeyError,
        r"the model has no joint named 'j9'; known: \['j1', 'j2'\]",
    ),
    _case(
        "kind-unknown-actuator",
        lambda c: ms.make_parameter("actuator_gear", c.model, "m9"),
        KeyError,
        r"the model has no actuator named 'm9'; known: \['m1', 'm2'\]",
    ),
    _case(
        "kind-unknown-geom",
        lambda c: ms.make_parameter("geom_friction", c.model, "g9"),
        KeyError,
        r"the model has no geom named 'g9'; known: \['g1', 'g2'\]",
    ),
    _case(
        "kind-unknown-pair",
        lambda c: ms.make_parameter("pair_friction", c.box_model, "wall"),
        KeyError,
        r"the model has no pair named 'wall'; known: \['box_floor'\]",
    ),
    _case(
        "kind-unknown-body",
        lambda c: ms.body_inertia_param(c.spec, c.model, "link9"),
        KeyError,
        r"the model has no body named 'link9'; known: \['world', 'link1', 'link2'\]",
    ),
    _case(
        "kind-world-body",
        lambda c: ms.body_inertia_param(c.spec, c.model, "world"),
        ValueError,
        r"body_name must be a moving body, got 'world'.*moving bodies: "
        r"\['link1', 'link2'\]",
    ),
    _case(
        "kind-kp-of-a-motor",
        lambda c: ms.make_parameter("actuator_kp", c.model, "m1"),
        ValueError,
        r"actuator 'm1' must be a position-type actuator \(fixed gain, affine "
        r"bias\) to have kp/kv gains, got a different gain/bias type",
    ),
    _case(
        "kind-model-is-spec",
        lambda c: ms.make_parameter("joint_damping", c.spec, "j1"),
        TypeError,
        r"model must be a compiled mujoco.MjModel, got 'MjSpec'",
    ),
    _case(
        "kind-nominal-outside-default-bounds",
        lambda c: ms.make_parameter("joint_damping", c.model, "j1", nominal=-1.0),
        ValueError,
        r"parameter 'j1_damping': nominal must lie within \[min_value, max_value\], "
        r"got nominal\[0\]=-1\.0 outside \[0\.0, 10\.0\]",
    ),
    _case(
        "kind-mass-bounds-inverted",
        lambda c: ms.body_inertia_param(c.spec, c.model, "link1", mass_bounds=(2.0, 0.5)),
        ValueError,
        r"mass_bounds must be factors with 0 < low <= 1 <= high, low < high, got "
        r"\(2\.0, 0\.5\)",
    ),
    # ---- SignalTransform --------------------------------------------------------------------
    _case(
        "st-bad-target",
        lambda c: ms.SignalTransform().gain("j1_pos", "g", target="both"),
        ValueError,
        r"SignalTransform.gain: target must be 'predicted' or 'measured', got "
        r"'both'",
    ),
    _case(
        "st-empty-pattern",
        lambda c: ms.SignalTransform().delay("", "d"),
        TypeError,
        r"SignalTransform.delay: pattern must be a non-empty string, got ''",
    ),
    _case(
        "st-param-wrong-type",
        lambda c: ms.SignalTransform().bias("j1_pos", 3),
        TypeError,
        r"SignalTransform.bias: param must be a Parameter or a parameter name, got 3",
    ),
    _case(
        "st-negative-weight",
        lambda c: ms.SignalTransform().set_sensor_weights({"j1_pos": -1.0}),
        ValueError,
        r"set_sensor_weights\['j1_pos'\] must be finite numbers >= 0 \(scalar or 1-D\), got -1\.0",
    ),
    _case(
        "st-delay-matches-nothing-peer",
        lambda c: ms.build_residual_fn(c.seqs, ms.SignalTransform().delay("j3_*", "d").apply),
        ValueError,
        r"SignalTransform.delay\('j3_\*', 'd'\): the pattern must match at least one "
        r"measured signal, got none; measured signals: " + ARM_SIGNALS,
    ),
    _case(
        "st-gain-matches-nothing",
        lambda c: ms.build_residual_fn(c.seqs, ms.SignalTransform().gain("tip_acc", "g").apply),
        ValueError,
        r"SignalTransform.gain\('tip_acc', 'g'\): the pattern must match at least "
        r"one measured signal, got none",
    ),
    _case(
        "st-bias-matches-nothing",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().bias("J1_*", "b", target="measured").apply
        ),
        ValueError,
        r"SignalTransform.bias\('J1_\*', 'b'\): the pattern must match at least one "
        r"measured signal, got none",
    ),
    _case(
        "st-enabled-matches-nothing",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().enable_sensors(["gyro*"]).apply
        ),
        ValueError,
        r"SignalTransform: pattern 'gyro\*' must match at least one measured "
        r"signal, got none; measured signals: " + ARM_SIGNALS,
    ),
    _case(
        "st-weight-unknown-name-peer",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().set_sensor_weights({"j3_pos": 2.0}).apply
        ),
        ValueError,
        r"SignalTransform: pattern 'j3_pos' must match at least one measured "
        r"signal, got none",
    ),
    _case(
        "st-enable-sensors-given-a-string",
        lambda c: ms.SignalTransform().enable_sensors("j1_pos"),
        TypeError,
        r"SignalTransform.enable_sensors: names must be a list of names or patterns, "
        r"got 'j1_pos'",
    ),
    _case(
        "st-weight-wrong-width",
        lambda c: ms.build_residual_fn(
            c.seqs, ms.SignalTransform().set_sensor_weights({"tip_pos": [1.0, 2.0]}).apply
        ),
        ValueError,
        r"weights\['tip_pos'\] must be a scalar or 3 values \(one per column\), got "
        r"\[1\.0, 2\.0\]",
    ),
    _case(
        "st-unknown-parameter",
        lambda c: _transform_fit(c, ms.SignalTransform().delay("j1_pos", "j1_delay")),
        KeyError,
        r"SignalTransform.delay: no parameter named 'j1_delay'",
    ),
    _case(
        "st-delay-window-too-wide",
        lambda c: _transform_fit(
            c,
            ms.SignalTransform().delay("j1_pos", "d"),
            ms.make_parameter(
                "sensor_delay", None, "j1_pos", name="d", min_value=-1.0, max_value=1.0
            ),
        ),
        ValueError,
        r"the delay window \[1\.0, -0\.802\] s \(delays in \[-1\.0, 1\.0\] s\) "
        r"leaves 0 samples of the series; narrow the delay bounds",
    ),
    # ---- build_residual_fn ------------------------------------------------------------------
    _case(
        "rf-weight-unknown-name-peer",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"j3_pos": 1.0}),
        KeyError,
        r"sensor_weights names \['j3_pos'\] match no measured signal; measured "
        r"signals: \['j1_pos'",
    ),
    _case(
        "rf-weight-negative",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"j1_pos": -1.0}),
        ValueError,
        r"sensor_weights\['j1_pos'\] must be finite and >= 0, got -1\.0",
    ),
    _case(
        "rf-weight-nan",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"j1_pos": NAN}),
        ValueError,
        r"sensor_weights\['j1_pos'\] must be finite and >= 0, got nan",
    ),
    _case(
        "rf-weight-wrong-width",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"tip_pos": [1.0, 2.0]}),
        ValueError,
        r"sensor_weights\['tip_pos'\] must be a scalar or 3 values \(one per "
        r"column of 'tip_pos'\), got \[1\.0, 2\.0\]",
    ),
    _case(
        "rf-weight-pattern-wrong-width",
        lambda c: ms.build_residual_fn(c.seqs, sensor_weights={"*_pos": [1.0, 2.0]}),
        ValueError,
        r"sensor_weights\['\*_pos'\] must be a scalar or 1 values \(one per column of "
        r"'j1_pos'\), got \[1\.0, 2\.0\]",
    ),
    _case(
        "rf-enabled-unknown-name",
        lambda c: ms.build_residual_fn(c.seqs, enabled_observations=["j3_pos"]),
        KeyError,
        r"enabled_observations names \['j3_pos'\] match no measured signal",
    ),
    _case(
        "rf-enabled-empty",
        lambda c: ms.build_residual_fn(c.seqs, enabled_observations=[]),
        ValueError,
        r"arm2/s: enabled_observations \[\] leave no measured signal; it has "
        r"\['j1_pos'",
    ),
    _case(
        "rf-enabled-given-a-string",
        lambda c: ms.build_residual_fn(c.seqs, enabled_observations="j1_pos"),
        TypeError,
        r"enabled_observations must be a list of signal names, got 'j1_pos'",
    ),
    _case(
        "rf-control-interpolation",
        lambda c: ms.build_residual_fn(c.seqs, control_interpolation="cubic"),
        ValueError,
        r"control_interpolation must be 'zoh' or 'linear', got 'cubic'",
    ),
    _case(
        "rf-nthread-zero",
        lambda c: ms.build_residual_fn(c.seqs, nthread=0),
        ValueError,
        r"nthread must be a positive integer, got 0",
    ),
    _case(
        "rf-no-sequences",
        lambda c: ms.build_residual_fn([]),
        TypeError,
        r"models_sequences must be a non-empty list of ModelSequences, got \[\]",
    ),
    _case(
        "rf-zero-column-peer",
        lambda c: ms.build_residual_fn(c.seq(sensordata=_zero_column(c, 1))),
        ValueError,
        r"arm2/s: measured signal 'j2_pos' must not be all zeros to be "
        r"RMS-normalised, got only zeros; drop it",
    ),
    _case(
        "rf-zero-column-with-transform",
        lambda c: ms.build_residual_fn(
            c.seq(sensordata=_zero_column(c, 2)), ms.SignalTransform().apply
        ),
        ValueError,
        r"measured signal 'j1_vel' must not be all zeros",
    ),
    _case(
        "rf-one-sample",
        lambda c: ms.build_residual_fn(
            c.seq(sensordata=ms.TimeSeries.from_names(c.times[:1], c.sens.data[:1], c.model))
        ),
        ValueError,
        r"arm2/s: sensordata must be at least 2 samples, got 1",
    ),
    _case(
        "rf-x-wrong-shape",
        lambda c: c.rf(np.ones(3), c.masses()),
        ValueError,
        r"residual_fn: x must be shape \(2,\) or \(2, k\) for the 2 free parameter "
        r"values, got array\(shape=\(3,\)",
    ),
    # ---- optimize: what only the start point can tell ---------------------------------------
    _case(
        "opt-empty-params",
        lambda c: ms.optimize(ms.ParameterDict(), c.rf),
        ValueError,
        r"initial_params must be a non-empty ParameterDict, got 'an empty one'",
    ),
    _case(
        "opt-all-frozen",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.Parameter("a", 1.0, 0.0, 2.0, frozen=True)]), c.rf
        ),
        ValueError,
        r"initial_params must have at least one non-frozen parameter, got 1 "
        r"parameters, all frozen: \['a'\]",
    ),
    _case(
        "opt-start-outside-bounds-peer",
        lambda c: ms.optimize(_start(c.masses(), "link1_mass", 50.0), c.rf),
        ValueError,
        r"initial_params: link1_mass must start within its bounds \[0\.1, 10\.0\], "
        r"got 50\.0; mjsysid does not clip silently",
    ),
    _case(
        "opt-unknown-optimizer",
        lambda c: ms.optimize(c.masses(), c.rf, optimizer="adam"),
        ValueError,
        r"optimizer must be one of \['lm', 'mujoco', 'scipy', 'scipy_parallel_fd'\], got "
        r"'adam'",
    ),
    _case(
        "opt-negative-max-iters",
        lambda c: ms.optimize(c.masses(), c.rf, max_iters=-1),
        ValueError,
        r"max_iters must be a non-negative integer, got -1",
    ),
    _case(
        "opt-infinite-bounds-mujoco",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.make_parameter("joint_damping", c.model, "j1", max_value=INF)]),
            c.rf,
            optimizer="mujoco",
        ),
        ValueError,
        r"optimizer 'mujoco' needs finite bounds, got infinite bounds for "
        r"\['j1_damping'\]",
    ),
    _case(
        "opt-modifier-raises",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.Parameter("k", 1.0, 0.0, 2.0, modifier=_boom)]), c.rf
        ),
        ms.ModifierError,
        r"the modifier of parameter 'k' failed for value "
        r"array\(shape=\(1,\), \[1\.\]\): RuntimeError: kaboom",
    ),
    _case(
        "opt-modifier-breaks-compilation",
        lambda c: ms.optimize(
            ms.ParameterDict(
                [ms.Parameter("g1_mass", 1.0, 0.0, 3.0, modifier=_negative_geom_mass)]
            ),
            c.rf,
        ),
        ms.ModifierError,
        r"the spec failed to compile after applying parameters "
        r"\(g1_mass=array\(shape=\(1,\), \[1\.\]\)\): Error: mass, inertia or "
        r"density are negative",
    ),
    _case(
        "opt-model-modifier-raises",
        lambda c: ms.optimize(
            ms.ParameterDict(
                [ms.Parameter("k", 1.0, 0.0, 2.0, modifier=_noop, model_modifier=_model_boom)]
            ),
            c.rf,
        ),
        ms.ModifierError,
        r"the model_modifier of parameter 'k' failed for value "
        r"array\(shape=\(1,\), \[1\.\]\): IndexError: bad index",
    ),
    _case(
        "opt-modifier-changes-nothing-peer",
        lambda c: ms.optimize(
            _with(c.masses(), ms.Parameter("noop", 1.0, 0.0, 2.0, modifier=_noop)), c.rf
        ),
        ValueError,
        r"parameters \['noop'\] have no effect on the residual at the start point "
        r"\(zero Jacobian column\)",
    ),
    _case(
        "opt-parameter-without-modifier",
        lambda c: ms.optimize(_with(c.masses(), ms.Parameter("orphan", 1.0, 0.0, 2.0)), c.rf),
        ValueError,
        r"parameters \['orphan'\] have no effect on the residual",
    ),
    _case(
        "opt-diverges-at-start",
        lambda c: ms.optimize(
            ms.ParameterDict(
                [
                    ms.make_parameter(
                        "actuator_kp",
                        c.servo_model,
                        "servo",
                        nominal=1e14,
                        min_value=0.1,
                        max_value=1e15,
                    )
                ]
            ),
            c.servo_rf,
        ),
        ValueError,
        r"the residual must be finite at the start point, got a non-finite value "
        r"at servo/s, signal 'angle' at t=0 s \(servo/s: simulation diverged",
    ),
    _case(
        "opt-resume-without-checkpoint",
        lambda c: ms.optimize(c.masses(), c.rf, resume=True),
        ValueError,
        r"checkpoint must be a path when resume=True, got None",
    ),
    _case(
        "opt-checkpoint-of-other-parameters",
        lambda c: ms.optimize(
            ms.ParameterDict([ms.make_parameter("joint_damping", c.model, "j1")]),
            c.rf,
            checkpoint=_checkpoint(c, c.masses()),
            resume=True,
        ),
        ValueError,
        r"checkpoint '.*fit\.ckpt\.npz' must hold the same parameters as "
        r"initial_params, got \['link1_mass', 'link2_mass'\] vs \['j1_damping'\]",
    ),
    _case(
        "opt-checkpoint-truncated",
        lambda c: ms.optimize(c.masses(), c.rf, resume=True, checkpoint=_truncated_checkpoint(c)),
        ValueError,
        r"'.*fit\.ckpt\.npz' is not a readable \.npz file",
    ),
    _case(
        "opt-loaded-parameter-unknown-joint",
        lambda c: ms.optimize(
            ms.ParameterDict.load_from_disk(
                c.params_yaml(
                    "name: d, nominal: 0.05, min_value: 0.0, max_value: 1.0, "
                    "meta: {kind: joint_damping, target: j9}"
                )
            ),
            c.rf,
        ),
        ms.ModifierError,
        r"parameter 'd' failed for value array\(shape=\(1,\), \[0\.05\]\): "
        r"KeyError: .*no joint named 'j9'; known: \['j1', 'j2'\]",
    ),
    _case(
        "opt-eps-zero",
        lambda c: ms.optimize(c.masses(), c.rf, eps=0.0),
        ValueError,
        r"eps must be a finite number > 0, got 0\.0",
    ),
    _case(
        "opt-eps-nan",
        lambda c: ms.optimize(c.masses(), c.rf, eps=NAN),
        ValueError,
        r"eps must be a finite number > 0, got nan",
    ),
    _case(
        "opt-xtol-negative",
        lambda c: ms.optimize(c.masses(), c.rf, xtol=-1.0),
        ValueError,
        r"xtol must be a finite number >= 0, got -1\.0",
    ),
    _case(
        "opt-callback-not-callable",
        lambda c: ms.optimize(c.masses(), c.rf, callback=3),
        TypeError,
        r"callback must be callable callback\(iteration, x, cost\) or None, got 3",
    ),
    _case(
        "opt-x-scale-wrong-shape",
        lambda c: ms.optimize(c.masses(), c.rf, optimizer="scipy", x_scale=[1.0, 2.0, 3.0]),
        ValueError,
        r"x_scale must be 'jac', a positive number or an array of shape \(2,\), got "
        r"array\(shape=\(3,\)",
    ),
    _case(
        "opt-resume-outside-bounds",
        _resume_narrower,
        ValueError,
        r"checkpoint '.*fit\.ckpt\.npz': link1_mass must lie within its bounds "
        r"\[0\.5, 1\.05\], got 1\.",
    ),
    # ---- parameter YAML files ---------------------------------------------------------------
    _case(
        "yaml-unknown-top-level-key",
        lambda c: ms.ParameterDict.load_from_disk(
            c.file("p.yaml", "schema_version: 1\nparameters: []\ncomment: hi\n")
        ),
        ValueError,
        r"p\.yaml: unknown top-level keys \['comment'\]",
    ),
    _case(
        "yaml-unknown-parameter-key",
        lambda c: ms.ParameterDict.load_from_disk(c.params_yaml(GOOD + ", unit: kg")),
        ValueError,
        r"p\.yaml: parameters\[0\]: unknown keys \['unit'\]; allowed: ",
    ),
    _case(
        "yaml-bound-wrong-type",
        lambda c: ms.ParameterDict.load_from_disk(
            c.params_yaml("name: a, nominal: 1.0, min_value: low, max_value: 2.0")
        ),
        ValueError,
        r"p\.yaml: parameters\[0\]\.min_value must be numbers, got 'low'",
    ),
    _case(
        "yaml-frozen-wrong-type",
        lambda c: ms.ParameterDict.load_from_disk(c.params_yaml(GOOD + ", frozen: 'yes'")),
        ValueError,
        r"p\.yaml: parameters\[0\]\.frozen must be true or false, got 'yes'",
    ),
    _case(
        "yaml-name-wrong-type",
        lambda c: ms.ParameterDict.load_from_disk(
            c.params_yaml("name: 3, nominal: 1.0, min_value: 0.0, max_value: 2.0")
        ),
        ValueError,
        r"p\.yaml: parameters\[0\]\.name must be a string, got 3",
    ),
    _case(
        "yaml-missing-key",
        lambda c: ms.ParameterDict.load_from_disk(
            c.params_yaml("name: a, nominal: 1.0, max_value: 2.0")
        ),
        ValueError,
        r"p\.yaml: parameters\[0\]: missing required key 'min_value'",
    ),
    _case(
        "yaml-parameters-not-a-list",
        lambda c: ms.ParameterDict.load_from_disk(
            c.file("p.yaml", "schema_version: 1\nparameters: {a: 1}\n")
        ),
        ValueError,
        r"p\.yaml: parameters must be a list, got \{'a': 1\}",
    ),
    _case(
        "yaml-not-a-mapping",
        lambda c: ms.ParameterDict.load_from_disk(c.file("p.yaml", "- 1\n- 2\n")),
        ValueError,
        r"p\.yaml must be a YAML mapping, got 'list'",
    ),
    _case(
        "yaml-newer-schema",
        lambda c: ms.ParameterDict.load_from_disk(
            c.file("p.yaml", "schema_version: 2\nparameters: []\n")
        ),
        ValueError,
        r"p\.yaml: schema_version must be an integer <= 1, got 2; the file was "
        r"written by a newer mjsysid",
    ),
    _case(
        "yaml-python-object-tag",
        lambda c: ms.ParameterDict.load_from_disk(
            c.file("p.yaml", "!!python/object/apply:os.system ['true']\n")
        ),
        ValueError,
        r"p\.yaml': unsupported YAML tag .*python/object/apply:os\.system.*never "
        r"constructs Python objects",
    ),
    _case(
        "yaml-syntax-error",
        lambda c: ms.ParameterDict.load_from_disk(c.file("p.yaml", "parameters: [1, 2\n")),
        ValueError,
        r"p\.yaml' is not valid YAML",
    ),
    _case(
        "yaml-missing-file",
        lambda c: ms.ParameterDict.load_from_disk(c.tmp / "nope.yaml"),
        FileNotFoundError,
        r"no such file: '.*nope\.yaml'",
    ),
    _case(
        "yaml-load-values-other-names",
        lambda c: c.masses().load_values(c.params_yaml(GOOD)),
        KeyError,
        r"p\.yaml: saved parameters must match this ParameterDict, missing "
        r"\['link1_mass', 'link2_mass'\], unexpected \['a'\]",
    ),
    _case(
        "yaml-foreign-schema",
        lambda c: ms.ParameterDict.load_from_disk(
            c.file("p.yaml", "schema: other.tool\nschema_version: 1\nparameters: []\n")
        ),
        ValueError,
        r"p\.yaml: schema must be 'mjsysid\.parameters', got 'other\.tool'",
    ),
    _case(
        "yaml-schema-version-bool",
        lambda c: ms.ParameterDict.load_from_disk(
            c.file("p.yaml", "schema_version: true\nparameters: []\n")
        ),
        ValueError,
        r"p\.yaml: schema_version must be an integer <= 1, got True",
    ),
    _case(
        "yaml-value-outside-bounds",
        lambda c: ms.ParameterDict.load_from_disk(c.params_yaml(GOOD + ", value: 5.0")),
        ValueError,
        r"p\.yaml: parameters\[0\]\.value must lie within \[0\.0, 2\.0\], got 5\.0",
    ),
    _case(
        "yaml-known-kind-bad-target",
        lambda c: ms.ParameterDict.load_from_disk(
            c.params_yaml(GOOD + ", meta: {kind: joint_damping, target: 3}")
        ),
        ValueError,
        r"p\.yaml: parameters\[0\]\.meta\.target must be a joint name, got 3",
    ),
    # ---- results folders ------------------------------------------------------------------
    _case(
        "results-no-summary",
        lambda c: ms.load_results(c.results_copy(lambda f: (f / "result.yaml").unlink())),
        FileNotFoundError,
        r"'.*copy' has no result\.yaml: it is not a results folder, or "
        r"saving was interrupted",
    ),
    _case(
        "results-listed-file-missing",
        lambda c: ms.load_results(c.results_copy(lambda f: (f / "confidence.yaml").unlink())),
        ValueError,
        r"'.*copy' is incomplete: missing \['confidence\.yaml'\]",
    ),
    _case(
        "results-not-a-folder",
        lambda c: ms.load_results(c.tmp / "nothing"),
        FileNotFoundError,
        r"no such results folder: '.*nothing'",
    ),
    _case(
        "results-npz-truncated",
        lambda c: ms.load_results(c.results_copy(lambda f: _truncate(f / "result.npz"))),
        ValueError,
        r"'.*result\.npz' is not a readable \.npz file",
    ),
    _case(
        "results-npz-foreign",
        lambda c: ms.load_results(
            c.results_copy(lambda f: np.savez(f / "result.npz", a=np.ones(2)))
        ),
        ValueError,
        r"'.*result\.npz' must contain arrays \['x', 'fun', 'jac', 'grad'\], missing "
        r"\['x', 'fun', 'jac', 'grad'\]; found \['a'\]",
    ),
    _case(
        "results-confidence-not-a-zip",
        lambda c: ms.load_results(
            c.results_copy(lambda f: (f / "confidence.npz").write_bytes(b"PK\x03\x04 cut short"))
        ),
        ValueError,
        r"'.*confidence\.npz' is not a readable \.npz file",
    ),
    _case(
        "results-newer-schema",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(schema_version=2))),
        ValueError,
        r"result\.yaml: schema_version must be <= 1, got 2; upgrade mjsysid",
    ),
    _case(
        "results-python-object-tag",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: (f / "result.yaml").write_text("!!python/object/new:os.system [true]\n")
            )
        ),
        ValueError,
        r"result\.yaml': unsupported YAML tag",
    ),
    _case(
        "results-params-python-object-tag",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: (f / "params_x_hat.yaml").write_text("!!python/name:os.system\n")
            )
        ),
        ValueError,
        r"params_x_hat\.yaml': unsupported YAML tag",
    ),
    _case(
        "results-summary-unknown-key",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(optimiser="mujoco"))),
        ValueError,
        r"result\.yaml: unknown keys \['optimiser'\]",
    ),
    _case(
        "results-summary-wrong-type",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(nit="many"))),
        ValueError,
        r"result\.yaml: nit must be an integer, got 'many'",
    ),
    _case(
        "results-summary-files-not-a-list",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.update(files="result.npz"))),
        ValueError,
        r"result\.yaml: files must be a list of file names, got 'result\.npz'",
    ),
    _case(
        "results-summary-missing-key",
        lambda c: ms.load_results(c.summary_edit(lambda s: s.pop("parameter_names"))),
        ValueError,
        r"result\.yaml: missing required key 'parameter_names'",
    ),
    _case(
        "results-x-does-not-match-names",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: np.savez(
                    f / "result.npz",
                    x=np.ones(5),
                    fun=np.ones(3),
                    jac=np.ones((3, 5)),
                    grad=np.ones(5),
                )
            )
        ),
        ValueError,
        r"result\.npz: x must be shape \(2,\) \(2 parameter names, 3 residuals\), got .*"
        r"got shape \(5,\); the folder is inconsistent",
    ),
    _case(
        "results-half-widths-do-not-match-names",
        lambda c: ms.load_results(
            c.results_copy(
                lambda f: np.savez(
                    f / "confidence.npz",
                    covariance=np.eye(2),
                    half_widths=np.ones(5),
                    alpha=np.array(0.05),
                )
            )
        ),
        ValueError,
        r"confidence\.npz: half_widths must be shape \(2,\) .*got shape \(5,\)",
    ),
    _case(
        "results-params-do-not-match-the-result",
        lambda c: ms.save_results(
            c.tmp / "fit",
            c.seqs,
            c.masses(),
            ms.ParameterDict([ms.body_inertia_param(c.spec, c.model, "link1")]),
            _result(c),
        ),
        ValueError,
        r"opt_params: free parameters must be those of opt_result \['link1_mass', 'link2_mass'\]"
        r", got \['link1_mass'\]",
    ),
    _case(
        "results-no-sequences",
        lambda c: ms.save_results(c.tmp / "fit", [], c.masses(), c.masses(), _result(c)),
        TypeError,
        r"models_sequences must be a ModelSequences or a non-empty list of them, got \[\]",
    ),
    _case(
        "results-params-not-a-parameter-dict",
        lambda c: ms.save_results(c.tmp / "fit", c.seqs, {"a": 1}, c.masses(), _result(c)),
        TypeError,
        r"initial_params must be a ParameterDict, got 'dict'",
    ),
    _case(
        "results-folder-not-writable",
        lambda c: ms.save_results(c.blocker() / "fit", c.seqs, c.masses(), c.masses(), _result(c)),
        OSError,
        r"cannot create folder '.*not_a_folder/fit'",
    ),
    _case(
        "results-folder-is-a-file",
        lambda c: ms.save_results(c.blocker(), c.seqs, c.masses(), c.masses(), _result(c)),
        OSError,
        r"cannot create folder '.*not_a_folder'",
    ),
    _case(
        "results-not-an-optimize-result",
        lambda c: ms.save_results(c.tmp / "fit", c.seqs, c.masses(), c.masses(), {"x": [1.0]}),
        TypeError,
        r"opt_result must be an OptimizeResult, got 'dict'",
    ),
    _case(
        "params-save-not-writable",
        lambda c: c.masses().save_to_disk(c.blocker() / "p.yaml"),
        OSError,
        r"cannot create folder '.*not_a_folder' for 'p\.yaml'",
    ),
    _case(
        "ts-save-not-writable",
        lambda c: c.sens.save_to_disk(c.blocker() / "ts.npz"),
        OSError,
        r"cannot create folder '.*not_a_folder' for 'ts\.npz'",
    ),
    # ---- experiment files and recordings (the CLI's inputs) ---------------------------------
    _case(
        "exp-python-object-tag",
        lambda c: load_experiment(c.experiment("!!python/object/apply:os.system ['true']\n")),
        ValueError,
        r"exp\.yaml': unsupported YAML tag .*never constructs Python objects",
    ),
    _case(
        "exp-newer-schema",
        lambda c: load_experiment(c.experiment(schema_version=2)),
        ExperimentError,
        r"exp\.yaml: schema_version must be <= 1, got 2; upgrade mjsysid",
    ),
    _case(
        "exp-unknown-key",
        lambda c: load_experiment(c.experiment(optimiser={"method": "scipy"})),
        ExperimentError,
        r"exp\.yaml: top level has unknown keys \['optimiser'\]; allowed: ",
    ),
    _case(
        "exp-wrong-type",
        lambda c: load_experiment(c.experiment(name=["arm"])),
        ExperimentError,
        r"exp\.yaml: name must be str, got list \['arm'\]",
    ),
    _case(
        "exp-recording-truncated",
        lambda c: load_experiment(
            c.experiment(
                sequences=[
                    {
                        "file": str(
                            _write(
                                c.tmp / "cut.npz",
                                (bundled_examples()["arm"].parent / "run1.npz").read_bytes()[:999],
                            )
                        )
                    }
                ]
            )
        ),
        ExperimentError,
        r"exp\.yaml: sequences\[0\]: '.*cut\.npz' is not a readable \.npz file",
    ),
    _case(
        "exp-recording-pickled",
        lambda c: load_experiment(c.recording(time=lambda t: t.astype(object))),
        ExperimentError,
        r"sequences\[0\]: '.*rec\.npz' is not a readable \.npz file \(Object "
        r"arrays cannot be loaded when allow_pickle=False\)",
    ),
    _case(
        "exp-recording-nan-data",
        lambda c: load_experiment(c.recording(elbow_pos=lambda a: _with_nan(a, (10,)))),
        ExperimentError,
        r"exp\.yaml: sequences\[0\]: recording '.*': column 'elbow_pos' must be finite, got "
        r"\[nan\] in data row 11 of",
    ),
    _case(
        "exp-recording-repeated-times",
        lambda c: load_experiment(
            c.recording(time=lambda t: np.where(np.arange(t.size) == 5, t[4], t))
        ),
        ExperimentError,
        r"sequences\[0\]: recording '.*': time column 'time' must be strictly increasing, "
        r"got .* then .* in data rows 5 and 6",
    ),
    _case(
        "exp-recording-nan-initial-qpos",
        lambda c: load_experiment(c.recording(initial_qpos=lambda q: _with_nan(q, (1,)))),
        ExperimentError,
        r"exp\.yaml: sequences\[0\]: .*initial_qpos.*qpos must be finite, got "
        r"qpos\[1\]=nan",
    ),
    _case(
        "exp-time-range-reversed",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "time_range": [1.0, 0.5]}])
        ),
        ExperimentError,
        r"sequences\[0\]: recording '.*run1\.npz': time_range must be start < end, got "
        r"\[1\.0, 0\.5\]",
    ),
    _case(
        "exp-time-range-outside-the-recording",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "time_range": [0.5, 99.0]}])
        ),
        ExperimentError,
        r"sequences\[0\]: recording '.*': time_range must be within the recording's span "
        r"\[0\.0, .*\] s \(its own clock\), got \[0\.5, 99\.0\]",
    ),
    _case(
        "exp-time-range-not-numbers",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "time_range": ["a", None]}])
        ),
        ExperimentError,
        r"time_range must be two finite numbers \(s\) or None, got \['a', None\]",
    ),
    _case(
        "exp-sequence-key-misspelt-before-loading",
        lambda c: load_experiment(
            c.experiment(sequences=[{"file": str(_arm_run1()), "timescale": 0.001}])
        ),
        ExperimentError,
        r"sequences\[0\] has unknown keys \['timescale'\]; allowed: \[.*\]; did you mean "
        r"'time_scale' for 'timescale'\?",
    ),
    _case(
        "exp-model-file-given-as-experiment",
        lambda c: load_experiment(bundled_examples()["arm"].parent / "arm.xml"),
        ExperimentError,
        r"arm\.xml: this is a model file; give an experiment file \(YAML\)",
    ),
    _case(
        "csv-truncated-last-line",
        lambda c: mjsysid.data.recording.read_columns(
            c.file("cut.csv", "time,a,b\n0,1,2\n0.1,1,2\n0.2,1\n")
        ),
        ValueError,
        r"cut\.csv' line 4: must have 3 fields, got 2; a line cut off \(a truncated capture\) "
        r"or with a stray separator: repair or delete it",
    ),
    _case(
        "csv-comment-above-the-header",
        lambda c: mjsysid.data.recording.read_columns(
            c.file("c.csv", "# motor log\ntime,a,b\n0,1,2\n")
        ),
        ValueError,
        r"c\.csv' line 2: must have 1 fields, got 3; the header \(line 1\) names 1 columns "
        r"\['# motor log'\]: is a comment or title line above it\?",
    ),
    # ---- TimeSeries npz files -------------------------------------------------------------
    _case(
        "npz-truncated",
        lambda c: ms.TimeSeries.load_from_disk(_write(c.tmp / "t.npz", c.ts_file()[:200])),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(not a zip archive: truncated or "
        r"a foreign format\)",
    ),
    _case(
        "npz-corrupted",
        lambda c: ms.TimeSeries.load_from_disk(
            _write(c.tmp / "t.npz", _corrupt_middle(c.ts_file()))
        ),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(Bad CRC-32",
    ),
    _case(
        "npz-foreign",
        lambda c: ms.TimeSeries.load_from_disk(_savez(c.tmp / "t.npz", a=np.ones(3))),
        ValueError,
        r"'.*t\.npz' must contain arrays \['times', 'data', 'signal_mapping_json', "
        r"'schema_version'\], missing .*; found \['a'\]",
    ),
    _case(
        "npz-text-file",
        lambda c: ms.TimeSeries.load_from_disk(c.file("t.npz", "times,data\n0,1\n")),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(not a zip archive",
    ),
    _case(
        "npz-pickled-object-array",
        lambda c: ms.TimeSeries.load_from_disk(_pickled_npz(c.tmp / "t.npz")),
        ValueError,
        r"'.*t\.npz' is not a readable \.npz file \(Object arrays cannot be loaded "
        r"when allow_pickle=False\)",
    ),
    _case(
        "npz-newer-schema",
        lambda c: ms.TimeSeries.load_from_disk(_ts_npz(c.tmp / "t.npz", [0.0, 1.0], 2)),
        ValueError,
        r"t\.npz': schema_version must be <= 1, got 2; the file was written by a "
        r"newer mjsysid",
    ),
    _case(
        "npz-nan-times",
        lambda c: ms.TimeSeries.load_from_disk(_ts_npz(c.tmp / "t.npz", [0.0, NAN, 2.0])),
        ValueError,
        r"t\.npz': times must be finite, got nan at index 1",
    ),
    _case(
        "npz-missing-file",
        lambda c: ms.TimeSeries.load_from_disk(c.tmp / "none.npz"),
        FileNotFoundError,
        r"no such file: '.*none\.npz'",
    ),
]


def _start(params: ms.ParameterDict, name: str, value: float) -> ms.ParameterDict:
    params[name].value = [value]
    return params


def _truncated_checkpoint(c: Ctx) -> Path:
    path = _checkpoint(c, c.masses())
    _truncate(path)
    return path


def _result(c: Ctx) -> ms.OptimizeResult:
    return ms.load_results(c.arm.results).result


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _savez(path: Path, **arrays: np.ndarray) -> Path:
    np.savez(path, **arrays)
    return path


def test_catalogue_is_large_enough():
    assert len(CASES) >= 40
    ids = [c.id for c in CASES]
    assert len(set(ids)) == len(ids)


@pytest.mark.parametrize(("make", "exc", "match"), CASES)
def test_bad_input(arm: Arm, tmp_path: Path, make, exc, match):
    with pytest.raises(exc, match=match) as info:
        make(Ctx(arm, tmp_path))
    # The documented type, not just a subclass of it (private subclasses such as the KeyError
    # that prints its message unquoted are an implementation detail).
    assert info.type is exc or info.type.__name__.startswith("_"), info.type


# --------------------------------------------------------------------------------------------
# Peer silent failures that are about what is *kept*, not what is refused


def test_saved_parameters_keep_modifiers_and_metadata(arm: Arm, tmp_path: Path):
    """Peer: saved parameters lose their modifiers and inertia metadata."""
    params = ms.ParameterDict(
        [
            ms.body_inertia_param(arm.spec, arm.model, "link1", ms.InertiaType.MassIpos),
            ms.body_inertia_param(arm.spec, arm.model, "link2", ms.InertiaType.Mass),
            ms.make_parameter("joint_damping", arm.model, "j1"),
            ms.make_parameter("actuator_gear", arm.model, "m2"),
            ms.make_parameter("sensor_delay", None, "j1_pos"),
        ]
    )
    params.update_from_vector([1.2, 0.16, 0.001, 0.002, 0.6, 0.09, 1.3, 0.01])
    params.save_to_disk(tmp_path / "p.yaml")
    loaded = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    assert loaded.keys() == params.keys()
    for name in params:
        assert loaded[name].meta == params[name].meta, name
        np.testing.assert_array_equal(loaded[name].value, params[name].value)
        np.testing.assert_array_equal(loaded[name].min_value, params[name].min_value)
        assert (loaded[name].modifier is None) == (params[name].modifier is None), name
    # the re-bound modifiers build the very same model
    m_orig = ms.apply_param_modifiers(params, arm.spec)
    m_load = ms.apply_param_modifiers(loaded, arm.spec)
    for field in ("body_mass", "body_ipos", "body_inertia", "dof_damping", "actuator_gear"):
        np.testing.assert_array_equal(getattr(m_load, field), getattr(m_orig, field), field)


def test_custom_modifier_lost_on_load_is_named_in_a_fit(arm: Arm, tmp_path: Path):
    """A parameter whose modifier cannot be re-created must not fit silently to nothing."""

    def scale_damping(spec: mujoco.MjSpec, p: ms.Parameter) -> None:
        spec.joint("j1").damping[0] = p.value[0]

    params = _with(arm.masses(), ms.Parameter("my_damping", 0.05, 0.0, 1.0, modifier=scale_damping))
    params.save_to_disk(tmp_path / "p.yaml")
    loaded = ms.ParameterDict.load_from_disk(tmp_path / "p.yaml")
    lost = (
        r"parameters \['my_damping'\] were saved with custom modifiers and loaded without them "
        r"\(callbacks are not saved\); set p.modifier again"
    )
    with pytest.raises(ValueError, match=rf"residual_fn: {lost}"):  # before any simulation
        ms.optimize(loaded, arm.rf, max_iters=3)
    with pytest.raises(ValueError, match=rf"apply modifiers: {lost}"):
        ms.apply_param_modifiers(loaded, arm.spec)
    loaded["my_damping"].frozen = True  # frozen: it is not applied, nothing is lost
    ms.apply_param_modifiers(loaded, arm.spec)
    params.load_values(tmp_path / "p.yaml")  # the documented way to continue with own modifiers
    assert params["my_damping"].modifier is scale_damping


def test_optimize_leaves_callers_parameters_and_spec_alone(arm: Arm):
    """Peer: after optimizing, the spec and the caller's parameters sit at a perturbed FD point."""
    params = arm.masses()
    params.update_from_vector([1.1, 0.6])
    before = params.as_vector()
    xml = arm.spec.to_xml()
    opt, res = ms.optimize(params, arm.rf, max_iters=30)
    np.testing.assert_array_equal(params.as_vector(), before)
    assert arm.spec.to_xml() == xml
    np.testing.assert_array_equal(opt.as_vector(), res.x)  # exactly the answer, not x + h
    np.testing.assert_array_equal(arm.rf(opt.as_vector(), opt), res.fun)
    np.testing.assert_allclose(res.x, [1.3, 0.5], rtol=1e-6)
    # a fit that stops with an error leaves them alone too
    bad = _with(params.copy(), ms.Parameter("noop", 1.0, 0.0, 2.0, modifier=_noop))
    with pytest.raises(ValueError, match="no effect"):
        ms.optimize(bad, arm.rf)
    np.testing.assert_array_equal(bad.as_vector()[:2], before)
    assert arm.spec.to_xml() == xml


def test_unwritable_checkpoint_fails_before_any_residual(arm: Arm, tmp_path: Path):
    """A checkpoint that cannot be written is an error at the start, not after iteration 1."""
    calls = []

    def counted(x: np.ndarray, p: ms.ParameterDict) -> np.ndarray:
        calls.append(np.shape(x))
        return arm.rf(x, p)

    blocker = tmp_path / "not_a_folder"
    blocker.write_text("x")
    params = arm.masses()
    params.update_from_vector([1.1, 0.6])
    with pytest.raises(OSError, match=r"cannot create folder '.*not_a_folder'"):
        ms.optimize(params, counted, checkpoint=blocker / "fit.npz", max_iters=5)
    assert calls == [], f"{len(calls)} residual calls before the error"
