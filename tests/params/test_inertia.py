"""Tests for mjsysid.inertia: pseudo-inertia maths, body inertia parameters and their fast path."""

from __future__ import annotations

import copy
import math

import mujoco
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from mjsysid.params.inertia import (
    InertiaType,
    apply_body_inertia,
    body_inertia_param,
    full_inertia_from_model,
    inertial_from_pseudo_inertia,
    inertial_from_theta,
    pseudo_inertia_from_inertial,
    pseudo_inertia_from_theta,
    theta_from_inertial,
    theta_from_pseudo_inertia,
)
from mjsysid.params.parameter import Parameter, ParameterDict

# No contacts (contype=0 everywhere): the compiler's stat.meaninertia, which mj_setConst does not
# refresh, only scales the constraint solver, so trajectories compare exactly.
ARM_XML = """
<mujoco>
  <option timestep="0.002"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="diag" pos="0 0 1">
      <freejoint/>
      <inertial pos="0.02 -0.01 0.03" mass="1.5" diaginertia="0.02 0.03 0.04" euler="20 -10 5"/>
      <geom size=".05"/>
    </body>
    <body name="full" pos="1 0 1">
      <joint type="ball"/>
      <inertial pos="0.1 0 0.05" mass="2" fullinertia="0.3 0.2 0.25 0.01 0.02 0.03"/>
      <body name="cap" pos="0.2 0 0">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" size=".03 .1" pos=".12 0 0" euler="0 90 0"/>
        <site name="tip" pos=".12 0 0" euler="0 90 0"/>
      </body>
    </body>
    <body name="box" pos="0 1 1">
      <freejoint/>
      <geom type="box" size=".1 .2 .3" euler="10 20 30" pos="0 .1 0"/>
    </body>
    <body name="ball" pos="0 2 1">
      <freejoint/>
      <geom type="sphere" size=".1"/>
    </body>
  </worldbody>
</mujoco>
"""
BODIES = ["diag", "full", "cap", "box"]

ONE_BODY_XML = """
<mujoco>
  <worldbody>
    <body name="b"><freejoint/><geom type="box" size=".1 .05 .02" pos=".03 0 0"/></body>
  </worldbody>
</mujoco>
"""


@pytest.fixture(scope="module")
def arm() -> tuple[mujoco.MjSpec, mujoco.MjModel]:
    spec = mujoco.MjSpec.from_string(ARM_XML)
    return spec, spec.compile()


def _via_spec(spec: mujoco.MjSpec, *params: Parameter) -> mujoco.MjModel:
    work = spec.copy()
    for p in params:
        p.modifier(work, p)
    return work.compile()


def _via_model(model: mujoco.MjModel, *params: Parameter) -> mujoco.MjModel:
    fast = copy.copy(model)
    for p in params:
        assert p.model_modifier is not None
        p.model_modifier(fast, p)
    mujoco.mj_setConst(fast, mujoco.MjData(fast))
    return fast


def _rollout(model: mujoco.MjModel, nstep: int = 100) -> np.ndarray:
    data = mujoco.MjData(model)
    data.qvel[:] = np.linspace(-1.0, 1.5, model.nv)
    out = np.empty((nstep, model.nq + model.nv))
    for k in range(nstep):
        mujoco.mj_step(model, data)
        out[k, : model.nq] = data.qpos
        out[k, model.nq :] = data.qvel
    return out


def _assert_same_inertial(a: mujoco.MjModel, b: mujoco.MjModel, body: str, tol: float = 1e-12):
    ma, ca, ia = full_inertia_from_model(a, body)
    mb, cb, ib = full_inertia_from_model(b, body)
    assert ma == pytest.approx(mb, rel=tol)
    np.testing.assert_allclose(ca, cb, rtol=0, atol=tol)
    np.testing.assert_allclose(ia, ib, rtol=0, atol=tol * np.abs(ib).max())


def _principal_ok(inertia: np.ndarray, tol: float = 1e-10) -> None:
    lam = np.linalg.eigvalsh(inertia)
    scale = lam.max()
    assert lam.min() > 0
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        assert lam[j] + lam[k] >= lam[i] - tol * scale


