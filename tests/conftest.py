"""A bank of tiny MJCF models and a synthetic-data maker shared by the tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from mjsysid.data.states import state_slices

ARM2 = """
<mujoco model="arm2">
  <option timestep="0.002"/>
  <worldbody>
    <body name="link1" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.05" armature="0.01"/>
      <geom name="g1" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1.0"/>
      <site name="tip1" pos="0.3 0 0"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.05" armature="0.01"/>
        <geom name="g2" type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.7"/>
        <site name="tip2" pos="0.3 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m1" joint="j1" gear="1"/>
    <motor name="m2" joint="j2" gear="1"/>
  </actuator>
  <sensor>
    <jointpos name="j1_pos" joint="j1"/>
    <jointpos name="j2_pos" joint="j2"/>
    <jointvel name="j1_vel" joint="j1"/>
    <jointvel name="j2_vel" joint="j2"/>
    <framepos name="tip_pos" objtype="site" objname="tip2"/>
    <gyro name="tip_gyro" site="tip2"/>
  </sensor>
</mujoco>
"""

LIT_ARM = """
<mujoco model="arm">
  <option timestep="0.002"/>
  <worldbody>
    <light pos="0 0 3"/>
    <geom type="plane" size="1 1 0.1" rgba=".8 .8 .8 1"/>
    <body name="link1" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1.0"/>
      <body name="link2" pos="0.3 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="0.7"/>
        {tip}
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="m1" joint="j1"/>
    <motor name="m2" joint="j2"/>
  </actuator>
  <sensor>
    {sensors}
  </sensor>
</mujoco>
"""
"""A two-link arm with a light and a floor (for rendering tests): ``LIT_ARM.format(tip=...,
sensors=...)`` with the elements of the tip (a site, or nothing) and of the sensors."""

DC_MOTOR = """
<mujoco model="dcmotor">
  <option timestep="0.002"/>
  <worldbody>
    <body name="rotor">
      <joint name="shaft" type="hinge" axis="0 0 1" damping="0.01"/>
      <geom type="cylinder" size="0.05 0.01" mass="0.3"/>
    </body>
  </worldbody>
  <actuator>
    <general name="motor" joint="shaft" dyntype="filter" dynprm="0.03" gainprm="0.2"
             biastype="affine" biasprm="0 0 -0.005"/>
    <motor name="plain" joint="shaft"/>
  </actuator>
  <sensor><jointpos name="angle" joint="shaft"/><jointvel name="speed" joint="shaft"/></sensor>
</mujoco>
"""

SERVO = """
<mujoco model="servo">
  <option timestep="0.002"/>
  <worldbody>
    <body name="arm" pos="0 0 0">
      <joint name="hinge" type="hinge" axis="0 0 1" damping="0.02" frictionloss="0.01"/>
      <geom type="box" size="0.2 0.02 0.02" pos="0.2 0 0" mass="0.5"/>
    </body>
  </worldbody>
  <actuator>
    <position name="servo" joint="hinge" kp="2.0" kv="0.1"/>
  </actuator>
  <sensor>
    <jointpos name="angle" joint="hinge"/>
    <jointvel name="rate" joint="hinge"/>
  </sensor>
</mujoco>
"""

BOX = """
<mujoco model="box">
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.05">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="y" type="slide" axis="0 1 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom name="box_geom" type="box" size="0.05 0.05 0.05" mass="1.0"/>
    </body>
  </worldbody>
  <contact>
    <pair name="box_floor" geom1="box_geom" geom2="floor" friction="0.5 0.5 0.005 0.0001 0.0001"/>
  </contact>
  <sensor>
    <framepos name="box_pos" objtype="body" objname="box"/>
    <framelinvel name="box_vel" objtype="body" objname="box"/>
  </sensor>
