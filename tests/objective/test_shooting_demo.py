"""Initial-state estimation, multiple shooting and the cart-pole demo."""

from __future__ import annotations

import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, DC_MOTOR, dc_motor_truth
from mjsysid.lab import demo


def _noisy_start(make_problem):
    def truth(spec, model):
        d = ms.ParameterDict([ms.make_parameter("joint_damping", model, "j1")])
        d.update_from_vector([0.2])
        return d

    p = make_problem(
        ARM2,
        truth,
        n=400,
        qpos=[0.3, -0.2],
        qvel=[0.5, -0.4],
        names=["j1_pos", "j2_pos", "j1_vel", "j2_vel"],
    )
    # the recorded start is off, as a noisy encoder reading would be
    x0 = p.sequences.initial_state[0].copy()
    x0[1:5] += [0.02, -0.01, 0.3, -0.2]
    seq = ms.ModelSequences(
        "arm", p.spec, "s", x0, p.sequences.control[0], p.sequences.sensordata[0]
    )
    return p, seq


def test_initial_state_estimation_removes_bias(make_problem):
    p, seq = _noisy_start(make_problem)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    _, biased = ms.optimize(params, ms.build_residual_fn([seq]))
    assert abs(biased.x[0] - 0.2) > 1e-3
    params.update(ms.initial_state_params(seq))
    assert params.keys()[1:] == [
        "arm/s/j1_qpos0",
        "arm/s/j1_qvel0",
        "arm/s/j2_qpos0",
        "arm/s/j2_qvel0",
    ]
    rf = ms.build_residual_fn([seq])
    _opt, res = ms.optimize(params, rf)
    np.testing.assert_allclose(res.x, [0.2, 0.3, 0.5, -0.2, -0.4], rtol=1e-6, atol=1e-8)
    # initial-state candidates reuse the compiled model: fewer model builds than rollouts
    assert rf.stats.model_edits < rf.stats.simulated_candidates


def test_initial_state_params_errors(make_problem):
    _p, seq = _noisy_start(make_problem)
    with pytest.raises(KeyError, match=r"sequences \['nope'\] are not recorded sequences"):
        ms.initial_state_params(seq, sequences=["nope"])
    with pytest.raises(KeyError, match="joints: the model has no joint named 'knee'"):
        ms.initial_state_params(seq, joints=["knee"])
    other = ms.ModelSequences(
        "other", seq.spec, "s", seq.initial_state[0], seq.control[0], seq.sensordata[0]
    )
    params = ms.initial_state_params(other)
    with pytest.raises(KeyError, match=r"initial-state parameters .* name no recorded sequence"):
        ms.build_residual_fn([seq])(params.as_vector(), params)


def test_split_windows_multiple_shooting(make_problem):
    p, seq = _noisy_start(make_problem)
    windows = ms.split_windows(seq, 0.2)
    assert windows.sequence_name == ["s#0", "s#1", "s#2", "s#3"]
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    params.update(ms.initial_state_params(windows))
    opt, _res = ms.optimize(params, ms.build_residual_fn([windows]))
    assert opt["j1_damping"].value[0] == pytest.approx(0.2, rel=1e-6)
    with pytest.raises(ValueError, match="window must be > 0 seconds"):
        ms.split_windows(seq, 0.0)