# -- nominal values --------------------------------------------------------------------------------
def test_full_inertia_of_rotated_box_matches_analytic(arm):
    _, model = arm
    m, c, inertia = full_inertia_from_model(model, "box")
    a, b, h = 0.1, 0.2, 0.3
    assert m == pytest.approx(1000.0 * 8 * a * b * h)
    np.testing.assert_allclose(c, [0.0, 0.1, 0.0], atol=1e-12)
    quat = np.empty(4)
    mujoco.mju_euler2Quat(quat, np.deg2rad([10.0, 20.0, 30.0]), "xyz")
    rot = np.empty(9)
    mujoco.mju_quat2Mat(rot, quat)
    rot = rot.reshape(3, 3)
    principal = m / 3.0 * np.array([b * b + h * h, a * a + h * h, a * a + b * b])
    np.testing.assert_allclose(inertia, rot @ np.diag(principal) @ rot.T, atol=1e-12)


@pytest.mark.parametrize("body", BODIES)
def test_nominal_theta_reproduces_model(arm, body):
    spec, model = arm
    p = body_inertia_param(spec, model, body, InertiaType.Pseudo)
    m, c, inertia = inertial_from_theta(p.nominal)
    m0, c0, i0 = full_inertia_from_model(model, body)
    assert m == pytest.approx(m0, rel=1e-12)
    np.testing.assert_allclose(c, c0, atol=1e-12)
    np.testing.assert_allclose(inertia, i0, atol=1e-12 * np.abs(i0).max())
    assert np.all(p.min_value < p.nominal) and np.all(p.nominal < p.max_value)


@pytest.mark.parametrize("body", BODIES)
@pytest.mark.parametrize("kind", list(InertiaType))
def test_nominal_value_through_modifier_keeps_the_body(arm, body, kind):
    spec, model = arm
    p = body_inertia_param(spec, model, body, kind)
    _assert_same_inertial(_via_spec(spec, p), model, body, tol=1e-10)


def test_default_names_meta_and_bounds(arm):
    spec, model = arm
    m0 = float(model.body_mass[model.body("cap").id])
    mass = body_inertia_param(spec, model, "cap")
    assert mass.name == "cap_mass" and mass.size == 1
    np.testing.assert_allclose([mass.min_value[0], mass.max_value[0]], [0.1 * m0, 10.0 * m0])
    ipos = body_inertia_param(spec, model, "cap", InertiaType.MassIpos, com_bounds=[0.1, 0.2, 0.3])
    assert ipos.name == "cap_mass_ipos" and ipos.size == 4
    np.testing.assert_allclose(ipos.max_value[1:] - ipos.nominal[1:], [0.1, 0.2, 0.3])
    pseudo = body_inertia_param(spec, model, "cap", "Pseudo", param_name="arm")
    assert pseudo.name == "arm" and pseudo.size == 10
    assert pseudo.meta["kind"] == "body_pseudo_inertia" and pseudo.meta["target"] == "cap"
    assert ipos.meta["kind"] == "body_mass_ipos" and mass.meta["kind"] == "body_mass"
    # theta bounds reproduce the mass range and the com box.
    assert math.exp(2 * pseudo.min_value[0]) == pytest.approx(0.1 * m0)
    assert math.exp(2 * pseudo.max_value[0]) == pytest.approx(10.0 * m0)
    np.testing.assert_allclose(pseudo.max_value[7:] - pseudo.nominal[7:], 0.05)
    for key, value in mass.meta.items():
        assert isinstance(value, (str, bool, float, list)), key


