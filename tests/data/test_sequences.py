"""Model edits, initial states, rollouts and ModelSequences validation."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, SERVO, excitation


# -- apply_param_modifiers -------------------------------------------------------------------
def test_apply_param_modifiers_works_on_a_copy(arm_spec):
    d = ms.ParameterDict(
        [
            ms.Parameter(
                "d",
                0.3,
                0.0,
                1.0,
                modifier=lambda s, p: s.joint("j1").damping.__setitem__(0, p.value[0]),
            )
        ]
    )
    model = ms.apply_param_modifiers(d, arm_spec)
    assert model.dof_damping[0] == pytest.approx(0.3)
    assert arm_spec.joint("j1").damping[0] == pytest.approx(0.05)
    # as the API specification describes it: the spec itself is modified and returned
    copy = arm_spec.copy()
    spec2 = ms.apply_param_modifiers_spec(d, arm_spec)
    assert spec2 is arm_spec and arm_spec.joint("j1").damping[0] == pytest.approx(0.3)
    assert copy.joint("j1").damping[0] == pytest.approx(0.05)


def test_modifier_error_names_parameter_and_value(arm_spec):
    d = ms.ParameterDict(
        [ms.Parameter("bad", 0.3, 0.0, 1.0, modifier=lambda s, p: s.joint("nope").damping)]
    )
    with pytest.raises(
        ms.ModifierError, match=r"modifier of parameter 'bad' failed for value .*0.3"
    ):
        ms.apply_param_modifiers(d, arm_spec)


def test_compile_failure_names_values(arm_spec):
    def negative_mass(spec, p):
        spec.body("link1").explicitinertial = True
        spec.body("link1").mass = -p.value[0]
        spec.body("link1").inertia = [1e-3, 1e-3, 1e-3]

    d = ms.ParameterDict([ms.Parameter("m", 1.0, 0.0, 2.0, modifier=negative_mass)])
    with pytest.raises(
        ms.ModifierError, match=r"failed to compile after applying parameters \(m=.*1\."
    ):
        ms.apply_param_modifiers(d, arm_spec)


def test_model_passed_instead_of_spec(arm_spec):
    with pytest.raises(TypeError, match="did you pass a compiled MjModel instead of an MjSpec"):
        ms.apply_param_modifiers(ms.ParameterDict(), arm_spec.compile())


def test_pd_gains():
    spec = mujoco.MjSpec.from_string(SERVO)
    ms.apply_pgain(spec, "servo", 7.0)
    ms.apply_dgain(spec, "servo", 0.4)
    m = spec.compile()
    np.testing.assert_allclose(m.actuator_gainprm[0, 0], 7.0)
    np.testing.assert_allclose(m.actuator_biasprm[0, :3], [0, -7.0, -0.4])
    ms.apply_pdgain(spec, "servo", (2.0, 0.1))
    np.testing.assert_allclose(spec.compile().actuator_biasprm[0, :3], [0, -2.0, -0.1])
    with pytest.raises(KeyError, match=r"no actuator named 'nope'; known: \['servo'\]"):
        ms.apply_pgain(spec, "nope", 1.0)
    with pytest.raises(ValueError, match="value must be two numbers"):
        ms.apply_pdgain(spec, "servo", 1.0)
    arm = mujoco.MjSpec.from_string(ARM2)
    with pytest.raises(ValueError, match="actuator 'm1' must be a position actuator"):
        ms.apply_pgain(arm, "m1", 1.0)


def test_remove_visuals_keeps_physics():
    xml = """
    <mujoco>
      <asset>
        <texture name="t" type="2d" builtin="checker" width="8" height="8"/>
        <material name="mat" texture="t"/>
      </asset>
      <worldbody>
        <body name="b">
          <joint type="hinge"/>
          <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 0.1"/>
          <geom name="col" size="0.1" material="mat"/>
          <geom name="vis" size="0.2" contype="0" conaffinity="0" material="mat"/>
        </body>
        <body name="c" pos="1 0 0">
          <joint type="hinge"/>
          <geom name="vis_mass" size="0.2" contype="0" conaffinity="0"/>
        </body>
      </worldbody>
    </mujoco>"""
    spec = mujoco.MjSpec.from_string(xml)
    before = spec.compile()
    ms.remove_visuals(spec)
    after = spec.compile()
    assert [g.name for g in spec.geoms] == ["col", "vis_mass"]  # vis_mass gives c its inertia
    assert after.nmat == 0 and after.ntex == 0
    np.testing.assert_allclose(after.body_mass, before.body_mass)
    np.testing.assert_allclose(after.body_inertia, before.body_inertia)


# -- initial states and rollouts -------------------------------------------------------------
def test_create_initial_state_full_and_named():
    model = mujoco.MjModel.from_xml_string(ARM2)
    x = ms.create_initial_state(model, qpos=[0.1, 0.2], qvel=[0.3, 0.4], time=1.5)
    assert x.shape == (mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS),)
    np.testing.assert_allclose(x[:5], [1.5, 0.1, 0.2, 0.3, 0.4])
    y = ms.create_initial_state(model, qpos={"j2": 0.7})
    np.testing.assert_allclose(y[1:3], [0.0, 0.7])
    with pytest.raises(
        KeyError, match=r"qpos: the model has no joint named 'j3'; known: \['j1', 'j2'\]"
    ):
        ms.create_initial_state(model, qpos={"j3": 0.1})
    with pytest.raises(ValueError, match=r"qpos must be an array of length 2"):
        ms.create_initial_state(model, qpos=[0.1])
    with pytest.raises(ValueError, match=r"qvel must be finite, got qvel\[1\]=nan"):
        ms.create_initial_state(model, qvel=[0.0, np.nan])
    with pytest.raises(TypeError, match="did you pass an MjSpec"):
        ms.create_initial_state(mujoco.MjSpec.from_string(ARM2))


def test_sysid_rollout_matches_step_loop():
    model = mujoco.MjModel.from_xml_string(ARM2)
    ctrl = excitation(50, 2, hold=5)
    x0 = ms.create_initial_state(model, qpos=[0.2, -0.1])
    traj = ms.sysid_rollout([model, model], None, np.stack([ctrl, 2 * ctrl]), x0, nthread=2)
    assert len(traj) == 2
    data = mujoco.MjData(model)
    mujoco.mj_setState(model, data, x0, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    for k in range(50):
        data.ctrl[:] = ctrl[k]
        mujoco.mj_forward(model, data)
        # row k: state and sensors at the same instant t_k
        np.testing.assert_allclose(traj[0].sensordata[k], data.sensordata, atol=1e-12)
        np.testing.assert_allclose(traj[0].qpos()[k], data.qpos, atol=1e-12)
        assert traj[0].times[k] == pytest.approx(data.time)
        mujoco.mj_step(model, data)
    assert not np.allclose(traj[1].qpos(), traj[0].qpos())


def test_sysid_rollout_takes_control_time_series():
    """A control TimeSeries (or one per rollout) gives the same rollouts as its rows; one not
    sampled every model timestep is refused with the fix in the message."""
    model = mujoco.MjModel.from_xml_string(ARM2)
    dt = model.opt.timestep
    ctrl = excitation(50, 2, hold=5)
    t = 0.3 + dt * np.arange(50)
    x0 = ms.create_initial_state(model, qpos=[0.2, -0.1])
    ref = ms.sysid_rollout(model, None, np.stack([ctrl, 2 * ctrl]), x0)
    one = ms.TimeSeries.from_control_names(t, ctrl, model)
    two = ms.TimeSeries.from_control_names(t, 2 * ctrl, model)
    for got in (
        ms.sysid_rollout(model, None, [one, two], x0),
        [
            *ms.sysid_rollout(model, None, one, x0),
            *ms.sysid_rollout(model, None, (two,), x0),
        ],
    ):
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a.sensordata, b.sensordata)
    coarse = ms.TimeSeries.from_control_names(2 * dt * np.arange(50), ctrl, model)
    with pytest.raises(
        ValueError,
        match=r"control\[1\] must be a TimeSeries sampled every model timestep \(0.002 s\).*"
        r"Its steps are 0.004 to 0.004 s; resample it first: ts.resample\(target_dt=0.002\)",
    ):
        ms.sysid_rollout(model, None, [one, coarse], x0)
    with pytest.raises(ValueError, match=r"control must be TimeSeries of one length"):
        ms.sysid_rollout(model, None, [one, two.remove_from_beginning(0.01)], x0)


def test_sysid_rollout_reports_divergence():
    spec = mujoco.MjSpec.from_string(SERVO)
    ms.apply_pgain(spec, "servo", 1e14)
    model = spec.compile()
    x0 = ms.create_initial_state(model, qpos=[0.5])
    with pytest.raises(ms.RolloutDivergedError, match=r"rollout 0 diverged at step \d+"):
        ms.sysid_rollout(model, None, np.ones((200, 1)), x0)


def test_sysid_rollout_shape_errors():
    model = mujoco.MjModel.from_xml_string(ARM2)
    x0 = ms.create_initial_state(model)
    with pytest.raises(ValueError, match=r"control must be shape \(nbatch, nstep, 2\)"):
        ms.sysid_rollout(model, None, np.zeros((10, 3)), x0)
    with pytest.raises(ValueError, match="initial_states must be rows of length"):
        ms.sysid_rollout(model, None, np.zeros((10, 2)), x0[:3])
    with pytest.raises(ValueError, match="control must be finite"):
        ms.sysid_rollout(model, None, np.full((10, 2), np.nan), x0)


# -- ModelSequences validation ---------------------------------------------------------------
@pytest.fixture
def parts(arm_spec):
    model = arm_spec.compile()
    t = np.arange(100) * 0.002
    x0 = ms.create_initial_state(model)
    ctrl = ms.TimeSeries.from_control_names(t, np.zeros((100, 2)), model)
    sens = ms.TimeSeries.from_names(t, np.ones((100, model.nsensordata)), model)
    return arm_spec, model, t, x0, ctrl, sens


def test_single_sequence_promoted(parts):
    spec, _, _, x0, ctrl, sens = parts
    seq = ms.ModelSequences("arm", spec, "s", x0, ctrl, sens)
    assert seq.sequence_name == ["s"] and len(seq) == 1 and seq.model.nu == 2


def test_unequal_lists(parts):
    spec, _, _, x0, ctrl, sens = parts
    with pytest.raises(
        ValueError,
        match=r"'arm': sequence_name, initial_state, control and sensordata must "
        r"have the same number of sequences, got .*'control': 1",
    ):
        ms.ModelSequences("arm", spec, ["a", "b"], [x0, x0], [ctrl], [sens, sens])


def test_duplicate_sequence_names(parts):
    spec, _, _, x0, ctrl, sens = parts
    with pytest.raises(ValueError, match="sequence_name must be unique names"):
        ms.ModelSequences("arm", spec, ["a", "a"], [x0, x0], [ctrl, ctrl], [sens, sens])


def test_names_must_be_file_names(parts):
    """Names become file names (<name>.xml): a name with a path in it must not write outside
    the results folder."""
    spec, _, _, x0, ctrl, sens = parts
    for bad in ("../../escape", "a/b", "a\\b", "..", "tab\there"):
        with pytest.raises(ValueError, match=r"ModelSequences name must be a name usable as a"):
            ms.ModelSequences(bad, spec, "s", x0, ctrl, sens)
        with pytest.raises(ValueError, match=r"'arm': sequence_name must be a name usable as a"):
            ms.ModelSequences("arm", spec, bad, x0, ctrl, sens)
    ms.ModelSequences("arm #2 (left)", spec, "run 1.csv", x0, ctrl, sens)


def test_sensordata_columns_must_all_be_signals(parts):
    """A mapping that labels some columns only would leave the others compared with nothing
    (the residual read unset memory there)."""
    spec, model, t, x0, ctrl, _ = parts
    data = np.ones((100, model.nsensordata))
    partial = ms.TimeSeries(t, data, signal_mapping={"j1_pos": (ms.SignalType.MjSensor, [0])})
    with pytest.raises(
        ValueError,
        match=r"sequence 's': sensordata must be a signal for every column .* got "
        r"'columns \[1, 2, 3, 4, 5, 6, 7, 8, 9\] in no signal'. Label them .*slice_by_name",
    ):
        ms.ModelSequences("arm", spec, "s", x0, ctrl, partial)
    ms.ModelSequences("arm", spec, "s", x0, ctrl, partial.slice_by_name("j1_pos"))


def test_initial_state_forms(parts):
    """One state as an array or a flat list of numbers; anything else is named."""
    spec, _, _, x0, ctrl, sens = parts
    seq = ms.ModelSequences("arm", spec, "s", list(x0), ctrl, sens)
    np.testing.assert_array_equal(seq.initial_state[0], x0)
    match = r"'arm': initial_state must be a full-physics state \(numbers\)"
    for bad in ("abc", True, 3.0, None):
        with pytest.raises(TypeError, match=match):
            ms.ModelSequences("arm", spec, "s", bad, ctrl, sens)
    with pytest.raises(TypeError, match=match):
        ms.ModelSequences("arm", spec, ["s", "t"], [x0, ["a"] * 5], [ctrl] * 2, [sens] * 2)
    with pytest.raises(ValueError, match=r"data must be a rectangular array \(rows of one length"):
        ms.TimeSeries(np.arange(3.0), [[1.0, 2.0], [3.0], [4.0, 5.0]])


def test_bad_initial_state(parts):
    spec, _, _, x0, ctrl, sens = parts
    with pytest.raises(
        ValueError,
        match=r"sequence 's': initial_state must be a 1-D full-physics state "
        r"of length 5.*create_initial_state",
    ):
        ms.ModelSequences("arm", spec, "s", x0[:3], ctrl, sens)
    bad = x0.copy()
    bad[2] = np.inf
    with pytest.raises(
        ValueError, match=r"initial_state must be finite, got initial_state\[2\]=inf"
    ):
        ms.ModelSequences("arm", spec, "s", bad, ctrl, sens)


def test_control_must_cover_sensor_span(parts):
    spec, model, t, x0, _, sens = parts
    short = ms.TimeSeries.from_control_names(t[:50], np.zeros((50, 2)), model)
    with pytest.raises(
        ValueError,
        match=r"sequence 's': control must cover the sensordata time span "
        r"\[0.0, 0.198\] s, got control times \[0.0, 0.098\] s",
    ):
        ms.ModelSequences("arm", spec, "s", x0, short, sens)


def test_control_width_and_names(parts):
    spec, model, t, x0, _, sens = parts
    narrow = ms.TimeSeries(t, np.zeros((100, 1)))
    with pytest.raises(
        ValueError, match=r"control must be 2 columns \(one per actuator\), got '1 columns'"
    ):
        ms.ModelSequences("arm", spec, "s", x0, narrow, sens)
    partial = ms.TimeSeries.from_control_names(t, np.zeros((100, 1)), model, names=["m2"])
    with pytest.raises(
        ValueError, match=r"control must be a column for every actuator, got \"none for \['m1'\]\""
    ):
        ms.ModelSequences("arm", spec, "s", x0, partial, sens)
    with pytest.raises(
        ValueError, match=r"control must be a TimeSeries for the model's 2 actuators"
    ):
        ms.ModelSequences("arm", spec, "s", x0, None, sens)


def test_sensordata_width_without_mapping(parts):
    spec, _, t, x0, ctrl, _ = parts
    with pytest.raises(ValueError, match=r"sensordata must be 10 columns \(all model sensors\)"):
        ms.ModelSequences("arm", spec, "s", x0, ctrl, ms.TimeSeries(t, np.ones((100, 3))))


def test_sensordata_unknown_name(parts):
    spec, _, t, x0, ctrl, _ = parts
    other = mujoco.MjModel.from_xml_string(SERVO)
    sens = ms.TimeSeries.from_names(t, np.ones((100, 1)), other, names=["angle"])
    with pytest.raises(KeyError, match="sequence 's': sensordata: "):
        ms.ModelSequences("arm", spec, "s", x0, ctrl, sens)


def test_model_instead_of_spec(parts):
    _spec, model, _, x0, ctrl, sens = parts
    with pytest.raises(TypeError, match="did you pass a compiled MjModel instead of an MjSpec"):
        ms.ModelSequences("arm", model, "s", x0, ctrl, sens)


def test_clock_ok_flags_resets_and_non_finite_rollouts():
    from mjsysid.sim.rollout import clock_ok

    def check_clock(*args, **kw):
        return np.flatnonzero(~clock_ok(*args, **kw))

    nb, n, dt = 6, 300, 0.002
    t0 = np.array([0.0, 0.0, 0.0, -0.3, 0.0, 1.0])
    s = np.random.default_rng(0).normal(size=(nb, n, 5))
    s[:, :, 0] = t0[:, None] + dt * np.arange(1, n + 1)
    assert check_clock(s, t0, np.full(nb, dt)).size == 0
    s[1, 40, 3] = np.nan  # a non-finite state entry
    s[2, 150:, 0] = dt * np.arange(1, n - 150 + 1)  # reset to time 0 half-way
    s[3, 100:, 0] = dt * np.arange(1, n - 100 + 1)  # negative start: the reset jumps forward
    s[4, -1, 0] = np.inf
    assert check_clock(s, t0, np.full(nb, dt)).tolist() == [1, 2, 3, 4]
    # without the scan (MuJoCo's automatic reset on) only the clock is read
    assert check_clock(s, t0, np.full(nb, dt), scan=False).tolist() == [2, 3, 4]


def test_readme_recording_recipe(tmp_path):
    """The README's file path: write_recording -> load_recording -> initial state from the
    sensors -> ModelSequences; the residual of the true model on it vanishes."""
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    ctrl = excitation(300, model.nu, hold=20)
    x0 = ms.create_initial_state(model, qpos=[0.2, -0.1])
    (traj,) = ms.sysid_rollout(model, None, ctrl, x0)
    path = ms.write_recording(tmp_path / "run1.csv", model, traj.times, ctrl, traj.sensordata)
    rec = ms.load_recording(path, model)
    assert rec.unused_columns == ()
    start = ms.create_initial_state(model, *ms.initial_state_from_sensors(model, rec.sensordata))
    np.testing.assert_allclose(start, x0, atol=1e-12)  # jointpos/jointvel sensors give it
    seq = ms.ModelSequences("robot", spec, "run1", start, rec.control, rec.sensordata)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", model, "j1")])
    r = ms.build_residual_fn([seq], normalize=False)(params.as_vector(), params)
    assert np.max(np.abs(r)) < 1e-9
