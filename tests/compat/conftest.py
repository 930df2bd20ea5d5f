"""Tiny models for the mujoco.sysid drop-in tests (issue #16).

Every expected value in ``tests/compat`` was obtained by running the same call on
``mujoco.sysid`` (the peer) outside the repository; the tests hard-code them and never import
the peer. A test marked ``xfail(strict=True)`` is a gap that is not implemented yet: it fails
as soon as the gap is closed, and the implementer then removes the mark.
"""

from __future__ import annotations

import mujoco
import pytest

#: Free (unnamed, body "fb"), ball, hinge and slide joints; three actuators (one with
#: activation dynamics); sensors of widths 1, 1, 4.
JOINTS = """
<mujoco><option timestep="0.01"/><worldbody>
<body name="fb"><freejoint/><geom size="0.1" mass="1"/></body>
<body name="bb" pos="1 0 0"><joint name="ball" type="ball"/><geom size="0.1" mass="1"/>
 <body name="hb" pos="0 0 -0.3"><joint name="hinge" type="hinge" axis="0 1 0"/>
  <geom size="0.05" mass="0.5"/>
  <body name="sb" pos="0 0 -0.2"><joint name="slide" type="slide" axis="1 0 0"/>
   <geom size="0.05" mass="0.2"/></body></body></body>
</worldbody>
<actuator><position name="servo" joint="hinge" kp="5" kv="0.5"/><motor name="push" joint="slide"/>
<general name="filt" joint="hinge" dyntype="filter" dynprm="0.1"/></actuator>
<sensor><jointpos name="hpos" joint="hinge"/><jointvel name="svel" joint="slide"/>
<framequat name="fq" objtype="body" objname="fb"/></sensor></mujoco>
"""

#: One damped pendulum on a position servo; sensors hpos, hvel (joint) and af (force).
PENDULUM = """
<mujoco><option timestep="0.01"/><worldbody>
<body name="hb"><joint name="hinge" type="hinge" axis="0 1 0" damping="0.1"/>
<geom size="0.05" mass="0.5" pos="0 0 -0.2"/></body></worldbody>
<actuator><position name="servo" joint="hinge" kp="5" kv="0.5"/></actuator>
<sensor><jointpos name="hpos" joint="hinge"/><jointvel name="hvel" joint="hinge"/>
<actuatorfrc name="af" actuator="servo"/></sensor></mujoco>
"""


@pytest.fixture
def joints_model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(JOINTS)


@pytest.fixture
def pendulum_spec() -> mujoco.MjSpec:
    return mujoco.MjSpec.from_string(PENDULUM)


@pytest.fixture
def pendulum(pendulum_spec: mujoco.MjSpec) -> mujoco.MjModel:
    return pendulum_spec.compile()