# -- spec path vs compiled-model fast path --------------------------------------------------------
@pytest.mark.parametrize("kind", list(InertiaType))
def test_fast_path_matches_recompile(arm, kind):
    spec, model = arm
    rng = np.random.default_rng(7)
    params = [body_inertia_param(spec, model, b, kind) for b in BODIES]
    for p in params:
        p.value = rng.uniform(p.min_value, p.max_value)
    slow, fast = _via_spec(spec, *params), _via_model(model, *params)
    for body in BODIES:
        i = model.body(body).id
        assert fast.body_mass[i] == pytest.approx(slow.body_mass[i], rel=1e-14)
        np.testing.assert_allclose(fast.body_ipos[i], slow.body_ipos[i], atol=1e-14)
        _assert_same_inertial(slow, fast, body)
    np.testing.assert_array_equal(fast.body_sameframe, slow.body_sameframe)
    np.testing.assert_array_equal(fast.geom_sameframe, slow.geom_sameframe)
    np.testing.assert_array_equal(fast.site_sameframe, slow.site_sameframe)
    np.testing.assert_allclose(fast.body_subtreemass, slow.body_subtreemass, rtol=1e-13)
    np.testing.assert_allclose(_rollout(fast), _rollout(slow), rtol=0, atol=1e-10)
    # and the values did change the physics
    assert np.abs(_rollout(slow) - _rollout(model)).max() > 1e-6


def test_offset_com_moves_a_geom_on_the_inertial_frame(arm):
    """The rotated box's geom sits on the inertial frame (geom_sameframe INERTIA): moving the COM
    must not drag the geom along in the fast path."""
    spec, model = arm
    g = model.body("box").geomadr[0]
    assert model.geom_sameframe[g] == mujoco.mjtSameFrame.mjSAMEFRAME_INERTIA
    p = body_inertia_param(spec, model, "box", InertiaType.MassIpos)
    p.value = p.nominal + np.array([0.0, 0.03, -0.02, 0.01])
    fast, slow = _via_model(model, p), _via_spec(spec, p)
    same = mujoco.mjtSameFrame.mjSAMEFRAME_INERTIAROT  # same axes, shifted origin
    assert fast.geom_sameframe[g] == slow.geom_sameframe[g] == same
    df, ds = mujoco.MjData(fast), mujoco.MjData(slow)
    mujoco.mj_forward(fast, df)
    mujoco.mj_forward(slow, ds)
    np.testing.assert_allclose(df.geom_xpos, ds.geom_xpos, atol=1e-14)
    np.testing.assert_allclose(df.xipos, ds.xipos, atol=1e-14)


def test_simple_body_has_no_fast_path_for_moving_com(arm):
    spec, model = arm
    ball = model.body("ball").id
    assert model.body_simple[ball]
    for kind in (InertiaType.MassIpos, InertiaType.Pseudo):
        p = body_inertia_param(spec, model, "ball", kind)
        assert p.model_modifier is None and p.meta["fast_path"] is False
    p = body_inertia_param(spec, model, "ball", InertiaType.Mass)
    p.value = [3.0 * p.nominal[0]]
    slow, fast = _via_spec(spec, p), _via_model(model, p)
    _assert_same_inertial(slow, fast, "ball")
    np.testing.assert_allclose(_rollout(fast), _rollout(slow), rtol=0, atol=1e-10)


def test_compiler_mass_and_inertia_bounds_are_applied_in_both_paths():
    spec = mujoco.MjSpec.from_string(ARM_XML)
    spec.compiler.boundmass = 0.5
    spec.compiler.boundinertia = 1e-3
    model = spec.compile()
    p = body_inertia_param(spec, model, "diag", InertiaType.Mass, mass_bounds=(0.01, 2.0))
    p.value = [0.02]  # below boundmass; scaled inertia below boundinertia
    slow, fast = _via_spec(spec, p), _via_model(model, p)
    i = model.body("diag").id
    assert slow.body_mass[i] == fast.body_mass[i] == 0.5
    np.testing.assert_allclose(fast.body_inertia[i], slow.body_inertia[i], rtol=1e-15)
    assert np.all(slow.body_inertia[i] == 1e-3)


@pytest.mark.parametrize("fast", [False, True])
@pytest.mark.parametrize("scale", [True, False])
def test_doubling_mass_scales_or_keeps_rotational_inertia(arm, fast, scale):
    spec, model = arm
    for kind in (InertiaType.Mass, InertiaType.MassIpos):
        p = body_inertia_param(spec, model, "full", kind, scale_rot_inertia=scale)
        p.value = np.concatenate([[2.0 * p.nominal[0]], p.nominal[1:]])
        out = _via_model(model, p) if fast else _via_spec(spec, p)
        m0, c0, i0 = full_inertia_from_model(model, "full")
        m, c, inertia = full_inertia_from_model(out, "full")
        assert m == pytest.approx(2.0 * m0)
        np.testing.assert_allclose(c, c0, atol=1e-14)
        np.testing.assert_allclose(inertia, (2.0 if scale else 1.0) * i0, atol=1e-13)