@pytest.mark.parametrize("with_transform", [False, True])
def test_windows_are_normalised_by_their_whole_recording(make_problem, with_transform):
    """Every window's residual is scaled by the RMS of the whole recording, not its own
    (a window near zero would be scaled up, its noise with it, and the confidence intervals,
    which pool one noise variance per signal, would be too narrow): a window's residual is
    its unnormalised residual divided by the recording's RMS, for the built-in residual and
    a SignalTransform alike."""
    p, seq = _noisy_start(make_problem)
    windows = ms.split_windows(seq, 0.2)
    meas = seq.sensordata[0]
    assert windows.rms_reference == [meas] * 4
    assert ms.split_windows(windows, 0.1).rms_reference == [meas] * 8  # kept when re-split
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    rms = ms.signal_modifier.signal_rms(meas)

    def build(normalize):
        if not with_transform:
            return ms.build_residual_fn([windows], normalize=normalize)
        t = ms.SignalTransform(normalize=normalize)
        return ms.build_residual_fn([windows], modify_residual=t.apply)

    x = np.array([0.25])
    raw, scaled = build(False)(x, params), build(True)(x, params)
    np.testing.assert_allclose(scaled, raw / np.tile(rms, raw.size // rms.size), rtol=1e-12)
    # predict (SignalTransform.apply with the reference) equals the batched residual
    rf = build(True)
    got = np.concatenate([s.residual for s in rf.predict(x, params)])
    np.testing.assert_array_equal(got, rf(x, params))
    with pytest.raises(ValueError, match=r"rms_reference must be 4 entries, got 1"):
        ms.ModelSequences(
            "arm",
            p.spec,
            windows.sequence_name,
            windows.initial_state,
            windows.control,
            windows.sensordata,
            rms_reference=[meas],
        )
    with pytest.raises(ValueError, match=r"rms_reference must be None or a TimeSeries of the"):
        ms.ModelSequences(
            "arm",
            p.spec,
            "s",
            seq.initial_state[0],
            seq.control[0],
            meas,
            rms_reference=[meas.slice_by_name(["j1_pos"])],
        )


def test_short_last_window_is_merged_not_dropped(make_problem):
    """0.199 s windows on 0.8 s leave 2 samples for a fifth window: the fourth takes them."""
    _p, seq = _noisy_start(make_problem)
    t = seq.sensordata[0].times
    windows = ms.split_windows(seq, 0.199)
    assert windows.sequence_name == ["s#0", "s#1", "s#2", "s#3"]
    last = windows.sensordata[-1].times
    assert last[0] == t[t >= 3 * 0.199 - 1e-12][0] and last[-1] == t[-1]
    covered = np.unique(np.concatenate([w.times for w in windows.sensordata]))
    np.testing.assert_array_equal(covered, t)


def test_window_starts_simulate_only_their_window(make_problem):
    """A finite-difference Jacobian over shared physics and per-window starts simulates each
    window for the physics columns and its own start columns only (W·(1 + n_phys + n_own)
    rollouts, not W·(1 + p)), and every column equals the same candidate evaluated alone."""
    p, seq = _noisy_start(make_problem)
    windows = ms.split_windows(seq, 0.2)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    params.update(ms.initial_state_params(windows))
    W, n = len(windows.sequence_name), params.size
    assert n == 1 + 4 * W
    x = params.as_vector()
    X = x[:, None] + 1e-4 * np.eye(n, n + 1, 1)  # [x, x + h e_1, ..., x + h e_n]
    rf = ms.build_residual_fn([windows])
    R = rf(X, params)
    assert rf.stats.rollouts == W * (1 + 1 + 4)
    assert rf.stats.simulated_candidates == n + 1
    alone = ms.build_residual_fn([windows])
    for j in range(n + 1):
        np.testing.assert_array_equal(R[:, j], alone(X[:, j], params))
    # a window's start moves only that window's block of the residual
    blocks = np.cumsum([0] + [s.data.size for s in windows.sensordata])
    moved = np.flatnonzero(np.any(R[:, 2:6] != R[:, :1], axis=1))
    assert blocks[0] <= moved.min() and moved.max() < blocks[1]


def test_split_windows_needs_measured_positions(make_problem):
    p = make_problem(ARM2, None, n=300, names=["tip_pos"])
    with pytest.raises(
        ValueError,
        match=r"sequence 'seq0' must measure the position of every joint to start a window "
        r"from the data, got none for \['j1', 'j2'\]",
    ):
        ms.split_windows(p.sequences, 0.2)
    with pytest.raises(ValueError, match="velocity_samples must be an integer >= 3, got 2"):
        ms.split_windows(p.sequences, 0.2, velocity_samples=2)


def test_split_windows_from_encoders_only(make_problem):
    """Positions only (an encoder): window-start velocities are estimated from the positions
    (close to the true ones), and the windows with estimated starts recover the damping."""

    def truth(spec, model):
        d = ms.ParameterDict([ms.make_parameter("joint_damping", model, "j1")])
        d.update_from_vector([0.2])
        return d

    p = make_problem(ARM2, truth, n=400, qpos=[0.3, -0.2], names=["j1_pos", "j2_pos"])
    full = make_problem(
        ARM2, truth, n=400, qpos=[0.3, -0.2], names=["j1_pos", "j2_pos", "j1_vel", "j2_vel"]
    )
    windows = ms.split_windows(p.sequences, 0.2)
    measured = ms.split_windows(full.sequences, 0.2)
    assert windows.sequence_name == ["seq0#0", "seq0#1", "seq0#2", "seq0#3"]
    for est, ref in zip(windows.initial_state[1:], measured.initial_state[1:], strict=True):
        np.testing.assert_array_equal(est[:3], ref[:3])  # time and positions as measured
        # a control step inside the fitted samples bends the quadratic: a few percent
        np.testing.assert_allclose(est[3:5], ref[3:5], rtol=0.05, atol=0.1)
        assert not np.array_equal(est[3:5], ref[3:5])  # estimated, not read
    params = ms.ParameterDict([ms.make_parameter("joint_damping", p.model, "j1")])
    params.update(ms.initial_state_params(windows, qpos=False))
    opt, _res = ms.optimize(params, ms.build_residual_fn([windows]))
    assert opt["j1_damping"].value[0] == pytest.approx(0.2, rel=1e-4)


def test_demo_identification_restores_planner_success(tmp_path):
    result = demo.run_demo(quick=True, starts=3, out=tmp_path / "demo", report=False)
    assert result.identified_mass == pytest.approx(demo.TRUE_POLE_MASS, rel=0.02)
    assert abs(result.identified_mass - demo.TRUE_POLE_MASS) <= result.half_width * 1.5
    assert result.successes["identified"] == result.starts == result.successes["true"]
    assert result.successes["wrong"] < result.starts
    assert (tmp_path / "demo" / "cartpole.xml").is_file()


def test_windows_of_a_filter_actuator_start_from_its_activation(make_problem):
    """A filter actuator's activation is state the sensors do not show: windows start from a
    nominal simulation of it (not 0), initial_state_params estimate it by default, and the
    motor's lag and back-EMF come out right (they were biased: every window started at 0)."""

    p = make_problem(DC_MOTOR, dc_motor_truth(0.12, 0.01), n=1500, names=["angle", "speed"])
    windows = ms.split_windows(p.sequences, 0.5)
    assert len(windows.sequence_name) == 6
    acts = [x0[-1] for x0 in windows.initial_state[1:]]  # the state ends with act
    assert all(a != 0.0 for a in acts)
    starts = ms.initial_state_params(windows, qpos=False, qvel=False)
    assert [n.split("/")[-1] for n in starts][:2] == ["motor_act0", "motor_act0"]
    assert len(starts) == 6
    params = ms.ParameterDict(
        [
            ms.make_parameter("actuator_filter_tau", p.model, "motor"),
            ms.make_parameter("actuator_kv", p.model, "motor"),
        ]
    )
    params.update(ms.initial_state_params(windows))
    opt, _ = ms.optimize(params, ms.build_residual_fn([windows]))
    np.testing.assert_allclose(
        [opt["motor_filter_tau"].value[0], opt["motor_kv"].value[0]], [0.12, 0.01], rtol=1e-5
    )
