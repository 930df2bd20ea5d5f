"""Bad inputs to the parameter kinds (make_parameter, body_inertia_param): unknown element
names and bounds fail early with a clear message."""

from __future__ import annotations

import mjsysid as ms
from bad_inputs_support import (
    _case,
    table_test,
)

CASES = [
    # ---- parameter kinds: unknown element names ----------------------------------------------
    _case(
        "kind-unknown",
        lambda c: ms.make_parameter("joint_dampin", c.model, "j1"),
        ValueError,
        r"kind must be one of \['actuator_armature', .*\], got 'joint_dampin'",
    ),
    _case(
        "kind-unknown-joint",
        lambda c: ms.make_parameter("joint_damping", c.model, "j9"),
        KeyError,
        r"the model has no joint named 'j9'; known: \['j1', 'j2'\]",
    ),
    _case(
        "kind-unknown-actuator",
        lambda c: ms.make_parameter("actuator_gear", c.model, "m9"),
        KeyError,
        r"the model has no actuator named 'm9'; known: \['m1', 'm2'\]",
    ),
    _case(
        "kind-unknown-geom",
        lambda c: ms.make_parameter("geom_friction", c.model, "g9"),
        KeyError,
        r"the model has no geom named 'g9'; known: \['g1', 'g2'\]",
    ),
    _case(
        "kind-unknown-pair",
        lambda c: ms.make_parameter("pair_friction", c.box_model, "wall"),
        KeyError,
        r"the model has no pair named 'wall'; known: \['box_floor'\]",
    ),
    _case(
        "kind-unknown-body",
        lambda c: ms.body_inertia_param(c.spec, c.model, "link9"),
        KeyError,
        r"the model has no body named 'link9'; known: \['world', 'link1', 'link2'\]",
    ),
    _case(
        "kind-world-body",
        lambda c: ms.body_inertia_param(c.spec, c.model, "world"),
        ValueError,
        r"body_name must be a moving body, got 'world'.*moving bodies: "
        r"\['link1', 'link2'\]",
    ),
    _case(
        "kind-kp-of-a-motor",
        lambda c: ms.make_parameter("actuator_kp", c.model, "m1"),
        ValueError,
        r"actuator 'm1' must be a position-type actuator \(fixed gain, affine "
        r"bias\) to have kp/kv gains, got a different gain/bias type",
    ),
    _case(
        "kind-model-is-spec",
        lambda c: ms.make_parameter("joint_damping", c.spec, "j1"),
        TypeError,
        r"model must be a compiled mujoco.MjModel, got 'MjSpec'",
    ),
    _case(
        "kind-nominal-outside-default-bounds",
        lambda c: ms.make_parameter("joint_damping", c.model, "j1", nominal=-1.0),
        ValueError,
        r"parameter 'j1_damping': nominal must lie within \[min_value, max_value\], "
        r"got nominal\[0\]=-1\.0 outside \[0\.0, 10\.0\]",
    ),
    _case(
        "kind-mass-bounds-inverted",
        lambda c: ms.body_inertia_param(c.spec, c.model, "link1", mass_bounds=(2.0, 0.5)),
        ValueError,
        r"mass_bounds must be factors with 0 < low <= 1 <= high, low < high, got "
        r"\(2\.0, 0\.5\)",
    ),
]


test_bad_input = table_test(CASES)
