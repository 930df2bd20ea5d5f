"""A force law of the user's own, in the user's own module, first-class end to end: written
against the public protocol only (an internal state, a recorded input, a per-recording
constant), referenced by import path, fitted, saved, reloaded by the runtime from the results
folder alone and run in a plain MuJoCo loop (the same prediction to 1e-9), and evaluated on a
Dask worker (the same residuals)."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import yaml

import mjsysid as ms
from mjsysid.fit.confidence import compute_confidence
from mjsysid.sim.lockstep import reference_rollout

USER_MODULE = '''
"""A hobbyist's motor: the torque lags the command (an RC filter on the PWM input)."""
from dataclasses import dataclass, field, replace

import numpy as np

from mjsysid import LawParameter


@dataclass(frozen=True)
class LaggedMotor:
    """tau = E * k * y, y' = (u * V / 12 - y) / T; u the actuator's command, E the recorded
    enable flag, V the recording's supply voltage."""

    name: str
    joint: str
    actuator: str
    dof: int = field(default=-1, compare=False)
    ctrl: int = field(default=-1, compare=False)

    @property
    def parameters(self):
        return {
            "k": LawParameter(1, "N·m", 0.0, 10.0, "torque per unit of command"),
            "lag": LawParameter(1, "s", 1e-3, 1.0, "command lag"),
        }

    @property
    def states(self):
        return {"y": 1}

    @property
    def inputs(self):
        return ("enable",)

    @property
    def constants(self):
        return ("supply",)

    @property
    def dynamics(self):
        return False

    def bind(self, model):
        dof = int(model.jnt_dofadr[model.joint(self.joint).id])
        return replace(self, dof=dof, ctrl=int(model.actuator(self.actuator).id))

    def initial_state(self, ctx):
        return {"y": np.zeros((ctx.q.shape[0], 1))}

    def step(self, ctx):
        k, lag = ctx.values["k"][:, 0], ctx.values["lag"][:, 0]
        u = ctx.ctrl[:, self.ctrl] * ctx.constants["supply"] / 12.0
        y = ctx.state["y"][:, 0]
        y = y + ctx.dt * (u - y) / lag
        ctx.force[:, self.dof] += np.where(ctx.inputs["enable"] > 0.5, k * y, 0.0)
        return {"y": y[:, None]}

    def config(self):
        return {"law": f"{__name__}:LaggedMotor", "name": self.name, "joint": self.joint,
                "actuator": self.actuator}