</mujoco>
"""


@dataclass
class Problem:
    """A spec, its nominal model and synthetic data from a known truth."""

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    sequences: ms.ModelSequences


def dc_motor_truth(tau: float, kv: float) -> Callable[[Any, Any], Any]:
    """A ``make_problem`` truth for :data:`DC_MOTOR`: filter time constant and back-EMF."""

    def truth(spec: Any, model: mujoco.MjModel) -> Any:
        d = ms.ParameterDict(
            [
                ms.make_parameter("actuator_filter_tau", model, "motor"),
                ms.make_parameter("actuator_kv", model, "motor"),
            ]
        )
        d.update_from_vector([tau, kv])
        return d

    return truth


def simulate(
    spec: mujoco.MjSpec,
    truth: ms.ParameterDict | None,
    ctrl: np.ndarray,
    x0: np.ndarray,
    names: list | None = None,
    noise: float = 0.0,
    seed: int = 0,
) -> tuple[ms.TimeSeries, ms.TimeSeries]:
    """Synthetic (sensordata, control) series from ``spec`` with ``truth`` applied."""
    model = spec.compile()
    true_model = ms.apply_param_modifiers(truth, spec) if truth is not None else model
    traj = ms.sysid_rollout(true_model, None, ctrl, x0)[0]
    if names is None:
        data = traj.sensordata
    else:
        slices = state_slices(model)
        cols = []
        for name in names:
            canonical, stype = ms.resolve_signal_name(model, name)
            src = ms.signal_source_indices(model, canonical, stype)
            if stype == ms.SignalType.MjSensor:
                cols.append(traj.sensordata[:, src])
            else:
                key = {
                    ms.SignalType.MjStateQPos: "qpos",
                    ms.SignalType.MjStateQVel: "qvel",
                    ms.SignalType.MjStateAct: "act",
                }[stype]
                cols.append(traj.state[:, slices[key].start + src])
        data = np.concatenate(cols, axis=1)
    if noise:
        data = data + noise * np.random.default_rng(seed).standard_normal(data.shape)
    sens = ms.TimeSeries.from_names(traj.times, data, model, names=names)
    control = ms.TimeSeries.from_control_names(traj.times, ctrl, model) if model.nu else None
    return sens, control


def excitation(n: int, nu: int, hold: int = 50, scale: float = 1.0, seed: int = 0) -> np.ndarray:
    """Piecewise-constant random controls, shape (n, nu)."""
    rng = np.random.default_rng(seed)
    steps = -(-n // hold)
    return scale * np.repeat(rng.standard_normal((steps, nu)), hold, axis=0)[:n]


@pytest.fixture
def arm_spec() -> mujoco.MjSpec:
    return mujoco.MjSpec.from_string(ARM2)


@pytest.fixture
def make_problem() -> Callable[..., Problem]:
    """``make_problem(xml, truth_fn, nseq=1, n=500, names=None, qpos=None)``."""

    def make(
        xml: str,
        truth_fn: Callable[[mujoco.MjSpec, mujoco.MjModel], ms.ParameterDict] | None = None,
        *,
        nseq: int = 1,
        n: int = 500,
        names: list | None = None,
        qpos: list | None = None,
        qvel: list | None = None,
        scale: float = 1.0,
        noise: float = 0.0,
    ) -> Problem:
        spec = mujoco.MjSpec.from_string(xml)
        model = spec.compile()
        truth = truth_fn(spec, model) if truth_fn else None
        seqs = []
        for k in range(nseq):
            ctrl = excitation(n, model.nu, scale=scale, seed=k)
            x0 = ms.create_initial_state(model, qpos=qpos, qvel=qvel)
            sens, control = simulate(spec, truth, ctrl, x0, names, noise=noise, seed=100 + k)
            seqs.append((f"seq{k}", x0, control, sens))
        name, x0s, ctrls, senss = zip(*seqs, strict=True)
        return Problem(
            spec,
            model,
            ms.ModelSequences(
                model.names.split(b"\x00")[0].decode() or "model",
                spec,
                list(name),
                list(x0s),
                list(ctrls),
                list(senss),
            ),
        )

    return make


ARM2_TRUE_MASSES = (1.3, 0.5)  # kg: the link masses behind ARM2's synthetic data


def arm2_masses(spec: mujoco.MjSpec, model: mujoco.MjModel) -> ms.ParameterDict:
    """The two link masses of ARM2 (``body_inertia_param``, mass only), at their nominals."""
    return ms.ParameterDict(
        [ms.body_inertia_param(spec, model, b, ms.InertiaType.Mass) for b in ("link1", "link2")]
    )


def arm2_truth() -> tuple[mujoco.MjSpec, mujoco.MjModel, ms.ParameterDict, np.ndarray]:
    """ARM2's spec and model, its masses set to :data:`ARM2_TRUE_MASSES` (the truth of the
    data) and the start state (qpos ``(0.3, -0.2)`` rad)."""
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    truth = arm2_masses(spec, model)
    truth.update_from_vector(list(ARM2_TRUE_MASSES))
    return spec, model, truth, ms.create_initial_state(model, qpos=[0.3, -0.2])


def fit_arm_masses(make_problem, noise=0.0):
    """Fit the two link masses of ARM2 to data from masses (1.3, 0.5) (intervals, results)."""

    def truth(spec, model):
        d = arm2_masses(spec, model)
        d.update_from_vector(list(ARM2_TRUE_MASSES))
        return d

    p = make_problem(
        ARM2,
        truth,
        n=300,
        qpos=[0.3, -0.2],
        noise=noise,
        names=["j1_pos", "j2_pos", "j1_vel", "j2_vel"],
    )
    params = arm2_masses(p.spec, p.model)
    rf = ms.build_residual_fn([p.sequences])
    opt, res = ms.optimize(params, rf)
    return p, params, rf, opt, res


def arm_experiment_text(**overrides: Any) -> str:
    """The bundled arm experiment as YAML, its files by absolute path and these top-level
    keys overridden (so a copy works from any folder)."""
    import yaml

    from mjsysid.app.experiment import bundled_examples

    base = bundled_examples()["arm"].parent
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    exp["model"] = str(base / "arm.xml")
    for s in exp["sequences"]:
        s["file"] = str(base / s["file"])
    exp.update(overrides)
    return yaml.safe_dump(exp)


ARM_SAMPLES = 100  # samples per sequence: small problems, every case runs in milliseconds


# --------------------------------------------------------------------------------------------
# The shared problems of the bad-input tables (tests/*/test_*_bad_inputs.py, helpers in
# bad_inputs_support.py): built once per module; no case mutates them


@dataclass
class Arm:
    """A 2-link arm with data from known masses, and a servo whose kp can make it diverge."""

    spec: mujoco.MjSpec
    model: mujoco.MjModel
    x0: np.ndarray
    ctrl: np.ndarray
    times: np.ndarray
    sens: ms.TimeSeries
    control: ms.TimeSeries
    seqs: ms.ModelSequences
    rf: ms.ResidualFunction
    servo_spec: mujoco.MjSpec
    servo_model: mujoco.MjModel
    servo_rf: ms.ResidualFunction
    box_model: mujoco.MjModel
    results: Path

    def masses(self) -> ms.ParameterDict:
        return ms.ParameterDict(
            [ms.body_inertia_param(self.spec, self.model, b) for b in ("link1", "link2")]
        )

    def seq(self, **kw: Any) -> ms.ModelSequences:
        args = {
            "name": "arm2",
            "spec": self.spec,
            "sequence_name": "s",
            "initial_state": self.x0,
            "control": self.control,
            "sensordata": self.sens,
        }
        args.update(kw)
        return ms.ModelSequences(**args)

    def sensors(self, data: np.ndarray) -> ms.TimeSeries:
        return ms.TimeSeries.from_names(self.times, data, self.model)


@pytest.fixture(scope="module")
def arm(tmp_path_factory: pytest.TempPathFactory):
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()
    truth = ms.ParameterDict([ms.body_inertia_param(spec, model, b) for b in ("link1", "link2")])
    truth.update_from_vector([1.3, 0.5])
    x0 = ms.create_initial_state(model, qpos=[0.3, -0.2])
    ctrl = excitation(ARM_SAMPLES, model.nu)
    sens, control = simulate(spec, truth, ctrl, x0)
    seqs = ms.ModelSequences("arm2", spec, "s", x0, control, sens)
    rf = ms.build_residual_fn(seqs, nthread=1)

    servo_spec = mujoco.MjSpec.from_string(SERVO)
    servo_model = servo_spec.compile()
    sx0 = ms.create_initial_state(servo_model)
    s_sens, s_ctrl = simulate(servo_spec, None, excitation(ARM_SAMPLES, 1), sx0)
    servo_rf = ms.build_residual_fn(
        ms.ModelSequences("servo", servo_spec, "s", sx0, s_ctrl, s_sens), nthread=1
    )

    a = Arm(
        spec,
        model,
        x0,
        ctrl,
        sens.times,
        sens,
        control,
        seqs,
        rf,
        servo_spec,
        servo_model,
        servo_rf,
        mujoco.MjSpec.from_string(BOX).compile(),
        tmp_path_factory.mktemp("results") / "fit",
    )
    p0 = a.masses()
    opt, res = ms.optimize(p0, rf, max_iters=5)
    ms.save_results(a.results, seqs, p0, opt, res, rf)
    yield a
    rf.close()
    servo_rf.close()


def linear_result(x, fun, jac, names, success: bool = True):
    """An ``OptimizeResult`` at ``x`` with residual ``fun`` and Jacobian ``jac`` (a fit that
    ended there, converged (``xtol``) or not (``small_step``)), for interval tests."""
    from mjsysid.fit.result import OptimizeResult

    x, fun = np.asarray(x, dtype=float), np.asarray(fun, dtype=float)
    return OptimizeResult(
        x=x, cost=0.5 * float(fun @ fun), fun=fun, jac=np.asarray(jac, dtype=float),
        grad=np.asarray(jac).T @ fun, status="xtol" if success else "small_step",
        success=success, message="", nfev=1, njev=1, nit=1, initial_cost=1.0, wall_time=0.0,
        parameter_names=list(names), optimizer="lm",
    )  # fmt: skip


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 64 KiB tmpfs: a real file system that fills up (needs root to mount; skipped
    otherwise); unmounted afterwards."""
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)
