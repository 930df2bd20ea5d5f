"""Force laws: what MuJoCo cannot express of actuators and joints, as vectorised steps over a
batch (:mod:`~mjsysid.sim.laws.core`: the protocol; :mod:`~.friction`, :mod:`~.motors`,
:mod:`~.servos`: the library; :mod:`~.runtime`: the runtime a user's simulator calls).

Importing this package registers the library laws (their configs and parameter kinds).
"""

from mjsysid.sim.laws import friction, motors, servos

__all__ = ["friction", "motors", "servos"]
