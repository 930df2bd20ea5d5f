"""The Warp backend on Warp's CPU device against the CPU rollouts (float64), within stated
tolerances: states and sensors of candidate models, force laws between device steps, the
residual of a population and a global stage with ``rollout="warp"``.

Tolerance: MuJoCo Warp computes in float32. Over these 60 steps of a smooth two-link arm the
states agree to 1e-5 (absolute, rad and rad/s; measured ~1e-6); costs of a population to
1e-3 relative. Every test uses the one model below, so Warp compiles its kernels once (about
a minute on a fresh machine, then cached on disk)."""

from __future__ import annotations

import sys

import mujoco
import numpy as np
import pytest

pytest.importorskip("mujoco_warp", reason="the Warp backend needs the 'warp' extra")

import mjsysid as ms
from mjsysid.sim.batch import BatchLockstep
from mjsysid.sim.laws.friction import JointFriction, ViscousFriction
from mjsysid.sim.lockstep import LawData
from mjsysid.sim.rollout import BatchRollout
from mjsysid.sim.warp import WarpRollout, import_warp

ARM = """
<mujoco><option timestep="0.002"/><worldbody>
<body name="b0"><joint name="j0" type="hinge" axis="0 1 0" damping="0.05"/>
<geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.3"/>
<body name="b1" pos="0.2 0 0"><joint name="j1" type="hinge" axis="0 1 0" damping="0.05"/>
<geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.3"/></body></body>
</worldbody><actuator><motor name="m0" joint="j0"/><motor name="m1" joint="j1"/></actuator>
<sensor><jointpos name="q0" joint="j0"/><jointvel name="v1" joint="j1"/></sensor></mujoco>
"""
NSTEP = 60
ATOL = 1e-5


@pytest.fixture(scope="module")
def device() -> WarpRollout:
    return WarpRollout(device="cpu")


def _candidates() -> list[mujoco.MjModel]:
    spec = mujoco.MjSpec.from_string(ARM)
    models = []
    for i, (mass, damping, gear) in enumerate(
        ((0.3, 0.05, 1.0), (0.45, 0.1, 1.3), (0.6, 0.02, 0.7))
    ):
        spec.geoms[1].mass = mass
        spec.joints[i % 2].damping = [damping, 0, 0]
        spec.actuators[0].gear = [gear, 0, 0, 0, 0, 0]
        models.append(spec.compile())
    return models


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    model = mujoco.MjModel.from_xml_string(ARM)
    x0 = np.stack([ms.create_initial_state(model, np.array([0.2 * i, 0.1])) for i in range(n)])
    k = np.arange(NSTEP)[None, :, None]
    ctrl = 0.3 * np.sin(0.05 * k * (1 + np.arange(n)[:, None, None])) * np.ones((1, 1, 2))
    return x0, ctrl


def test_candidate_models_as_worlds_match_the_cpu_rollout(device):
    models = _candidates()
    x0, ctrl = _inputs(len(models))
    state, sens, ok = device.run(models, x0, ctrl)
    with BatchRollout(1) as runner:
        ref_state, ref_sens, ref_ok = runner.run(models, x0, ctrl)
    assert ok.all() and ref_ok.all()
    np.testing.assert_allclose(state, ref_state, rtol=0, atol=ATOL)
    np.testing.assert_allclose(sens, ref_sens, rtol=0, atol=ATOL)
    # the per-world fields really differ: each world follows its own model
    assert np.abs(ref_state[0] - ref_state[1]).max() > 100 * ATOL
    assert "cpu" in device.device_name


def test_a_later_batch_with_other_common_values_is_not_run_on_stale_ones(device):
    """Every candidate of the second call shares a damping the first call did not have."""
    x0, ctrl = _inputs(2)
    base = mujoco.MjModel.from_xml_string(ARM)
    models = [base.__copy__(), base.__copy__()]
    models[1].body_mass[2] = 0.5  # the per-world field of both calls
    device.run(models, x0, ctrl)
    for m in models:
        m.dof_damping[:] = 0.3  # the same in every candidate, unlike the last call's
    state, _, _ = device.run(models, x0, ctrl)
    with BatchRollout(1) as runner:
        ref, _, _ = runner.run(models, x0, ctrl)
    np.testing.assert_allclose(state, ref, rtol=0, atol=ATOL)


