"""``force_laws[i].estimate_states``: the starts of a law's internal state estimated in every
shooting window, from the experiment file alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mjsysid.app.experiment import ExperimentError, load_experiment

MODEL = """
<mujoco model="geared">
  <option timestep="0.005"/>
  <worldbody>
    <body name="arm">
      <joint name="j" type="hinge" axis="0 0 1" armature="0.003"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 0" size="0.01" mass="0.05"/>
    </body>
  </worldbody>
  <actuator><general name="m" joint="j" gear="0" ctrlrange="-1 1" ctrllimited="true"/></actuator>
  <sensor><jointpos name="angle" joint="j"/></sensor>
</mujoco>
"""

EXPERIMENT = """
schema_version: 1
model: geared.xml
sequences:
  - {{name: run, file: run.csv}}
force_laws:
  - law: robot_yaml_motor
    name: motor
    joint: j
    actuator: m
    nominal: {{gear: [0.4, 0.4], deadzone: [0.1, 0.1], damping: [0.001, 0.001],
              frictionloss: [0.01, 0.01], viscous_quadratic: [0.0], back_emf_gain: [0.0]}}
    estimate_states: {states}
parameters: [{{kind: joint_armature, target: j}}]
shooting: {{window: 0.5}}
"""


def write_geared_experiment(tmp_path: Path, states: str) -> Path:
    """A 2 s recording of a geared arm and an experiment whose motor law estimates
    ``states`` (its ``estimate_states``) in 0.5 s windows; the experiment file's path."""
    t = np.arange(400) * 0.005
    u = np.round(0.6 * np.sign(np.sin(2 * np.pi * 1.7 * t + 0.3)), 3)
    angle = 0.1 * np.sin(t)
    rows = "\n".join(f"{a:.3f},{b},{c:.6f}" for a, b, c in zip(t, u, angle, strict=True))
    (tmp_path / "run.csv").write_text("time,ctrl.m,angle\n" + rows + "\n")
    (tmp_path / "geared.xml").write_text(MODEL)
    path = tmp_path / "experiment.yaml"
    path.write_text(EXPERIMENT.format(states=states))
    return path


def test_each_window_gets_the_start_of_the_laws_state(tmp_path):
    exp = load_experiment(write_geared_experiment(tmp_path, "{held: 0.5}"))
    starts = [p for p in exp.params.values() if p.meta.get("kind") == "initial_law_state"]
    assert [p.name for p in starts] == [f"experiment/run#{k}/motor.held0" for k in range(4)]
    for k, p in enumerate(starts):
        # nominal: the held command as the law computes it at the window's start (the
        # command row there through the deadzone), bounds +-0.5
        u = 0.6 * np.sign(np.sin(2 * np.pi * 1.7 * 0.5 * k + 0.3))
        assert p.value[0] == pytest.approx(u, abs=1e-12)
        assert (p.min_value[0], p.max_value[0]) == pytest.approx((u - 0.5, u + 0.5))
        assert p.meta == {
            "kind": "initial_law_state", "target": f"experiment/run#{k}", "law": "motor",
            "state": "held",
        }  # fmt: skip
    # the residual sees them: the window's simulation starts from the given held command
    rf = exp.build_residual_fn()
    x = exp.params.as_vector()
    moved = x.copy()
    moved[list(exp.params).index("experiment/run#2/motor.held0")] += 0.3
    diff = (rf(moved, exp.params) - rf(x, exp.params)).reshape(-1)
    assert np.count_nonzero(diff) > 0


def test_an_unknown_state_is_named(tmp_path):
    with pytest.raises(
        ExperimentError,
        match=r"estimate_states: .*'motor' has no state 'current'; its states: \['held'\]",
    ):
        load_experiment(write_geared_experiment(tmp_path, "{current: 0.5}"))
    with pytest.raises(ExperimentError, match="estimate_states"):
        load_experiment(write_geared_experiment(tmp_path, "{held: -1}"))