def test_modifiers_never_compile(arm):
    spec, model = arm
    broken = spec.copy()
    broken.worldbody.add_geom(type=mujoco.mjtGeom.mjGEOM_MESH, meshname="no_such_mesh")
    with pytest.raises(ValueError):
        broken.copy().compile()
    for kind in InertiaType:
        p = body_inertia_param(spec, model, "box", kind)
        p.modifier(broken, p)  # would raise if it compiled to read current values
        apply_body_inertia(broken, "cap", p)


def test_spec_fields_written(arm):
    spec, model = arm
    p = body_inertia_param(spec, model, "full", InertiaType.Pseudo)
    work = spec.copy()
    apply_body_inertia(work, "full", p)
    body = work.body("full")
    assert body.explicitinertial
    assert np.all(np.isfinite(body.iquat))
    assert np.isnan(body.fullinertia[0])  # unset: diagonal + iquat rule
    assert body.ialt.type == mujoco.mjtOrientation.mjORIENTATION_QUAT


# -- pure maths ------------------------------------------------------------------------------------
def test_pseudo_inertia_definition_and_inverse():
    m, c = 2.0, np.array([0.1, -0.2, 0.3])
    i_c = np.array([[0.3, 0.01, 0.02], [0.01, 0.2, 0.03], [0.02, 0.03, 0.25]])
    j = pseudo_inertia_from_inertial(m, c, i_c)
    i_origin = i_c + m * (c @ c * np.eye(3) - np.outer(c, c))
    np.testing.assert_allclose(j[:3, :3], 0.5 * np.trace(i_origin) * np.eye(3) - i_origin)
    np.testing.assert_allclose(j[:3, 3], m * c)
    assert j[3, 3] == m
    np.testing.assert_allclose(pseudo_inertia_from_inertial(m, c, i_origin, about="origin"), j)
    m2, c2, i2 = inertial_from_pseudo_inertia(j)
    assert m2 == pytest.approx(m)
    np.testing.assert_allclose(c2, c)
    np.testing.assert_allclose(i2, i_c, atol=1e-15)
    # J = U U^T with the documented upper-triangular U
    theta = theta_from_pseudo_inertia(j)
    a = math.exp(theta[0])
    u = a * np.array(
        [
            [math.exp(theta[1]), theta[4], theta[6], theta[7]],
            [0, math.exp(theta[2]), theta[5], theta[8]],
            [0, 0, math.exp(theta[3]), theta[9]],
            [0, 0, 0, 1],
        ]
    )
    np.testing.assert_allclose(u @ u.T, j, atol=1e-14)
    np.testing.assert_allclose(theta[7:], c, atol=1e-14)
    assert math.exp(2 * theta[0]) == pytest.approx(m)


def test_inconsistent_inertia_is_rejected():
    with pytest.raises(ValueError, match="must be positive definite"):
        theta_from_inertial(1.0, np.zeros(3), np.diag([1.0, 1.0, 3.0]))  # 1 + 1 < 3
    with pytest.raises(ValueError, match="mass must be a finite number > 0"):
        theta_from_inertial(0.0, np.zeros(3), np.eye(3))
    with pytest.raises(ValueError, match=r"theta must be a finite array of shape \(10,\)"):
        pseudo_inertia_from_theta(np.zeros(9))


_THETA = arrays(np.float64, 10, elements=st.floats(-3.0, 3.0))
_THETA_RT = arrays(np.float64, 10, elements=st.floats(-2.0, 2.0))