'''

MODEL = """
<mujoco model="lagged">
  <option timestep="0.005"/>
  <worldbody>
    <body name="rotor">
      <joint name="j" type="hinge" axis="0 0 1" damping="0.02"/>
      <geom type="cylinder" size="0.05 0.02" mass="0.4"/>
    </body>
  </worldbody>
  <actuator><motor name="pwm" joint="j" gear="0" ctrlrange="-1 1"/></actuator>
  <sensor><jointpos name="angle" joint="j"/></sensor>
</mujoco>
"""

TRUTH = {"k": [0.08], "lag": [0.05]}
SUPPLY = {"run12": 12.0, "run10": 10.0}
N = 400


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``my_motor_laws`` importable here and in processes started from here (Dask workers)."""
    folder = tmp_path / "userlib"
    folder.mkdir()
    (folder / "my_motor_laws.py").write_text(textwrap.dedent(USER_MODULE))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    yield importlib.import_module("my_motor_laws")
    sys.modules.pop("my_motor_laws", None)


def _recordings(law: Any, only: str | None = None) -> ms.ModelSequences:
    """Two recordings made by the plain loop with the true values (different supplies; the
    torque switched off for the last quarter of the second); ``only``: just that one."""
    spec = mujoco.MjSpec.from_string(MODEL)
    model = spec.compile()
    t = np.arange(N) * model.opt.timestep
    x0 = ms.create_initial_state(model, np.zeros(1), np.zeros(1))
    names, controls, sensors, inputs, consts = [], [], [], [], []
    for i, (name, supply) in enumerate(SUPPLY.items()):
        u = 0.8 * np.sign(np.sin(2 * np.pi * (1.5 + i) * t))[:, None]
        enable = np.where((i == 1) & (t > 0.75 * t[-1]), 0.0, 1.0)
        states, _ = reference_rollout(
            model, x0, u, [law], [{k: np.array([v]) for k, v in TRUTH.items()}],
            inputs={"enable": enable}, constants={"supply": supply},
        )  # fmt: skip
        angle = np.r_[x0[1], states[:-1, 1]][:, None]  # row k: the state at t_k
        names.append(name)
        controls.append(ms.TimeSeries.from_control_names(t, u, model))
        sensors.append(ms.TimeSeries.from_names(t, angle, model))
        inputs.append(ms.TimeSeries.from_custom_map(t, enable[:, None], [("enable", 1)]))
        consts.append({"supply": supply})
    keep = [k for k, n in enumerate(names) if only in (None, n)]
    return ms.ModelSequences(
        "lagged", spec, [names[k] for k in keep], [x0] * len(keep),
        [controls[k] for k in keep], [sensors[k] for k in keep],
        inputs=[inputs[k] for k in keep], constants=[consts[k] for k in keep],
    )  # fmt: skip


def test_a_user_law_fits_saves_reloads_and_runs_in_a_plain_loop(user_module, tmp_path):
    law = user_module.LaggedMotor("motor", "j", "pwm")
    seqs = _recordings(law)
    params = ms.ParameterDict(ms.force_law_params(law, {"k": 0.05, "lag": 0.1}))
    fn = ms.build_residual_fn([seqs], force_laws=[law])
    identified, result = ms.optimize(params, fn)
    assert result.success
    np.testing.assert_allclose(identified.as_vector(), [0.08, 0.05], rtol=1e-5)
    assert identified["motor_lag"].meta["unit"] == "s"
    folder = ms.save_results(tmp_path / "out", [seqs], params, identified, result, fn)
    # the results folder alone: the identified model and the law, by its import path
    model = mujoco.MjModel.from_xml_path(str(folder / "lagged.xml"))
    predicted = fn.predict(None, identified)
    # the supply of each fitted recording is in identified.yaml, and the runtime's error
    # names them when none is given
    fitted = yaml.safe_load((folder / "identified.yaml").read_text())["constants"]
    assert fitted == {seq: {"supply": v} for seq, v in SUPPLY.items()}
    low, high = min(SUPPLY.values()), max(SUPPLY.values())
    with pytest.raises(
        KeyError, match=rf"the fitted recordings had supply from {low:g} to {high:g}"
    ):
        ms.LawRuntime.from_results(folder)
    for seq, pred in zip(SUPPLY, predicted, strict=True):
        runtime = ms.LawRuntime.from_results(folder, constants={"supply": SUPPLY[seq]})
        assert runtime.inputs == ("enable",)
        data = mujoco.MjData(model)
        i = list(SUPPLY).index(seq)
        u, enable = seqs.control[i].data[:, 0], seqs.inputs[i].data[:, 0]
        angles = [data.qpos[0]]
        for k in range(N - 1):
            data.ctrl[0] = u[k]
            runtime.apply(model, data, {"enable": enable[k]})
            mujoco.mj_step(model, data)
            angles.append(data.qpos[0])
        np.testing.assert_allclose(angles, pred.predicted_at_measured.data[:, 0], atol=1e-9)


def test_a_user_law_is_named_by_its_import_path_and_refused_when_missing(user_module):
    law = user_module.LaggedMotor("motor", "j", "pwm")
    params = ms.ParameterDict(ms.force_law_params(law, TRUTH))
    assert params["motor_k"].meta["law"]["law"] == "my_motor_laws:LaggedMotor"
    assert ms.laws_from_params(ms.ParameterDict.from_dict(params.to_dict())) == [law]
    saved = params.to_dict()
    saved["parameters"][0]["meta"]["law"]["law"] = "not_installed_laws:LaggedMotor"
    with pytest.raises(ImportError, match="cannot import module 'not_installed_laws'"):
        ms.laws_from_params(ms.ParameterDict.from_dict(saved))


def test_a_user_law_runs_on_a_dask_worker(user_module):
    distributed = pytest.importorskip("distributed")
    from mjsysid.fit.distributed import distribute, make_executor

    del distributed
    law = user_module.LaggedMotor("motor", "j", "pwm")
    seqs = _recordings(law)
    params = ms.ParameterDict(ms.force_law_params(law, {"k": 0.05, "lag": 0.1}))
    local = ms.build_residual_fn([seqs], force_laws=[law], nthread=1)
    X = np.array([[0.05, 0.08, 0.1], [0.1, 0.05, 0.02]])
    client = make_executor(workers=1, threads_per_worker=1)
    try:
        with distribute(ms.build_residual_fn([seqs], force_laws=[law], nthread=1), client) as drf:
            np.testing.assert_array_equal(drf(X, params), local(X, params))
    finally:
        client.close()


def _true_lag_state(seqs: ms.ModelSequences, t_start: float, i: int) -> float:
    """The true law state ``y`` at ``t_start`` of recording ``i``: the plain recursion of
    ``LaggedMotor.step`` from ``y = 0`` (it does not depend on the mechanics)."""
    dt, supply = 0.005, list(SUPPLY.values())[i]
    u = seqs.control[i].data[:, 0] * supply / 12.0
    y = 0.0
    for k in range(round(t_start / dt)):
        y += dt * (u[k] - y) / TRUTH["lag"][0]
    return y


def test_law_state_starts_are_estimated_with_the_window_starts(user_module):
    law = user_module.LaggedMotor("motor", "j", "pwm")
    recordings = _recordings(law)
    windows = ms.split_windows(recordings, 0.7)  # each window has the torque on a while
    start = {"k": 0.05, "lag": 0.1}

    def fit(with_law_states: bool) -> ms.ParameterDict:
        params = ms.ParameterDict(ms.force_law_params(law, start))
        params.update(ms.initial_state_params(windows, qpos=False, qvel_margin=5.0))
        if with_law_states:
            params.update(ms.law_state_params(windows, [law], params, {"motor": {"y": 2.0}}))
        identified, _ = ms.optimize(params, ms.build_residual_fn([windows], force_laws=[law]))
        return identified

    without = fit(False)
    off = max(
        abs(without["motor_k"].value[0] / TRUTH["k"][0] - 1),
        abs(without["motor_lag"].value[0] / TRUTH["lag"][0] - 1),
    )
    assert off > 0.01  # every window starting its filter at rest biases the fit
    identified = fit(True)
    assert identified["motor_k"].value[0] == pytest.approx(TRUTH["k"][0], rel=1e-3)
    assert identified["motor_lag"].value[0] == pytest.approx(TRUTH["lag"][0], rel=1e-3)
    estimated = [p for p in identified.values() if p.meta.get("kind") == "initial_law_state"]
    assert len(estimated) == len(windows.sequence_name) == 6
    for p in estimated:
        seq = p.name.split("/")[1]  # "<recording>#<window>"
        i = list(SUPPLY).index(seq.split("#")[0])
        t_start = windows.initial_state[windows.sequence_name.index(seq)][0]
        assert p.name.endswith("motor.y0")
        assert p.value[0] == pytest.approx(_true_lag_state(recordings, t_start, i), abs=1e-3)


def test_law_state_starts_are_refused_for_an_unknown_law_or_state(user_module):
    law = user_module.LaggedMotor("motor", "j", "pwm")
    seqs = _recordings(law)
    params = ms.ParameterDict(ms.force_law_params(law, TRUTH))
    with pytest.raises(KeyError, match=r"margins: no force law named 'motr'; laws: \['motor'\]"):
        ms.law_state_params(seqs, [law], params, {"motr": {"y": 1.0}})
    with pytest.raises(KeyError, match=r"force law 'motor' has no state 'x'; its states: \['y'\]"):
        ms.law_state_params(seqs, [law], params, {"motor": {"x": 1.0}})
    with pytest.raises(ValueError, match=r"margins\['motor'\]\['y'\] must be a positive number"):
        ms.law_state_params(seqs, [law], params, {"motor": {"y": -1.0}})


def test_a_user_law_in_the_global_stage_multistart_holdout_and_bootstrap(user_module):
    pytest.importorskip("cmaes")
    law = user_module.LaggedMotor("motor", "j", "pwm")
    fitted, held = _recordings(law, only="run12"), _recordings(law, only="run10")
    params = ms.ParameterDict(ms.force_law_params(law, {"k": 0.05, "lag": 0.1}))
    fn = ms.build_residual_fn([fitted], force_laws=[law])
    search = {"population": 6, "budget": 24, "seed": 1}
    identified, result = ms.optimize(params, fn, global_search=search, holdout=held)
    np.testing.assert_allclose(identified.as_vector(), [0.08, 0.05], rtol=1e-5)
    assert result.global_search is not None and 0 < result.global_search.evaluations <= 24
    # the held-out recording (another supply, the torque switched off) with its own constant
    (row,) = [r for r in result.validation.rows if r.held_out]
    assert row.sequence == "run10" and row.fit_identified > 99.99 > row.fit_start
    both = ms.build_residual_fn([_recordings(law)], force_laws=[law])
    again, multi = ms.optimize(params, both, starts=2)
    np.testing.assert_allclose(again.as_vector(), [0.08, 0.05], rtol=1e-5)
    conf = compute_confidence(multi, both, params=again, method="bootstrap", draws=6)
    assert conf.method == "bootstrap"
    assert np.all(np.isfinite(conf.half_widths)) and np.all(conf.half_widths < 0.01)
