"""Drop-in (#16): the names ``mujoco.sysid`` exports and its helpers users reach.

``import mjsysid.compat as sysid`` must offer every top-level name of the peer, and
``mjsysid.compat._src.<module>`` every helper of the peer's ``_src.<module>`` that user code
imports.
"""

from __future__ import annotations

import importlib

import mujoco
import numpy as np
import pytest

import mjsysid.compat as sysid

TODO = "#16: not implemented yet"
_X = pytest.mark.xfail(reason=TODO, strict=True)

TOP_PRESENT = (
    "BuildModelFn CustomRolloutFn InertiaType ModelSequences ModifyResidualFn Parameter "
    "ParameterDict SignalTransform SignalType SystemTrajectory TimeSeries apply_body_inertia "
    "apply_dgain apply_param_modifiers apply_param_modifiers_spec apply_pdgain apply_pgain "
    "body_inertia_param build_residual_fn calculate_intervals create_initial_state "
    "default_report model_modifier optimize parameter remove_visuals render_rollout report "
    "save_results signal_modifier sysid_rollout "
    "apply_bias apply_delay apply_delayed_ts_window apply_gain apply_resample_and_delay "
    "construct_ts_from_defaults get_sensor_indices model_residual normalize_residual residual "
    "weighted_diff"
).split()

#: ``_src`` module -> helpers of the peer's module of that name that mjsysid has there.
SRC_PRESENT = {
    "model_modifier": "InertiaType is_position_actuator get_actuator_pd_gains "
    "apply_body_mass_ipos scale_body_inertia pi_from_theta pseudoinertia_from_pi "
    "cholesky_decompose_upper theta_from_pseudoinertia skew inertia_to_fullinertia pi_from_body "
    "theta_inertia_from_body apply_body_theta_inertia apply_body_inertia body_inertia_param",
    "parameter": "InertiaType",
    "trajectory": "create_initial_state ModelSequences timeseries2array sequence2array arrays2traj",
    "residual": "SystemTrajectory sysid_rollout construct_ts_from_defaults model_residual residual",
    "signal_modifier": "apply_time_window prepare_sensor_weights",
    "io": "calculate_intervals",
    "timeseries": "InterpolationMethod SignalMappingType encode_signal_mapping "
    "decode_signal_mapping",
}
#: ``_src`` module -> helpers of the peer's module of that name that mjsysid lacks there.
SRC_MISSING: dict[str, str] = {}


@pytest.mark.parametrize("name", TOP_PRESENT)
def test_top_level_name(name: str) -> None:
    assert getattr(sysid, name, None) is not None


def test_top_level_modules_are_modules() -> None:
    for name in ("parameter", "model_modifier", "signal_modifier", "report"):
        assert type(getattr(sysid, name)).__name__ == "module", name


@pytest.mark.parametrize(
    ("module", "name"),
    [
        *(
            pytest.param(mod, n, id=f"{mod}.{n}")
            for mod, names in SRC_PRESENT.items()
            for n in names.split()
        ),
        *(
            pytest.param(mod, n, marks=_X, id=f"{mod}.{n}")
            for mod, names in SRC_MISSING.items()
            for n in names.split()
        ),
    ],
)
def test_src_helper(module: str, name: str) -> None:
    assert getattr(importlib.import_module(f"mjsysid.compat._src.{module}"), name, None) is not None


# --------------------------------------------------------------------- params/apply


def test_gains_return_the_spec(pendulum_spec: mujoco.MjSpec) -> None:
    spec = pendulum_spec
    act = spec.actuator("servo")
    assert sysid.apply_pgain(spec, "servo", 7.0) is spec
    assert act.gainprm[0] == 7.0 and list(act.biasprm[:3]) == [0.0, -7.0, -0.5]
    assert sysid.apply_dgain(spec, actuator_name="servo", value=0.7) is spec
    assert list(act.biasprm[:3]) == [0.0, -7.0, -0.7]
    assert sysid.apply_pdgain(spec, "servo", np.array([3.0, 0.3])) is spec
    assert act.gainprm[0] == 3.0 and list(act.biasprm[:3]) == [0.0, -3.0, -0.3]


def test_remove_visuals_keyword_in_spec(pendulum_spec: mujoco.MjSpec) -> None:
    assert isinstance(sysid.remove_visuals(in_spec=pendulum_spec), mujoco.MjSpec)


