"""Held-out multi-step prediction: the effective sample size, the information criteria, the
verdict rule (a verdict only beyond the scatter over windows), and models of every kind:
``mjsysid compare`` across state sizes, ``mjsysid evaluate`` with force laws."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from mjsysid.app.cli import main
from mjsysid.app.experiment import bundled_examples
from mjsysid.lab.prediction import (
    HorizonScore,
    PredictionScore,
    compare_pair,
    effective_sample_size,
    information_criteria,
    lag1_autocorrelation,
    verdict,
)


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


# --- the pure pieces ---------------------------------------------------------------------------


def test_the_effective_sample_size_of_an_ar1_series():
    rng = np.random.default_rng(0)
    n, rho = 40_000, 0.8
    e = rng.normal(size=n)
    r = np.empty(n)
    r[0] = e[0]
    for t in range(1, n):
        r[t] = rho * r[t - 1] + e[t]
    blocks = np.split(r, 40)  # windows: pairs are counted within each
    est = lag1_autocorrelation(blocks)
    assert est == pytest.approx(rho, abs=0.01)
    assert effective_sample_size(n, est) == pytest.approx(n / 9, rel=0.06)  # (1-.8)/(1+.8)
    assert effective_sample_size(n, -0.5) == n  # anticorrelated: no inflation claimed
    white = lag1_autocorrelation([rng.normal(size=(5000, 2))])
    assert abs(white) < 0.03


def test_information_criteria_on_the_effective_sample_size():
    aic, bic = information_criteria(2.0, 100, 25.0, 3)
    base = 25.0 * math.log(2.0 / 100)
    assert aic == pytest.approx(base + 6) and bic == pytest.approx(base + 3 * math.log(25))
    with pytest.raises(ValueError, match="positive"):
        information_criteria(0.0, 100, 25.0, 3)


def _h(windows, horizon=0.5, *, k=3, ssr=None, n=1000, n_eff=200.0) -> HorizonScore:
    w = np.asarray(windows, dtype=float)
    ssr = float(w.mean() * n) if ssr is None else ssr
    aic, bic = information_criteria(ssr, n, n_eff, k)
    return HorizonScore(horizon, w, n, ssr, 0.5, n_eff, aic, bic)


def _score(label, windows_by_horizon, k=3, ssr=None) -> PredictionScore:
    return PredictionScore(
        label, k, tuple(_h(w, h, k=k, ssr=ssr) for h, w in windows_by_horizon.items())
    )


BASE = np.random.default_rng(1).uniform(1.0, 3.0, 30)  # 30 windows' scores


def test_a_clear_difference_gets_a_verdict():
    a = _score("A", {0.1: BASE, 0.5: BASE, 2.0: BASE})
    b = _score("B", {0.1: BASE * 1.5, 0.5: BASE * 1.5, 2.0: BASE * 1.5})
    v = compare_pair(a, b)
    assert v.better == "A"
    assert v.sentence().startswith("'A' is better than 'B': 'A' minus 'B' by horizon: 0.1 s: -33")
    assert [x.better for x in verdict([b, a])] == ["A"]


def test_a_difference_within_the_scatter_over_windows_gets_none():
    noise = np.random.default_rng(2).normal(0.0, 0.5, 30)
    a = _score("A", {0.5: BASE})
    b = _score("B", {0.5: BASE + noise + 0.05})  # 2.5 % better on average, scattered
    v = compare_pair(a, b)
    assert v.better is None and "no horizon differs by > 2 SE and 5 %" in v.reason
    assert v.sentence().startswith("no clear difference between 'A' and 'B'")


def test_a_consistent_but_small_difference_gets_none():
    a = _score("A", {0.5: BASE})
    b = _score("B", {0.5: BASE * 1.03})  # many SE (no scatter) but 3 % < 5 %
    assert compare_pair(a, b).better is None


def test_horizons_that_disagree_or_a_disagreeing_bic_get_none():
    a = _score("A", {0.1: BASE, 0.5: BASE * 2})
    b = _score("B", {0.1: BASE * 2, 0.5: BASE})
    v = compare_pair(a, b)
    assert v.better is None and v.reason.startswith("the horizons disagree")
    # A predicts better, but with 60 more parameters than B: BIC prefers B
    big = _score("A", {0.5: BASE}, k=63)
    small = _score("B", {0.5: BASE * 1.2}, k=3)
    v = compare_pair(big, small)
    assert v.better is None and v.reason.startswith("BIC disagrees")


def test_a_model_that_diverges_loses():
    a = _score("A", {0.5: BASE})
    b = _score("B", {0.5: np.where(np.arange(30) == 4, np.inf, BASE)})
    assert b.horizons[0].diverged == 1 and math.isinf(b.horizons[0].se)
    assert compare_pair(a, b).better == "A"


# --- every model kind --------------------------------------------------------------------------


def _arm(folder: Path, filtered: bool) -> Path:
    """example:arm with its multisine held out; ``filtered``: the shoulder motor is a filter
    actuator (``dyntype="filter"``: one activation, a state size of 7 instead of 6) whose time
    constant is fitted."""
    shutil.copytree(bundled_examples()["arm"].parent, folder)
    doc = yaml.safe_load((folder / "experiment.yaml").read_text())
    doc["sequences"][1]["holdout"] = True
    doc["optimizer"]["max_iters"] = 10
    if filtered:
        doc["parameters"].append(
            {"kind": "actuator_filter_tau", "target": "shoulder_motor", "max": 0.2}
        )
        xml = (folder / "arm.xml").read_text()
        motor = '<motor name="shoulder_motor" joint="shoulder"/>'
        assert motor in xml
        filt = '<general name="shoulder_motor" joint="shoulder" dyntype="filter" dynprm="0.05" '
        (folder / "arm.xml").write_text(xml.replace(motor, filt + 'gainprm="1"/>'))
    (folder / "experiment.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return folder / "experiment.yaml"


def test_compare_across_state_sizes(tmp_path: Path):
    """A native model against one with a filtered actuator (nq + nv + na = 6 and 7): each is
    simulated on its own state layout; the verdict is a sentence either way."""
    for name, filtered in (("native", False), ("filtered", True)):
        path = _arm(tmp_path / f"{name}_exp", filtered)
        argv = ("fit", str(path), "--out", str(tmp_path / name), "-q", "--no-report")
        code, _out, err = _cli(*argv, "--no-timing-check")
        assert code == 0, err
    target = tmp_path / "cmp.json"
    code, out, err = _cli(
        "compare", str(tmp_path / "native"), str(tmp_path / "filtered"), "--out", str(target)
    )
    assert code == 0, err
    data = json.loads(target.read_text())
    by = {m["label"]: m for m in data["models"]}
    assert (by["native"]["state_size"], by["filtered"]["state_size"]) == (6, 7)
    assert (by["native"]["k"], by["filtered"]["k"]) == (5, 6)
    for m in by.values():
        assert [h["horizon"] for h in m["horizons"]] == [0.1, 0.5, 2.0]
        assert all(h["windows"] >= 1 and 1 <= h["n_eff"] <= h["n"] for h in m["horizons"])
        assert all(h["diverged"] == 0 for h in m["horizons"])
    (v,) = data["verdicts"]
    assert v["sentence"] in out
    assert v["sentence"].startswith(("'native' is better", "'filtered' is better", "no clear"))


def test_evaluate_with_force_laws(tmp_path: Path):
    """example:furuta: a commanded-torque law with a deadzone, Coulomb and viscous friction.
    The identified laws come back from the results folder: its rows differ from the nominal
    ones (they were identical when evaluate simulated the bare MJCF) and predict better."""
    code, _out, err = _cli(
        "fit", "example:furuta", "--out", str(tmp_path / "fit"), "--max-iters", "3",
        "-q", "--no-report", "--no-timing-check",
    )  # fmt: skip
    assert code == 0, err
    target = tmp_path / "ev.json"
    code, out, err = _cli(
        "evaluate", "example:furuta", "nominal", str(tmp_path / "fit"), "-q",
        "--out", str(target),
    )  # fmt: skip
    assert code == 0, err
    assert "multi-step prediction on held-out sequences: check" in out
    assert "state-space table" in out  # left out, and said so: laws are not bare MuJoCo
    models = json.loads(target.read_text())["prediction"]["models"]
    nominal, fitted = ({h["horizon"]: h["mean"] for h in m["horizons"]} for m in models)
    assert fitted[2.0] < 0.1 * nominal[2.0] and fitted[0.5] < nominal[0.5]
    assert "'fit' is better than 'nominal'" in out


USER_LAW = '''
from dataclasses import dataclass, field, replace

from mjsysid import LawParameter


@dataclass(frozen=True)
class Gain:
    """tau = k u: a torque law of the user's own."""

    name: str
    joint: str
    actuator: str
    dof: int = field(default=-1, compare=False)
    ctrl: int = field(default=-1, compare=False)

    @property
    def parameters(self):
        return {"k": LawParameter(1, "N·m", 0.0, 10.0, "torque per unit of command")}

    @property
    def states(self):
        return {}

    @property
    def inputs(self):
        return ()

    @property
    def constants(self):
        return ()

    @property
    def dynamics(self):
        return False

    def bind(self, model):
        dof = int(model.jnt_dofadr[model.joint(self.joint).id])
        return replace(self, dof=dof, ctrl=int(model.actuator(self.actuator).id))

    def initial_state(self, ctx):
        return {}

    def step(self, ctx):
        ctx.force[:, self.dof] += ctx.values["k"][:, 0] * ctx.ctrl[:, self.ctrl]
        return {}

    def config(self):
        return {"law": f"{__name__}:Gain", "name": self.name, "joint": self.joint,
                "actuator": self.actuator}