def test_force_laws_between_device_steps_match_the_lock_step(device):
    model = mujoco.MjModel.from_xml_string(ARM)
    laws = [ViscousFriction("v0", "j0"), ViscousFriction("v1", "j1", directional=False)]
    x0, ctrl = _inputs(4)
    values = [
        {"damping": np.array([[0.05, 0.02], [0.1, 0.1], [0.0, 0.2], [0.3, 0.01]])},
        {"damping": np.array([[0.02], [0.0], [0.05], [0.1]])},
    ]
    new = np.zeros((4, NSTEP), dtype=bool)
    new[:, ::5] = True
    data = LawData(new_command=new)
    engine = WarpRollout(laws, device="cpu")
    state, _, ok = engine.run([model] * 4, x0, ctrl, values, data=data)
    with BatchRollout(1) as runner:
        ref, _, ref_ok = BatchLockstep(runner, laws).run([model] * 4, x0, ctrl, values, data=data)
    assert ok.all() and ref_ok.all()
    np.testing.assert_allclose(state, ref, rtol=0, atol=ATOL)


def _problem() -> tuple[ms.ResidualFunction, ms.ParameterDict]:
    spec = mujoco.MjSpec.from_string(ARM)
    model = spec.compile()
    x0, ctrl = _inputs(1)
    truth = model.__copy__()
    truth.dof_damping[:] = [0.08, 0.03]
    (traj,) = ms.sysid_rollout(truth, None, ctrl[0], x0[0])
    t = 0.002 * np.arange(NSTEP)
    seq = ms.ModelSequences(
        "arm", spec, "s", x0[0], ms.TimeSeries.from_control_names(t, ctrl[0], model),
        ms.TimeSeries.from_names(t, traj.sensordata, model),
    )  # fmt: skip
    params = ms.ParameterDict(
        [ms.make_parameter("joint_damping", model, j, max_value=0.2) for j in ("j0", "j1")]
    )
    return ms.build_residual_fn([seq], nthread=1), params


def test_a_population_costs_the_same_on_the_device(device):
    rf, params = _problem()
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 0.2, (2, 8))
    X[:, 0] = [0.08, 0.03]  # the truth
    cpu = 0.5 * (rf(X, params) ** 2).sum(axis=0)
    gpu = 0.5 * (rf.on_backend("warp")(X, params) ** 2).sum(axis=0)
    np.testing.assert_allclose(gpu[1:], cpu[1:], rtol=1e-3)
    assert gpu[0] < 1e-6 * cpu[1:].min()  # the truth: zero up to float32 rounding
    assert np.argsort(gpu)[:3].tolist() == np.argsort(cpu)[:3].tolist()
    assert rf.on_backend("cpu") is rf


def test_a_global_stage_on_the_device_then_the_local_fit_on_the_cpu():
    pytest.importorskip("cmaes")
    rf, params = _problem()
    g = {"population": 6, "budget": 13, "seed": 1}
    _, result = ms.optimize(params, rf, global_search=g, rollout="warp", horizons=None)
    assert result.global_search is not None
    assert result.global_search.evaluations == 13
    np.testing.assert_allclose(result.x, [0.08, 0.03], rtol=1e-6)  # LM finished on the CPU


def test_what_the_device_cannot_run_is_refused_by_name():
    with pytest.raises(ValueError, match="laws that do not read the joint-space dynamics"):
        WarpRollout([JointFriction("f", "j0", stick=True)], device="cpu")
    with pytest.raises(ValueError, match=r"rollout must be one of \['cpu', 'warp'\]"):
        ms.FitOptions(rollout="gpu")
    rf, params = _problem()
    with pytest.raises(ValueError, match="backend must be one of"):
        rf.on_backend("cuda")
    with pytest.raises(ValueError, match="the built-in residual function"):
        ms.optimize(params, lambda x, p: np.zeros((3, *np.shape(x)[1:])), starts=2,
                    rollout="warp")  # fmt: skip


def test_a_missing_install_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco_warp", None)  # import raises ImportError
    with pytest.raises(ImportError, match=r"pip install -e '\.\[warp\]' in the mjsysid checkout"):
        import_warp()


def test_the_experiment_key_reaches_optimize(tmp_path):
    import shutil

    from mjsysid.app.experiment import ExperimentError, bundled_examples, load_experiment

    folder = tmp_path / "dcmotor"
    shutil.copytree(bundled_examples()["dcmotor"].parent, folder)
    path = folder / "experiment.yaml"
    text = path.read_text()
    path.write_text(text.replace("max_iters: 100}", "max_iters: 100, starts: 3, rollout: warp}"))
    assert load_experiment(path).search == {"starts": 3, "rollout": "warp"}
    path.write_text(text.replace("max_iters: 100}", "max_iters: 100, rollout: gpu}"))
    with pytest.raises(ExperimentError, match=r"optimizer\.rollout.*one of \['cpu', 'warp'\]"):
        load_experiment(path)