@settings(max_examples=60, deadline=None)
@given(theta=_THETA)
def test_any_theta_is_physically_consistent_and_compiles(theta):
    m, c, inertia = inertial_from_theta(theta)
    assert m > 0 and np.all(np.isfinite(c))
    _principal_ok(inertia)
    assert np.all(np.linalg.eigvalsh(pseudo_inertia_from_theta(theta)) > 0)
    m2, c2, i2 = inertial_from_pseudo_inertia(pseudo_inertia_from_theta(theta))
    assert m2 == pytest.approx(m, rel=1e-12)
    np.testing.assert_allclose(c2, c, atol=1e-12)
    _principal_ok(i2, tol=1e-6)  # the J route loses digits to cancellation; still consistent
    spec = mujoco.MjSpec.from_string(ONE_BODY_XML)
    p = body_inertia_param(spec, spec.compile(), "b", InertiaType.Pseudo)
    p.value = theta
    model = _via_spec(spec, p)  # MuJoCo accepts it
    mb, cb, ib = full_inertia_from_model(model, "b")
    assert mb == pytest.approx(m, rel=1e-12)
    np.testing.assert_allclose(cb, c, atol=1e-14)
    np.testing.assert_allclose(ib, inertia, atol=1e-12 * np.abs(inertia).max())


@settings(max_examples=200, deadline=None)
@given(theta=_THETA_RT)
def test_theta_round_trip(theta):
    tol = 1e-9 * (1 + np.abs(theta))
    back = theta_from_pseudo_inertia(pseudo_inertia_from_theta(theta))
    assert np.all(np.abs(back - theta) <= tol), back - theta
    back = theta_from_inertial(*inertial_from_theta(theta))
    assert np.all(np.abs(back - theta) <= tol), back - theta


@settings(max_examples=200, deadline=None)
@given(
    mass=st.floats(1e-2, 1e2),
    com=arrays(np.float64, 3, elements=st.floats(-1.0, 1.0)),
    sigma=arrays(np.float64, 3, elements=st.floats(1e-3, 1.0)),
    quat=arrays(np.float64, 4, elements=st.floats(-1.0, 1.0)).filter(
        lambda q: np.linalg.norm(q) > 0.1
    ),
)
def test_inertial_round_trip(mass, com, sigma, quat):
    rot = np.empty(9)
    mujoco.mju_quat2Mat(rot, quat / np.linalg.norm(quat))
    rot = rot.reshape(3, 3)
    # principal moments I_i = m (σ_j + σ_k): any physically consistent body
    principal = mass * np.array([sigma[1] + sigma[2], sigma[0] + sigma[2], sigma[0] + sigma[1]])
    i_c = rot @ np.diag(principal) @ rot.T
    for theta in (
        theta_from_inertial(mass, com, i_c),
        theta_from_pseudo_inertia(pseudo_inertia_from_inertial(mass, com, i_c)),
    ):
        m, c, inertia = inertial_from_theta(theta)
        assert m == pytest.approx(mass, rel=1e-12)
        np.testing.assert_allclose(c, com, atol=1e-12)
        np.testing.assert_allclose(inertia, i_c, atol=1e-10 * np.abs(i_c).max())


# -- errors ----------------------------------------------------------------------------------------
def test_unknown_body_names_it_and_lists_known(arm):
    spec, model = arm
    with pytest.raises(KeyError, match=r"no body named 'nope'; known: \[.*'diag'.*'cap'"):
        body_inertia_param(spec, model, "nope")


def test_spec_where_model_expected(arm):
    spec, _ = arm
    with pytest.raises(
        TypeError,
        match=r"model must be a compiled mujoco\.MjModel, got 'MjSpec'\. "
        r"did you pass an MjSpec",
    ):
        body_inertia_param(spec, spec, "diag")
    with pytest.raises(TypeError, match=r"model must be a compiled mujoco\.MjModel"):
        full_inertia_from_model(spec, "diag")


def test_model_where_spec_expected(arm):
    _, model = arm
    with pytest.raises(
        TypeError,
        match=r"spec must be a mujoco\.MjSpec, got 'MjModel'\. did you "
        r"swap spec and model",
    ):
        body_inertia_param(model, model, "diag")


def test_world_body_is_not_identifiable(arm):
    spec, model = arm
    with pytest.raises(
        ValueError,
        match=r"body_name must be a moving body, got 'world'.*"
        r"not identifiable.*'diag'",
    ):
        body_inertia_param(spec, model, "world", InertiaType.Pseudo)


