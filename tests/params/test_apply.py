"""Model edits: apply_param_modifiers, PD gains, remove_visuals."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import ARM2, SERVO


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
