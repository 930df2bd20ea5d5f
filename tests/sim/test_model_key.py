"""Models differing only in actuator dynamics share ``MjModel.signature`` but not ``MjData``."""

import mujoco
import numpy as np

from mjsysid.data.states import state_size
from mjsysid.sim.model_key import model_key
from mjsysid.sim.rollout import BatchRollout

_XML = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.02" mass="0.3"/>
    </body>
  </worldbody>
  <actuator>
    <general name="motor" joint="hinge" {dyn} gainprm="0.5"/>
  </actuator>
  <sensor><jointpos joint="hinge"/><jointvel joint="hinge"/></sensor>
</mujoco>
"""


def _plain_loop(model, control):
    """Reference: one MjData stepped by hand, sensors read before each step."""
    data = mujoco.MjData(model)
    out = []
    for u in control:
        data.ctrl[:] = u
        mujoco.mj_forward(model, data)
        out.append(data.sensordata.copy())
        mujoco.mj_step(model, data)
    return np.array(out)


def test_filtered_and_direct_models_keep_their_own_data():
    direct = mujoco.MjModel.from_xml_string(_XML.format(dyn=""))
    filtered = mujoco.MjModel.from_xml_string(_XML.format(dyn='dyntype="filter" dynprm="0.05"'))
    assert direct.na == 0 and filtered.na == 1
    assert model_key(direct) != model_key(filtered)

    control = np.sin(np.linspace(0.0, 6.0, 200))[:, None]
    rollout = BatchRollout(nthread=1)
    for model in (direct, filtered, direct, filtered):
        x0 = np.zeros((1, state_size(model)))
        mujoco.mj_getState(model, mujoco.MjData(model), x0[0], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        _, sensors, ok = rollout.run([model], x0, control[None])
        assert ok.all()
        np.testing.assert_allclose(sensors[0], _plain_loop(model, control), atol=1e-12)
