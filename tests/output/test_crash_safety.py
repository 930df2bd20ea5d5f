"""Nothing lost: atomic writes, checkpoint + SIGKILL + resume, and no pickle anywhere.

(a) A crash in the middle of any write (simulated by making the payload write or the final
    rename fail, or by SIGKILL-ing a process that writes in a loop) never leaves a half-written
    file under the final name, and an older complete file stays intact.
(b) A fit killed with SIGKILL after a few iterations resumes from its checkpoint and reaches the
    answer of an uninterrupted run; the checkpoint is loadable at every moment.
(c) Results are YAML + npz: every npz loads with ``allow_pickle=False``, no pickle files, and
    YAML with python object tags (or an npz with a pickled payload) is refused by every loader
    without running the payload.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest
import yaml

import mjsysid as ms
from conftest import ARM2, excitation, simulate
from mjsysid.app import cli
from mjsysid.app.experiment import bundled_examples, load_experiment
from mjsysid.fit.checkpoints import load_checkpoint

TESTS = Path(__file__).resolve().parents[1]  # tests/, where conftest.py lives


class Crash(Exception):
    """Stands for the process dying in the middle of a write."""


# --------------------------------------------------------------------------------------------
# A small problem: a 2-link arm, link masses and joint dampings (4 parameters, ~9 iterations)

FIT_SCRIPT = textwrap.dedent(
    '''
    """Fits a small arm problem with a checkpoint; slow on purpose so it can be killed."""
    import sys
    import time

    import mujoco
    import numpy as np

    import mjsysid as ms
    from conftest import ARM2, excitation, simulate


    def build():
        spec = mujoco.MjSpec.from_string(ARM2)
        model = spec.compile()

        def params():
            d = ms.ParameterDict([ms.body_inertia_param(spec, model, b)
                                  for b in ("link1", "link2")])
            d.add(ms.make_parameter("joint_damping", model, "j1"))
            d.add(ms.make_parameter("joint_damping", model, "j2"))
            return d

        truth = params()
        truth.update_from_vector([1.3, 0.5, 0.12, 0.08])
        x0 = ms.create_initial_state(model, qpos=[0.3, -0.2])
        sens, control = simulate(spec, truth, excitation(400, 2, scale=2.0), x0)
        seqs = ms.ModelSequences("arm2", spec, "s", x0, control, sens)
        start = params()
        start.update_from_vector([0.4, 2.0, 0.01, 0.4])
        return start, ms.build_residual_fn(seqs)


    if __name__ == "__main__":
        checkpoint, delay = sys.argv[1], float(sys.argv[2])
        params, rf = build()

        def slow(iteration, x, cost):
            time.sleep(delay)

        ms.optimize(params, rf, max_iters=100, checkpoint=checkpoint, callback=slow)
        print("finished")
    '''
)


@pytest.fixture(scope="module")
def fit_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("script") / "slow_fit.py"
    path.write_text(FIT_SCRIPT)
    return path


@pytest.fixture(scope="module")
def fit_problem(fit_script: Path):
    """The very problem the script fits, built in this process by the script's own code."""
    namespace: dict[str, Any] = {}
    exec(compile(fit_script.read_text(), str(fit_script), "exec"), namespace)  # not __main__
    params, rf = namespace["build"]()
    yield params, rf
    rf.close()


@pytest.fixture(scope="module")
def arm():
    """A tiny arm fit (2 masses) for the write tests: spec, sequences, two results."""
    spec = mujoco.MjSpec.from_string(ARM2)
    model = spec.compile()

    def masses() -> ms.ParameterDict:
        return ms.ParameterDict([ms.body_inertia_param(spec, model, b) for b in ("link1", "link2")])

    truth = masses()
    truth.update_from_vector([1.3, 0.5])
    x0 = ms.create_initial_state(model, qpos=[0.3, -0.2])
    sens, control = simulate(spec, truth, excitation(100, 2), x0)
    seqs = ms.ModelSequences("arm2", spec, "s", x0, control, sens)
    rf = ms.build_residual_fn(seqs, nthread=1)
    p0 = masses()
    early = ms.optimize(p0, rf, max_iters=1)
    final = ms.optimize(p0, rf, max_iters=50)
    assert not np.allclose(early[1].x, final[1].x)
    yield {
        "seqs": seqs,
        "rf": rf,
        "p0": p0,
        "early": early,
        "final": final,
        "sens": sens,
        "masses": masses,
    }
    rf.close()