'''

ROTOR = """
<mujoco model="rotor">
  <option timestep="0.005"/>
  <worldbody>
    <body name="arm">
      <joint name="j" type="hinge" axis="0 1 0" damping="0.01"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.01" mass="0.3"/>
    </body>
  </worldbody>
  <actuator><motor name="pwm" joint="j" gear="0" ctrlrange="-1 1"/></actuator>
  <sensor><jointpos name="angle" joint="j"/><jointvel name="speed" joint="j"/></sensor>
</mujoco>
"""


def test_score_a_user_law_rebuilt_with_its_values(tmp_path: Path, monkeypatch):
    """A law of the user's own (by import path): the model with its true gain is judged
    better than the same law with half the gain; every window is finite."""
    import importlib
    import sys

    import mujoco

    import mjsysid as ms
    from mjsysid.app.experiment import Experiment
    from mjsysid.lab.prediction import score_prediction

    (tmp_path / "my_gain_law.py").write_text(USER_LAW)
    monkeypatch.syspath_prepend(str(tmp_path))
    law = importlib.import_module("my_gain_law").Gain("motor", "j", "pwm")
    try:
        spec = mujoco.MjSpec.from_string(ROTOR)
        model = spec.compile()
        t = np.arange(600) * model.opt.timestep
        u = (0.8 * np.sin(2 * np.pi * 1.3 * t) * np.sign(np.sin(2 * np.pi * 0.4 * t)))[:, None]
        x0 = ms.create_initial_state(model, np.zeros(1), np.zeros(1))
        ctrl = ms.TimeSeries.from_control_names(t, u, model)
        blank = ms.TimeSeries.from_names(t, np.ones((t.size, 2)), model)  # (replaced)
        seqs = ms.ModelSequences("rotor", spec, ["run"], [x0], [ctrl], [blank])
        params = ms.ParameterDict(ms.force_law_params(law, {"k": 0.08}))
        fn = ms.build_residual_fn([seqs], force_laws=[law], normalize=False)
        truth = fn.predict(None, params)[0].predicted_at_measured
        fn.close()
        data = ms.ModelSequences("rotor", spec, ["run"], [x0], [ctrl], [truth])
        scores = []
        for label, k in (("true", 0.08), ("half", 0.04)):
            p = ms.ParameterDict(ms.force_law_params(law, {"k": k}))
            exp = Experiment(tmp_path, "rotor", spec, model, data, p, None, {"force_laws": [law]})
            scores.append(score_prediction(label, exp, p, data, (0.1, 0.5)))
        true, half = scores
        assert all(h.diverged == 0 and h.windows.size >= 5 for h in true.horizons)
        assert true.at(0.5).mean < 1e-12 < half.at(0.5).mean  # the data are the true law's
        (v,) = verdict(scores)
        assert v.better == "true", v.sentence()
    finally:
        sys.modules.pop("my_gain_law", None)
