"""Residual evaluations on a 2-worker Dask LocalCluster: the same numbers as the local run."""

from __future__ import annotations

import io
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

distributed = pytest.importorskip("distributed")  # the optional extra: mjsysid[distributed]
cloudpickle = pytest.importorskip("cloudpickle")

import mjsysid as ms  # noqa: E402
from conftest import ARM2, DC_MOTOR, dc_motor_truth  # noqa: E402
from mjsysid.fit.distributed import (  # noqa: E402
    DistributedResidual,
    distribute,
    distributed_residual_fn,
    executor_options,
    make_executor,
    residual_recipe,
)
from mjsysid.objective.protocols import ThresholdResidualFn  # noqa: E402


@pytest.fixture(scope="module")
def client() -> Any:
    """One 2-worker cluster (processes, one thread each) for the whole module."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the slow rollout below
    c = make_executor(workers=2, threads_per_worker=1)
    c.wait_for_workers(2, timeout=60)
    yield c
    cluster = c.cluster
    c.close()  # (closes the cluster it started)
    assert cluster.status.name == "closed"


def arm_params(model: Any) -> ms.ParameterDict:
    return ms.ParameterDict(
        [
            ms.make_parameter("joint_damping", model, "j1"),
            ms.make_parameter("joint_damping", model, "j2"),
            ms.make_parameter("joint_armature", model, "j1"),
        ]
    )


def candidates(params: ms.ParameterDict, k: int, seed: int = 0) -> np.ndarray:
    lo, hi = params.get_bounds()
    lo, hi = np.maximum(lo, 0.0), np.minimum(hi, 1.0)
    u = np.random.default_rng(seed).uniform(size=(lo.size, k))
    return lo[:, None] + u * (hi - lo)[:, None]


@pytest.fixture
def arm(make_problem: Any) -> Any:
    prob = make_problem(ARM2, nseq=2, n=200)
    return prob, arm_params(prob.model)


def test_batched_columns_bit_for_bit(client: Any, arm: Any) -> None:
    prob, params = arm
    local = ms.build_residual_fn(prob.sequences, nthread=1)
    with distribute(ms.build_residual_fn(prob.sequences, nthread=1), client) as drf:
        X = candidates(params, 5)
        r = drf(X, params)
        assert r.shape == (local(X[:, 0], params).size, 5)
        assert np.array_equal(r, local(X, params))
        # one column, a 1-D x, and the same columns again (the workers' caches)
        assert np.array_equal(drf(X[:, 2], params), local(X[:, 2], params))
        assert np.array_equal(drf(X, params), r)
        assert drf.stats.calls == 3 and drf.stats.tasks == 5
        assert drf.sequence_labels == local.sequence_labels
        assert np.array_equal(drf.signal_groups(), local.signal_groups())
        # a frozen parameter: the workers get the new structure
        params["j1_armature"].frozen = True
        X2 = X[:2]
        assert np.array_equal(drf(X2, params), local(X2, params))


def test_signal_transform_bit_for_bit(client: Any, arm: Any) -> None:
    """A batched custom residual (SignalTransform) travels with the recipe."""
    prob, params = arm
    st = ms.SignalTransform().delay("j*_pos", "delay").gain("tip_*", "gain")
    params.add(ms.Parameter("delay", 0.004, 0.0, 0.01))
    params.add(ms.Parameter("gain", 1.0, 0.5, 1.5))
    X = np.vstack([candidates(params, 4)[:3], [[0.0, 0.003, 0.0061, 0.01]], [[0.6, 1, 1.2, 1.4]]])
    local = ms.build_residual_fn(prob.sequences, modify_residual=st.apply, nthread=1)
    with distribute(local, client) as drf:
        assert np.array_equal(drf(X, params), local(X, params))
        assert np.array_equal(drf.head(0.6)(X, params), local.head(0.6)(X, params))


def test_force_laws_travel_with_the_recipe(client: Any, arm: Any) -> None:
    """A force law is part of the residual: the workers apply it too."""
    from mjsysid.sim.laws.core import force_law_params
    from mjsysid.sim.laws.friction import ViscousFriction

    prob, params = arm
    law = ViscousFriction("j1_viscous", joint="j1")
    params.update(force_law_params(law, {"damping": [0.05, 0.05]}))
    local = ms.build_residual_fn(prob.sequences, force_laws=[law], nthread=1)
    X = candidates(params, 4)
    with distribute(local, client) as drf:
        assert np.array_equal(drf(X, params), local(X, params))
        assert isinstance(drf, ThresholdResidualFn)  # (the intervals read it, as of local)


def test_compiled_spec_path(client: Any, make_problem: Any) -> None:
    """Candidates compiled from the spec: exact where the XML round-trips exactly."""
    prob = make_problem(DC_MOTOR, dc_motor_truth(0.05, 0.01), n=200, names=["angle", "speed"])
    params = ms.ParameterDict([ms.make_parameter("actuator_filter_tau", prob.model, "motor")])
    X = np.array([[0.02, 0.04, 0.06]])
    local = ms.build_residual_fn(prob.sequences, fast_model_edits=False, nthread=1)
    with distributed_residual_fn(prob.sequences, client, fast_model_edits=False) as drf:
        assert np.array_equal(drf(X, params), local(X, params))
        assert isinstance(drf, DistributedResidual)
        pred = drf.predict(X[:, 0], params)
        assert np.array_equal(pred[0].residual, local.predict(X[:, 0], params)[0].residual)


def test_fit_identical_in_iterates(client: Any, make_problem: Any) -> None:
    prob = make_problem(DC_MOTOR, dc_motor_truth(0.05, 0.01), n=300, names=["angle", "speed"])
    params = ms.ParameterDict(
        [
            ms.make_parameter("actuator_filter_tau", prob.model, "motor"),
            ms.make_parameter("actuator_kv", prob.model, "motor"),
        ]
    )
    local = ms.build_residual_fn(prob.sequences, nthread=1)
    fit_l, res_l = ms.optimize(params, local, max_iters=8, horizons=[0.5, 1.0])
    with distribute(ms.build_residual_fn(prob.sequences, nthread=1), client) as drf:
        fit_d, res_d = ms.optimize(params, drf, max_iters=8, horizons=[0.5, 1.0])
    assert np.array_equal(res_d.x, res_l.x)
    assert res_d.nfev == res_l.nfev and res_d.nit == res_l.nit
    assert res_d.extras["candidate"] is not None
    for a, b in zip(res_d.extras["candidate"], res_l.extras["candidate"], strict=True):
        assert np.array_equal(np.asarray(a), np.asarray(b))
    assert np.array_equal(fit_d.as_vector(), fit_l.as_vector())
    # optimize(..., executor=client) distributes the caller's residual itself
    _, res_e = ms.optimize(params, local, max_iters=8, horizons=[0.5, 1.0], executor=client)
    assert np.array_equal(res_e.x, res_l.x) and res_e.nfev == res_l.nfev


def test_head(client: Any, arm: Any) -> None:
    prob, params = arm
    local = ms.build_residual_fn(prob.sequences, nthread=1)
    with distribute(ms.build_residual_fn(prob.sequences, nthread=1), client) as drf:
        head = drf.head(0.5)
        assert head is not drf and drf.head(1.0) is drf
        assert head.supports_horizons(params)
        X = candidates(params, 3, seed=1)
        assert np.array_equal(head(X, params), local.head(0.5)(X, params))
        assert np.array_equal(drf(X, params), local(X, params))  # the whole data still
        with pytest.raises(ValueError, match="fraction must be"):
            drf.head(1.5)


def test_no_scheduler_names_the_address(arm: Any) -> None:
    with pytest.raises(
        ConnectionError, match=r"no Dask scheduler answered at 'tcp://127\.0\.0\.1:9'"
    ):
        make_executor(scheduler="tcp://127.0.0.1:9", timeout=0.5)
    with pytest.raises(ValueError, match="make_executor must be given workers=N or scheduler"):
        make_executor()
    with pytest.raises(TypeError, match=r"executor must be a dask\.distributed Client"):
        distribute(residual_recipe(arm[0].sequences), 3)


def test_no_worker_names_the_scheduler(arm: Any) -> None:
    prob, params = arm
    cluster = distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=":0")
    try:
        with distributed.Client(cluster, set_as_default=False) as empty:
            rf = ms.build_residual_fn(prob.sequences, nthread=1)
            with distribute(rf, empty, worker_timeout=0.5) as drf:
                address = cluster.scheduler_address
                with pytest.raises(RuntimeError, match=f"scheduler at {address} has no workers"):
                    drf(candidates(params, 2), params)
            assert rf(candidates(params, 2), params).shape[1] == 2  # still the caller's
    finally:
        cluster.close()


def test_executor_options() -> None:
    assert executor_options("tcp://h:8786") == {"scheduler": "tcp://h:8786"}
    assert executor_options(3) == {"workers": 3}
    assert executor_options({"workers": 2, "threads_per_worker": 4}) == {
        "workers": 2,
        "threads_per_worker": 4,
    }
    with pytest.raises(ValueError, match=r"executor must be a scheduler address, a worker"):
        executor_options({"workers": 2, "scheduler": "tcp://h:1"})
    with pytest.raises(ValueError, match=r"executor\.workers must be a positive integer"):
        executor_options({"workers": 0})
    with pytest.raises(ValueError, match=r"executor\.scheduler must be an address"):
        executor_options({"scheduler": "host"})
    with pytest.raises(TypeError, match="executor must be"):
        executor_options([1])


class SlowRollout:
    """A custom rollout that marks, in ``marks``, the process that runs it, then waits."""

    def __init__(self, marks: str | None, delay: float) -> None:
        self.marks, self.delay = marks, delay

    def __call__(self, models: Any, datas: Any, ctrl: Any, x0: Any, params: Any) -> Any:
        if self.marks is not None:
            Path(self.marks, str(os.getpid())).touch()
            time.sleep(self.delay)
        return [ms.sysid_rollout(m, None, ctrl[i], x0[i])[0] for i, m in enumerate(models)]


def test_lost_worker_recomputed(client: Any, arm: Any, tmp_path: Path) -> None:
    """A worker killed mid-evaluation: its columns run elsewhere and the result is right."""
    prob, params = arm
    X = candidates(params, 4, seed=2)
    expected = ms.build_residual_fn(prob.sequences, custom_rollout=SlowRollout(None, 0))(X, params)
    rf = ms.build_residual_fn(prob.sequences, custom_rollout=SlowRollout(str(tmp_path), 1.5))
    with distribute(rf, client) as drf:
        pids = set(client.run(os.getpid).values())
        out: dict[str, np.ndarray] = {}
        call = threading.Thread(target=lambda: out.setdefault("r", drf(X, params)))
        call.start()
        deadline = time.monotonic() + 30
        while not any(tmp_path.iterdir()) and time.monotonic() < deadline:
            time.sleep(0.05)
        victim = int(next(tmp_path.iterdir()).name)
        assert victim in pids
        os.kill(victim, signal.SIGKILL)
        call.join(timeout=60)
        assert not call.is_alive()
    assert np.array_equal(out["r"], expected)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the lost worker


def test_cli_fit_on_workers_equals_the_local_fit(tmp_path: Path) -> None:
    """``mjsysid fit --workers 2`` spreads the candidates over a local cluster and ends
    where the local fit ends (same iterates: same parameters to the last bit)."""
    from mjsysid.app.cli import main

    outs = {}
    for flag in ([], ["--workers", "2"]):
        out = tmp_path / ("workers" if flag else "local")
        code = main(
            ["fit", "example:dcmotor", "--out", str(out), "--no-report", "-q", *flag],
            stdout=io.StringIO(),
            stderr=io.StringIO(),
        )
        assert code == 0
        outs[bool(flag)] = (
            yaml.safe_load((out / "result.yaml").read_text()),
            np.load(out / "result.npz")["x"],
        )
    (summary_w, x_w), (summary_l, x_l) = outs[True], outs[False]
    np.testing.assert_array_equal(x_w, x_l)
    assert (summary_w["nfev"], summary_w["cost"]) == (summary_l["nfev"], summary_l["cost"])


def test_experiment_executor_key(tmp_path: Path) -> None:
    from mjsysid.app.experiment import ExperimentError, load_experiment, resolve_experiment_path

    text = resolve_experiment_path("example:dcmotor").read_text()
    src = resolve_experiment_path("example:dcmotor").parent
    for f in src.iterdir():
        if f.is_file():
            (tmp_path / f.name).write_bytes(f.read_bytes())
    good = tmp_path / "good.yaml"
    good.write_text(text + "\nexecutor: 3\n")
    assert load_experiment(good).executor == {"workers": 3}
    bad = tmp_path / "bad.yaml"
    bad.write_text(text + "\nexecutor: {workers: 0}\n")
    with pytest.raises(ExperimentError, match=r"executor\.workers must be a positive integer"):
        load_experiment(bad)


def test_local_capabilities_are_the_local_residual_functions(arm: Any) -> None:
    """What a fit or a report reads is forwarded, name by name, to the local residual function
    (no cluster needed: nothing here runs on the workers)."""
    from mjsysid.fit.distributed import _Shared
    from mjsysid.objective.protocols import HorizonResidualFn

    prob, params = arm
    local = ms.build_residual_fn(prob.sequences, nthread=1)
    drf = DistributedResidual(_Shared(client=None, name="none", owns_client=False), local)
    assert isinstance(drf, HorizonResidualFn)
    for name in ("check_params", "signal_groups", "describe_index", "simulates", "predict"):
        assert getattr(drf, name) == getattr(local, name)  # the local one's bound method
    assert drf.sequence_labels == local.sequence_labels
    assert drf.models_sequences == local.models_sequences
    assert np.array_equal(drf.block_offsets, local.block_offsets)
    assert drf.supports_horizons(params) == local.supports_horizons(params)
    assert drf.horizon_samples(0.5, params) == local.horizon_samples(0.5, params)
    assert "forwarded to DistributedResidual.local.predict" in repr(DistributedResidual.predict)
    local.close()


def test_a_deadzone_is_profiled_on_the_workers(client: Any) -> None:
    """The threshold profile's batched calls go to the cluster like the fit's; the deadzone
    started in the wrong ranges ends in the truth's, as in the local run."""
    from test_threshold_levels import _problem

    params, fn = _problem({"deadzone": [60 / 255, 10 / 255], "torque_constant": [0.25, 0.25]}, 0.0)
    fitted, result = ms.optimize(params, fn, max_iters=30, executor=client)
    _, local = ms.optimize(params, fn, max_iters=30)
    assert result.threshold_profile is not None and result.threshold_profile.kept == "refit"
    assert all(20 / 255 < v <= 50 / 255 for v in fitted["m_deadzone"].value)
    assert result.cost < 1e-12
    np.testing.assert_array_equal(result.x, local.x)  # the same numbers as the local run