# --------------------------------------------------------------------------------------------
# Helpers: simulated crashes and file contents


class _HalfWriter:
    """A file object that writes half of the payload, then 'dies'."""

    def __init__(self, f: Any) -> None:
        self._f = f

    def __enter__(self) -> _HalfWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self._f.close()

    def write(self, data: bytes) -> int:
        self._f.write(data[: len(data) // 2])
        self._f.flush()
        raise Crash("simulated crash in the middle of the payload")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


@contextlib.contextmanager
def crash_on_write(monkeypatch: pytest.MonkeyPatch, mode: str, nth: int = 1) -> Iterator[list]:
    """Makes the ``nth`` atomic write die: mid-payload, or after the payload before the rename.

    Yields the list of final paths that the rename step was asked for (before-rename mode).
    """
    count = {"n": 0}
    targets: list = []
    with monkeypatch.context() as m:
        if mode == "before-rename":
            real_replace = os.replace

            def replace(src: Any, dst: Any, *a: Any, **k: Any) -> None:
                count["n"] += 1
                targets.append(Path(dst))
                if count["n"] == nth:
                    raise Crash(f"simulated crash before renaming onto {dst}")
                real_replace(src, dst, *a, **k)

            m.setattr(os, "replace", replace)
        else:
            real_fdopen = os.fdopen

            def fdopen(fd: int, *a: Any, **k: Any) -> Any:
                f = real_fdopen(fd, *a, **k)
                count["n"] += 1
                return _HalfWriter(f) if count["n"] == nth else f

            m.setattr(os, "fdopen", fdopen)
        yield targets


MODES = ["mid-payload", "before-rename"]


def _content(path: Path) -> Any:
    """What a file holds, comparable across writes (npz zip timestamps differ)."""
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as z:
            return {k: (z[k].dtype.str, z[k].shape, z[k].tobytes()) for k in z.files}
    if path.suffix == ".yaml":
        return yaml.safe_load(path.read_text())
    return path.read_bytes()


def _snapshot(folder: Path) -> dict[str, Any]:
    return {p.name: _content(p) for p in sorted(folder.iterdir())}


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


# --------------------------------------------------------------------------------------------
# (a) Atomic writes


@pytest.mark.parametrize("mode", MODES)
def test_parameter_file_survives_a_crash(arm, tmp_path: Path, monkeypatch, mode: str):
    path = tmp_path / "params.yaml"
    old = arm["masses"]()
    old.update_from_vector([1.1, 0.6])
    old.save_to_disk(path)
    before = path.read_bytes()
    new = arm["masses"]()
    new.update_from_vector([1.3, 0.5])
    with crash_on_write(monkeypatch, mode), pytest.raises(Crash):
        new.save_to_disk(path)
    assert path.read_bytes() == before
    np.testing.assert_array_equal(ms.ParameterDict.load_from_disk(path).as_vector(), [1.1, 0.6])
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", MODES)
def test_timeseries_file_survives_a_crash(arm, tmp_path: Path, monkeypatch, mode: str):
    path = tmp_path / "sens.npz"
    old = arm["sens"]
    old.save_to_disk(path)
    before = path.read_bytes()
    new = ms.TimeSeries(old.times, 2.0 * old.data, old.signal_mapping)
    with crash_on_write(monkeypatch, mode), pytest.raises(Crash):
        new.save_to_disk(path)
    assert path.read_bytes() == before
    np.testing.assert_array_equal(ms.TimeSeries.load_from_disk(path).data, old.data)
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("mode", MODES)
def test_checkpoint_survives_a_crash_during_a_later_write(
    arm, tmp_path: Path, monkeypatch, mode: str
):
    path = tmp_path / "fit.ckpt.npz"
    params = arm["masses"]()
    params.update_from_vector([0.6, 1.5])
    done: list[int] = []  # iterations whose checkpoint write completed (it precedes the callback)
    with crash_on_write(monkeypatch, mode, nth=3), pytest.raises(Crash):
        ms.optimize(
            params,
            arm["rf"],
            max_iters=50,
            checkpoint=path,
            callback=lambda it, x, cost: done.append(it),
        )
    x, iteration = load_checkpoint(path, params)
    assert done and iteration == done[-1]  # the last complete write, not the one that died
    assert np.all(np.isfinite(x))
    assert _leftovers(tmp_path) == []


def _save(arm, folder: Path, which: str) -> Path:
    opt, res = arm[which]
    return ms.save_results(folder, arm["seqs"], arm["p0"], opt, res, arm["rf"])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "nth", [1, 3, 4, 7], ids=["params_x_0", "result.npz", "confidence.npz", "result.yaml"]
)
def test_results_folder_crash_leaves_no_half_written_file(
    arm, tmp_path: Path, monkeypatch, mode: str, nth: int
):
    folder = tmp_path / "fit"
    new_folder = _save(arm, tmp_path / "reference", "final")  # what a complete new save holds
    new = _snapshot(new_folder)
    _save(arm, folder, "early")
    old = _snapshot(folder)
    with crash_on_write(monkeypatch, mode, nth=nth), pytest.raises(Crash):
        _save(arm, folder, "final")
    after = _snapshot(folder)  # every file parses: none is half-written
    assert _leftovers(folder) == []
    for name, content in after.items():
        assert content in (old.get(name), new.get(name)), name
    # The summary is written last: a folder with a mix of old and new files never loads as
    # complete. It either says the save was interrupted or still holds the old results whole.
    try:
        loaded = ms.load_results(folder)
    except FileNotFoundError as e:
        assert "saving was interrupted" in str(e)
    else:
        assert after == old
        np.testing.assert_array_equal(loaded.result.x, arm["early"][1].x)
    # A complete save afterwards loads as the new result.
    _save(arm, folder, "final")
    np.testing.assert_array_equal(ms.load_results(folder).result.x, arm["final"][1].x)


def test_results_crash_while_overwriting_keeps_the_older_complete_results(
    arm, tmp_path: Path, monkeypatch
):
    folder = tmp_path / "fit"
    _save(arm, folder, "early")
    with crash_on_write(monkeypatch, "mid-payload", nth=3), pytest.raises(Crash):
        _save(arm, folder, "final")
    np.testing.assert_array_equal(ms.load_results(folder).result.x, arm["early"][1].x)


WRITER_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import mjsysid as ms

    path = sys.argv[1]
    rng = np.random.default_rng(0)
    times = np.arange(50_000) * 1e-3
    versions = [ms.TimeSeries(times, rng.standard_normal((times.size, 8)) + k) for k in (0, 1)]
    print("ready", flush=True)
    k = 0
    while True:
        versions[k % 2].save_to_disk(path)
        k += 1
    """
)


def test_sigkill_while_writing_never_leaves_a_half_written_file(tmp_path: Path):
    script = tmp_path / "writer.py"
    script.write_text(WRITER_SCRIPT)
    path = tmp_path / "big.npz"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert path.exists(), proc.stderr.read().decode() if proc.poll() is not None else ""
        time.sleep(0.2)  # let it get into the middle of a later write
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    ts = ms.TimeSeries.load_from_disk(path)  # complete, whichever version it is
    assert ts.data.shape == (50_000, 8)
    assert round(float(ts.data.mean())) in (0, 1)
    # A temporary file may be left by the kill, but never under the final name.
    assert all(
        p.name.startswith(".big.npz.")
        for p in tmp_path.iterdir()
        if p.name not in ("writer.py", "big.npz")
    )


# --------------------------------------------------------------------------------------------
# (b) Checkpoint + SIGKILL + resume


def test_sigkill_mid_fit_then_resume_reaches_the_uninterrupted_answer(
    fit_script: Path, fit_problem, tmp_path: Path
):
    params, rf = fit_problem
    ckpt = tmp_path / "fit.ckpt.npz"
    proc = subprocess.Popen(
        [sys.executable, str(fit_script), str(ckpt), "0.25"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(TESTS)},  # the script imports conftest's models
    )
    seen: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(
                    f"the fit ended before it was killed: {proc.stdout.read()!r} "
                    f"{proc.stderr.read()!r}"
                )
            if ckpt.exists():
                _, iteration = load_checkpoint(ckpt, params)  # loadable at every moment
                seen.append(iteration)
                if iteration >= 3:
                    break
            time.sleep(0.01)
        else:
            pytest.fail(f"no checkpoint with 3 iterations within 60 s (saw {seen})")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        out = proc.stdout.read()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert b"finished" not in out  # the kill landed mid-fit
    assert seen == sorted(seen)

    x_ckpt, it_ckpt = load_checkpoint(ckpt, params)
    assert it_ckpt >= 3
    assert not np.allclose(x_ckpt, [1.3, 0.5, 0.12, 0.08], rtol=1e-6)  # not finished yet
    _, full = ms.optimize(params, rf, max_iters=100)
    assert full.nit > it_ckpt  # it was killed before the uninterrupted run would have stopped
    _, resumed = ms.optimize(params, rf, max_iters=100, checkpoint=ckpt, resume=True)
    np.testing.assert_allclose(resumed.x, full.x, rtol=1e-8)
    np.testing.assert_allclose(resumed.x, [1.3, 0.5, 0.12, 0.08], rtol=1e-6)
    assert resumed.success
    x_end, it_end = load_checkpoint(ckpt, params)
    assert it_end > it_ckpt  # the resumed run counts on from the checkpoint
    np.testing.assert_array_equal(x_end, resumed.x)


# --------------------------------------------------------------------------------------------
# (c) Never pickled, never executed


def test_nothing_written_is_pickled(arm, tmp_path: Path):
    opt, res = ms.optimize(arm["p0"], arm["rf"], max_iters=20, checkpoint=tmp_path / "c.npz")
    ms.save_results(tmp_path / "results", arm["seqs"], arm["p0"], opt, res, arm["rf"])
    arm["sens"].save_to_disk(tmp_path / "sens.npz")
    opt.save_to_disk(tmp_path / "params.yaml")
    err = io.StringIO()  # and what the command line writes (results, run.yaml, checkpoint)
    code = cli.main(
        [
            "fit",
            "example:arm",
            "--out",
            str(tmp_path / "cli"),
            "--no-report",
            "-q",
            "--max-iters",
            "2",
        ],
        stdout=io.StringIO(),
        stderr=err,
    )
    assert code == 0, err.getvalue()
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    suffixes = {p.suffix for p in files}
    assert suffixes <= {".npz", ".yaml", ".xml"}, suffixes
    npz = [p for p in files if p.suffix == ".npz"]
    assert len(npz) == 4 + 3
    for p in npz:
        with np.load(p, allow_pickle=False) as z:
            for key in z.files:
                assert z[key].dtype != object, (p, key)
        with zipfile.ZipFile(p) as zf:
            assert all(n.endswith(".npy") for n in zf.namelist()), p
    for p in files:
        if p.suffix == ".yaml":
            yaml.safe_load(p.read_text())  # plain data only
        assert not p.read_bytes().startswith(b"\x80"), p  # no pickle protocol header


def _marker_payloads(marker: Path) -> list[str]:
    cmd = f"['touch', {str(marker)!r}]"
    return [
        f"!!python/object/apply:subprocess.check_call [{cmd}]\n",
        f"schema_version: 1\nparameters:\n- !!python/object/apply:subprocess.check_call [{cmd}]\n",
        "schema_version: 1\nparameters:\n- {name: a, nominal: 1.0, min_value: 0.0, "
        f"max_value: 2.0, meta: !!python/object/new:subprocess.check_call [{cmd}]}}\n",
        "!!python/name:os.system\n",
        "!!python/module:os\n",
        "!!python/object:mjsysid.Parameter {name: a}\n",
    ]


@pytest.mark.parametrize(
    "loader",
    [
        "ParameterDict.load_from_disk",
        "ParameterDict.load_values",
        "load_results:result.yaml",
        "load_results:params_x_0.yaml",
        "load_results:params_x_hat.yaml",
        "load_experiment",
        "mjsysid report:run.yaml",
    ],
)
def test_python_object_tags_are_refused_by_every_loader(arm, tmp_path: Path, loader: str):
    marker = tmp_path / "executed"
    results = _save(arm, tmp_path / "results", "early")
    for i, text in enumerate(_marker_payloads(marker)):
        with pytest.raises(
            ValueError,
            match=r"unsupported YAML tag .*python/.*never constructs "
            r"Python objects from files",
        ):
            _load_with(loader, text, tmp_path / f"p{i}.yaml", results, arm["masses"]())
        assert not marker.exists(), text


def _load_with(loader: str, text: str, path: Path, results: Path, params: ms.ParameterDict) -> Any:
    if loader.startswith("load_results"):
        (results / loader.split(":")[1]).write_text(text)
        return ms.load_results(results)
    if loader.startswith("mjsysid report"):
        (results / "run.yaml").write_text(text)
        err = io.StringIO()
        code = cli.main(["report", str(results)], stdout=io.StringIO(), stderr=err)
        assert code == 1, err.getvalue()
        raise ValueError(err.getvalue())
    path.write_text(text)
    if loader == "ParameterDict.load_from_disk":
        return ms.ParameterDict.load_from_disk(path)
    if loader == "load_experiment":
        return load_experiment(path)
    return params.load_values(path)


class _Payload:
    """Unpickling this would run ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple:
        return (subprocess.check_call, (["touch", str(self.marker)],))


def test_pickled_npz_payloads_are_refused_and_never_run(arm, tmp_path: Path):
    marker = tmp_path / "executed"
    payload = np.array([_Payload(marker)], dtype=object)
    params = arm["masses"]()
    names = params.get_non_frozen_parameter_names()

    ts_path = tmp_path / "ts.npz"
    np.savez(
        ts_path,
        times=np.arange(3.0),
        data=np.ones(3),
        signal_mapping_json=payload,
        schema_version=np.array(1),
    )
    ckpt = tmp_path / "c.npz"
    np.savez(
        ckpt,
        x=payload,
        cost=np.array(1.0),
        iteration=np.array(1),
        parameter_names=np.array(names),
        schema_version=np.array(1),
    )
    results = _save(arm, tmp_path / "results", "early")
    np.savez(
        results / "result.npz", x=payload, fun=np.ones(3), jac=np.ones((3, 2)), grad=np.ones(2)
    )

    base = bundled_examples()["arm"].parent
    with np.load(base / "run1.npz", allow_pickle=False) as z:
        columns = {k: z[k] for k in z.files}
    columns["elbow_pos"] = np.array([_Payload(marker)] * columns["time"].size, dtype=object)
    np.savez(tmp_path / "rec.npz", **columns)
    exp = yaml.safe_load((base / "experiment.yaml").read_text())
    exp.update(model=str(base / "arm.xml"), sequences=[{"file": str(tmp_path / "rec.npz")}])
    (tmp_path / "exp.yaml").write_text(yaml.safe_dump(exp))

    pickled = r"is not a readable \.npz file \(Object arrays cannot be loaded when allow_pickle"
    with pytest.raises(ValueError, match=pickled):
        ms.TimeSeries.load_from_disk(ts_path)
    with pytest.raises(ValueError, match=pickled):
        ms.optimize(params, arm["rf"], checkpoint=ckpt, resume=True)
    with pytest.raises(ValueError, match=pickled):
        ms.load_results(results)
    with pytest.raises(ValueError, match=pickled):
        load_experiment(tmp_path / "exp.yaml")
    assert not marker.exists()


def test_damaged_checkpoints_are_named_errors(arm, tmp_path: Path):
    """A checkpoint with the right names but a wrong x, iteration or stage, or a file that is
    not an npz at all, is refused with what is wrong (numpy's broadcast and pickle messages
    before)."""
    params = arm["masses"]()
    names = np.array(params.get_non_frozen_parameter_names())
    good = {
        "x": params.as_vector(),
        "cost": np.array(1.0),
        "iteration": np.array(3),
        "parameter_names": names,
        "horizon": np.array(1.0),
    }
    for edit, match in (
        ({"x": np.ones(params.size + 2)}, r"c\.npz': x must be 2 finite numbers \(one per free"),
        ({"x": np.full(params.size, np.nan)}, r"x must be 2 finite numbers"),
        ({"iteration": np.array(-5)}, r"c\.npz': iteration must be an integer >= 0, got"),
        ({"horizon": np.array(7.0)}, r"c\.npz': horizon must be a fraction in \(0, 1\], got"),
    ):
        ckpt = tmp_path / "c.npz"
        np.savez(ckpt, **{**good, **edit})
        with pytest.raises(ValueError, match=match):
            ms.optimize(params, arm["rf"], checkpoint=ckpt, resume=True)
    ckpt.write_text("not an archive")
    with pytest.raises(ValueError, match=r"c\.npz' is not a readable \.npz file \(not a zip"):
        ms.optimize(params, arm["rf"], checkpoint=ckpt, resume=True)
