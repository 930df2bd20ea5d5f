"""joint_ref: an encoder's offset, identified natively (the joint's ref, qpos0)."""

from __future__ import annotations

import mujoco
import numpy as np

import mjsysid as ms
from mjsysid.params.kinds import ALL_KINDS
from mjsysid.sim.lockstep import reference_rollout

PENDULUM = """
<mujoco>
  <compiler angle="radian"/>
  <option timestep="0.005"/>
  <worldbody>
    <body name="arm">
      <joint name="j" type="hinge" axis="0 1 0" damping="0.02" ref="{ref}"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.01" mass="0.5"/>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="j" gear="1"/></actuator>
  <sensor><jointpos name="angle" joint="j"/></sensor>
</mujoco>
"""


def test_an_encoder_offset_is_recovered_as_the_joints_ref():
    truth = mujoco.MjModel.from_xml_string(PENDULUM.format(ref=0.05))
    t = np.arange(600) * truth.opt.timestep
    u = (0.3 * np.sin(2 * np.pi * 0.7 * t))[:, None]
    x0 = ms.create_initial_state(truth, np.array([0.3]), np.zeros(1))
    control = ms.TimeSeries.from_control_names(t, u, truth)
    _, sensordata = reference_rollout(truth, x0, u, [], [])  # row k: the state at t_k
    spec = mujoco.MjSpec.from_string(PENDULUM.format(ref=0.0))
    sensors = ms.TimeSeries.from_names(t, sensordata, spec.compile())
    seqs = ms.ModelSequences("p", spec, "run", x0, control, sensors)
    params = ms.ParameterDict([ms.make_parameter("joint_ref", spec.compile(), "j")])
    fitted, _ = ms.optimize(params, ms.build_residual_fn([seqs]))
    np.testing.assert_allclose(fitted.as_vector(), [0.05], atol=1e-6)
    assert "joint_ref" in ALL_KINDS  # an experiment file may name it