def test_wrong_size_parameter_for_apply(arm):
    spec, model = arm
    good = body_inertia_param(spec, model, "cap", InertiaType.MassIpos)
    bad = Parameter("cap_mass_ipos", [1.0, 0.0, 0.0], [0.0] * 3, [2.0] * 3, meta=good.meta)
    with pytest.raises(
        ValueError,
        match="parameter 'cap_mass_ipos': value must have length 4 for "
        "kind 'body_mass_ipos', got length 3",
    ):
        apply_body_inertia(spec.copy(), "cap", bad)
    plain = Parameter("x", 1.0, 0.0, 2.0)
    with pytest.raises(ValueError, match=r"meta\['kind'\] must be one of"):
        apply_body_inertia(spec.copy(), "cap", plain)


def test_bad_options(arm):
    spec, model = arm
    with pytest.raises(ValueError, match="mass_bounds must be factors"):
        body_inertia_param(spec, model, "cap", mass_bounds=(2.0, 3.0))
    with pytest.raises(ValueError, match="com_bounds must be"):
        body_inertia_param(spec, model, "cap", InertiaType.MassIpos, com_bounds=[0.1, 0.2])
    with pytest.raises(ValueError, match="pseudo_bounds must be a finite factor > 1"):
        body_inertia_param(spec, model, "cap", InertiaType.Pseudo, pseudo_bounds=1.0)
    with pytest.raises(TypeError, match="inertia_type must be an InertiaType"):
        body_inertia_param(spec, model, "cap", "mass")
    other = mujoco.MjSpec.from_string(ARM_XML)
    other.compiler.settotalmass = 10.0
    with pytest.warns(UserWarning, match="settotalmass"):  # deprecated in mujoco 4.0
        rescaled = other.compile()
    with pytest.raises(ValueError, match="settotalmass must be <= 0"):
        body_inertia_param(other, rescaled, "cap")


# -- files -----------------------------------------------------------------------------------------
def test_yaml_round_trip_rebinds_modifiers(arm, tmp_path):
    spec, model = arm
    params = ParameterDict(
        [
            body_inertia_param(spec, model, "diag", InertiaType.Mass, scale_rot_inertia=False),
            body_inertia_param(spec, model, "box", InertiaType.MassIpos),
            body_inertia_param(spec, model, "full", InertiaType.Pseudo),
            body_inertia_param(spec, model, "ball", InertiaType.Pseudo),
        ]
    )
    params.randomize(np.random.default_rng(3))
    path = tmp_path / "params.yaml"
    params.save_to_disk(path)
    loaded = ParameterDict.load_from_disk(path)
    assert list(loaded) == list(params)
    for name in params:
        assert loaded[name].meta == params[name].meta
        np.testing.assert_array_equal(loaded[name].value, params[name].value)
        assert loaded[name].modifier is not None
        assert (loaded[name].model_modifier is None) == (params[name].model_modifier is None)
    a = _via_spec(spec, *params.values())
    b = _via_spec(spec, *loaded.values())
    for body in ("diag", "box", "full", "ball"):
        _assert_same_inertial(a, b, body, tol=0.0)
    fast = [p for p in loaded.values() if p.model_modifier is not None]
    _assert_same_inertial(a, _via_model(model, *fast), "box")


def test_pseudo_model_writes_remembered_by_value_equal_fresh_ones(arm):
    """A Pseudo parameter remembers the inertial of the values it wrote (a Jacobian writes
    a body's base value into every other column): a value written again, after others, gives
    the model exactly what a fresh parameter writes, and never a stale value."""
    spec, model = arm
    rng = np.random.default_rng(3)
    p = body_inertia_param(spec, model, "diag", InertiaType.Pseudo)
    values = [rng.uniform(p.min_value, p.max_value) for _ in range(3)]
    fields = ("body_mass", "body_inertia", "body_ipos", "body_iquat", "geom_sameframe")
    for v in [*values, values[0], values[2], values[1]]:
        p.value = v
        cached = copy.copy(model)
        p.model_modifier(cached, p)
        fresh_p = body_inertia_param(spec, model, "diag", InertiaType.Pseudo)
        fresh_p.value = v
        fresh = copy.copy(model)
        fresh_p.model_modifier(fresh, fresh_p)
        for f in fields:
            np.testing.assert_array_equal(getattr(cached, f), getattr(fresh, f), err_msg=f)