def test_position_actuator_helpers(pendulum_spec: mujoco.MjSpec) -> None:
    from mjsysid.compat._src import model_modifier

    assert model_modifier.is_position_actuator(pendulum_spec.actuator("servo"))
    # The peer rejects every compiled model here ("not a position actuator"); mjsysid
    # reads kp and kv.
    kp, kv = model_modifier.get_actuator_pd_gains(pendulum_spec.compile(), "servo")
    assert (kp, kv) == (5.0, 0.5)


# ------------------------------------------------------------------- params/inertia

THETA = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0])
J_PEER = [
    [3.5076546066515437, 2.216759779652658, 2.2526053668014927, 0.9771222065281361],
    [2.216759779652658, 3.6545821555398668, 2.1925337625784587, 1.099262482344153],
    [2.2526053668014927, 2.1925337625784587, 3.939684586619216, 1.22140275816017],
    [0.9771222065281361, 1.099262482344153, 1.22140275816017, 1.22140275816017],
]


def test_theta_pi_pseudoinertia_round_trip() -> None:
    from mjsysid.compat._src import model_modifier as mm

    pi = mm.pi_from_theta(THETA)
    assert pi[0] == pytest.approx(1.22140275816017)  # mass exp(2α)
    np.testing.assert_allclose(pi[1:4], [0.9771222065281361, 1.099262482344153, 1.22140275816017])
    j = mm.pseudoinertia_from_pi(pi)
    np.testing.assert_allclose(j, J_PEER, rtol=1e-12)
    np.testing.assert_allclose(mm.theta_from_pseudoinertia(j), THETA, atol=1e-12)
    u = mm.cholesky_decompose_upper(j)
    np.testing.assert_allclose(np.triu(u), u)
    np.testing.assert_allclose(u @ u.T, j, rtol=1e-12)
    np.testing.assert_allclose(u[0, 0], 1.349858807576003, rtol=1e-12)


def test_skew_and_full_inertia() -> None:
    from mjsysid.compat._src import model_modifier as mm

    np.testing.assert_array_equal(
        mm.skew(np.array([1.0, 2.0, 3.0])), [[0, -3, 2], [3, 0, -1], [-2, 1, 0]]
    )
    full = mm.inertia_to_fullinertia(np.array([1.0, 0, 0, 0]), np.array([1.0, 2.0, 3.0]))
    np.testing.assert_allclose(full, np.diag([1.0, 2.0, 3.0]))


BODY = """<mujoco><worldbody><body name="b"><joint type="hinge"/>
<inertial pos="0 0 -0.2" mass="0.5" diaginertia="0.02 0.03 0.04"/></body></worldbody></mujoco>"""


def test_body_inertia_helpers() -> None:
    from mjsysid.compat._src import model_modifier as mm

    spec = mujoco.MjSpec.from_string(BODY)
    pi = mm.pi_from_body(spec, "b")
    assert pi[0] == pytest.approx(0.5)
    np.testing.assert_allclose(pi[1:4], [0.0, 0.0, -0.1], atol=1e-15)  # h = m·c
    theta = mm.theta_inertia_from_body(spec, "b")
    expected = [-0.3465735902799726, -1.4978661367769959, -1.753278948659991, -2.3025850929940455]
    np.testing.assert_allclose(theta, [*expected, 0, 0, 0, 0, 0, -0.2], atol=1e-12)
    assert mm.apply_body_mass_ipos(spec, "b", mass=2.0, ipos=np.array([0, 0, -0.1])) is spec
    assert spec.body("b").mass == 2.0 and list(spec.body("b").ipos) == [0.0, 0.0, -0.1]
    np.testing.assert_allclose(spec.body("b").inertia, [0.02, 0.03, 0.04])
    spec = mujoco.MjSpec.from_string(BODY)
    mm.apply_body_mass_ipos(spec, "b", mass=2.0, rot_inertia_scale=True)
    np.testing.assert_allclose(spec.body("b").inertia, [0.08, 0.12, 0.16])
    # The peer's spec no longer compiles after this call (mujoco 4); mjsysid's must.
    spec = mujoco.MjSpec.from_string(BODY)
    assert mm.apply_body_theta_inertia(spec, "b", theta) is spec
    model = spec.compile()
    assert model.body_mass[1] == pytest.approx(0.5)
    np.testing.assert_allclose(model.body_ipos[1], [0.0, 0.0, -0.2], atol=1e-12)
    np.testing.assert_allclose(sorted(model.body_inertia[1]), [0.02, 0.03, 0.04], rtol=1e-9)


