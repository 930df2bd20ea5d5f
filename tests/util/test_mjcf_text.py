"""spec_xml: the MJCF text of a spec with every number in full (MuJoCo's writer keeps 6
significant digits)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from mjsysid.app.experiment import bundled_examples
from mjsysid.util.mjcf_text import spec_xml

FIELDS = (
    "body_pos", "body_quat", "body_mass", "body_ipos", "body_iquat", "body_inertia",
    "geom_size", "geom_pos", "geom_quat", "dof_damping", "dof_armature", "dof_frictionloss",
    "jnt_range", "actuator_gear", "actuator_gainprm", "actuator_biasprm", "actuator_dynprm",
)  # fmt: skip

MOTOR = """
<mujoco>
  <default><joint damping="0.123456789"/><geom rgba="0.1 0.2 0.3 1"/></default>
  <worldbody>
    <body name="rotor" pos="0.1234567891 0 0">
      <joint name="j" type="hinge" axis="0 0 1" frictionloss="0.0123456789"/>
      <geom type="cylinder" size="0.05 0.02" mass="0.5123456789"/>
      <body><joint type="hinge"/><geom size="0.0111111111" pos="0 0 0.2"/></body>
    </body>
  </worldbody>
  <actuator>
    <dcmotor name="m" joint="j" motorconst="0.0512345678" resistance="2.123456789"
             inductance="0 0.004123456"/>
    <motor joint="j" gear="3.14159265358979"/>
  </actuator>
</mujoco>"""


def _furuta() -> mujoco.MjSpec:
    spec = mujoco.MjSpec.from_file(str(bundled_examples()["furuta"].parent / "furuta.xml"))
    spec.joints[1].damping[0] = 0.00011898472303376552  # an identified value
    spec.actuators[0].gear[0] = 0.4202123456789
    return spec


def _differences(spec: mujoco.MjSpec, text: str) -> dict[str, float]:
    model, other = spec.compile(), mujoco.MjModel.from_xml_string(text)
    out = {
        f: float(np.max(np.abs(getattr(model, f) - getattr(other, f)), initial=0.0)) for f in FIELDS
    }
    return {f: d for f, d in out.items() if d > 0.0}


@pytest.mark.parametrize("make", [_furuta, lambda: mujoco.MjSpec.from_string(MOTOR)])
def test_the_text_compiles_to_the_same_model_bit_for_bit(make):
    spec = make()
    spec.compile()
    assert _differences(spec, spec.to_xml())  # MuJoCo's own text rounds (this test can fail)
    assert _differences(spec, spec_xml(spec)) == {}


def test_what_has_no_double_behind_it_stays_as_written():
    spec = mujoco.MjSpec.from_string(MOTOR)
    text = spec_xml(spec)
    assert 'rgba="0.1 0.2 0.3 1"' in text  # float32 colours: not widened to 0.10000000149
    assert 'damping="0.123456789"' in text  # a defaults class, in full too
    assert 'frictionloss="0.0123456789"' in text and 'mass="0.5123456789"' in text


def test_the_furuta_comment_and_structure_survive():
    spec = _furuta()
    text = spec_xml(spec)
    assert "A rotary (Furuta) pendulum" in text
    again = mujoco.MjSpec.from_string(text)
    assert [b.name for b in again.bodies] == [b.name for b in spec.bodies]
    assert spec_xml(again) == text  # a fixed point


@pytest.mark.parametrize("name", sorted(bundled_examples()))
def test_every_bundled_model_reads_back_as_it_was(name):
    from mjsysid.app.experiment import load_experiment

    spec = load_experiment(bundled_examples()[name]).spec
    assert max(_differences(spec, spec_xml(spec)).values(), default=0.0) < 1e-15  # round-off