def test_inertia_type_members() -> None:
    assert {"Mass", "MassIpos", "Pseudo"} <= set(sysid.InertiaType.__members__)


# -------------------------------------------------------------- objective/signal_ops

_T = np.array([0.0, 0.1, 0.2, 0.3])


def _series() -> sysid.TimeSeries:
    s = sysid.SignalType.MjSensor
    mapping = {"hpos": (s, np.array([0])), "hvel": (s, np.array([1])), "af": (s, np.array([2]))}
    return sysid.TimeSeries(_T, np.column_stack([_T, 10 * _T, 100 * _T]), mapping)


def test_get_sensor_indices_returns_a_list(pendulum: mujoco.MjModel) -> None:
    assert sysid.get_sensor_indices(pendulum, "hvel") == [1]
    assert sysid.get_sensor_indices(pendulum, ["af", "hpos"]) == [2, 0]
    assert sysid.get_sensor_indices(pendulum, ["af", "hpos"], sort=True) == [0, 2]
    assert isinstance(sysid.get_sensor_indices(pendulum, "hpos"), list)


def test_gain_bias_delay_with_parameters() -> None:
    ts = _series()
    g = sysid.apply_gain(ts, sensor_name="hpos", gain=sysid.Parameter("g", 2.0, 0, 5))
    np.testing.assert_allclose(g.data[:, 0], [0.0, 0.2, 0.4, 0.6])
    b = sysid.apply_bias(ts, "hvel", sysid.Parameter("b", 1.0, -5, 5))
    np.testing.assert_allclose(b.data[:, 1], [1.0, 2.0, 3.0, 4.0])
    np.testing.assert_array_equal(ts.data[0], [0.0, 0.0, 0.0])  # input untouched
    d = sysid.apply_delay(ts, "hpos", sysid.Parameter("d", 0.05, 0, 1))
    np.testing.assert_allclose(d.data[:, 0], [0.0, 0.05, 0.15, 0.25])  # held at the start
    np.testing.assert_allclose(d.data[:, 1:], ts.data[:, 1:])


def test_resample_and_delay_signs() -> None:
    r = sysid.apply_resample_and_delay(_series(), np.array([0.1, 0.2]), 0.05)
    np.testing.assert_allclose(r.data, [[0.05, 0.5, 5.0], [0.15, 1.5, 15.0]])
    r = sysid.apply_resample_and_delay(
        _series(), np.array([0.1, 0.2]), 0.0, {"hvel": 0.05}, predicted_data=False
    )
    np.testing.assert_allclose(r.data, [[0.1, 1.5, 10.0], [0.2, 2.5, 20.0]])


def test_time_windows() -> None:
    from mjsysid.compat._src import signal_modifier

    np.testing.assert_allclose(
        signal_modifier.apply_time_window(_series(), 0.05, 0.25).times, [0.1, 0.2]
    )
    w = sysid.apply_delayed_ts_window(
        _series(), ts_delayed=_series(), min_delay=-0.05, max_delay=0.15
    )
    np.testing.assert_allclose(w.times, [0.1])


def test_weighted_diff_and_normalize(pendulum: mujoco.MjModel) -> None:
    from mjsysid.compat._src import signal_modifier

    pred, meas = np.ones((2, 3)), np.zeros((2, 3))
    np.testing.assert_array_equal(
        sysid.weighted_diff(predicted_data=pred, measured_data=meas), -1.0
    )
    np.testing.assert_array_equal(
        sysid.weighted_diff(pred, meas, pendulum, {"hvel": 2.0}), [[-1, -2, -1], [-1, -2, -1]]
    )
    np.testing.assert_array_equal(
        signal_modifier.prepare_sensor_weights({"hvel": 2.0}, 3, pendulum), [1.0, 2.0, 1.0]
    )
    # The peer divides by sqrt(sum(x**2) / (N - 1)) per column (its docstring says "standard
    # deviation"; the values are what it computes).
    out = sysid.normalize_residual(
        np.ones((3, 2)), measured_data=np.array([[0.0, 1], [2, 3], [4, 8]])
    )
    np.testing.assert_allclose(out, [[0.31622776601683794, 0.1643989873053573]] * 3, rtol=1e-12)
