"""Tests for mjsysid.plotting: matplotlib comparison plots and offscreen rendering."""

from __future__ import annotations

import io
import sys

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import LIT_ARM
from mjsysid.output import plotting
from mjsysid.output.plotting import (
    NO_GL_HELP,
    OffscreenRenderingError,
    frame_indices,
    gl_backend_candidates,
    plot_sensor_comparison,
    render_rollout,
)

pytest.importorskip("matplotlib", reason="plotting needs the report extra (matplotlib)")

ARM = LIT_ARM.format(
    tip='<site name="tip" pos="0.3 0 0"/>',
    sensors='<jointpos name="j1_pos" joint="j1"/><jointpos name="j2_pos" joint="j2"/>'
    '<framepos name="tip_pos" objtype="site" objname="tip"/>',
)


@pytest.fixture(scope="module")
def arm() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(ARM)


def _rollout(
    model: mujoco.MjModel, qpos: list[float], nstep: int = 250, seed: int = 0
) -> ms.SystemTrajectory:
    rng = np.random.default_rng(seed)
    ctrl = np.repeat(rng.normal(size=(nstep // 25, model.nu)), 25, axis=0)
    x0 = ms.create_initial_state(model, qpos=qpos)
    return ms.sysid_rollout(model, None, ctrl, x0)[0]


# -- plot_sensor_comparison --------------------------------------------------------------------
def _series(model: mujoco.MjModel) -> tuple[ms.TimeSeries, ms.TimeSeries, ms.TimeSeries]:
    tr = _rollout(model, [0.1, -0.2])
    meas = ms.TimeSeries.from_names(tr.times, tr.sensordata, model)
    pred = ms.TimeSeries.from_names(tr.times, tr.sensordata + 0.01, model)
    init = ms.TimeSeries.from_names(tr.times, tr.sensordata - 0.05, model)
    return meas, pred, init


def test_plot_sensor_comparison_axes_and_lines(arm: mujoco.MjModel) -> None:
    meas, pred, init = _series(arm)
    fig = plot_sensor_comparison(arm, pred, meas, initial=init, title="arm")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in axes] == ["j1_pos", "j2_pos", "tip_pos"]
    # measured + identified + initial per column: 1-D sensors 3 lines, framepos 3 x 3.
    assert [len(ax.get_lines()) for ax in axes] == [3, 3, 9]
    np.testing.assert_allclose(axes[0].get_lines()[0].get_ydata(), meas.data[:, 0])
    np.testing.assert_allclose(axes[0].get_lines()[1].get_ydata(), pred.data[:, 0])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")  # headless: no display, no pyplot
    assert buf.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_sensor_comparison_without_initial_and_subset(arm: mujoco.MjModel) -> None:
    meas, pred, _ = _series(arm)
    fig = plot_sensor_comparison(arm, pred, meas, signals=["j2_pos"])
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 1 and len(axes[0].get_lines()) == 2


def test_plot_sensor_comparison_accepts_sequence_prediction(arm: mujoco.MjModel) -> None:
    spec = mujoco.MjSpec.from_string(ARM)
    tr = _rollout(arm, [0.1, -0.2])
    seq = ms.ModelSequences(
        "arm",
        spec,
        "s",
        tr.state[0],
        ms.TimeSeries.from_control_names(tr.times, tr.control, arm),
        ms.TimeSeries.from_names(tr.times, tr.sensordata, arm),
    )
    rf = ms.build_residual_fn(seq, nthread=1)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", arm, "j1")])
    pred = rf.predict(None, params)[0]
    fig = plot_sensor_comparison(arm, pred, initial=pred)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 3
    assert [len(ax.get_lines()) for ax in axes] == [3, 3, 9]
    rf.close()


def test_plot_sensor_comparison_errors(arm: mujoco.MjModel) -> None:
    meas, pred, _ = _series(arm)
    with pytest.raises(KeyError, match="must be measured signals"):
        plot_sensor_comparison(arm, pred, meas, signals=["nope"])
    with pytest.raises(TypeError, match="predicted must be a TimeSeries or a SequencePrediction"):
        plot_sensor_comparison(arm, np.zeros((3, 2)), meas)
    with pytest.raises(TypeError, match="measured must be given"):
        plot_sensor_comparison(arm, pred)


def test_plot_sensor_comparison_missing_matplotlib(
    arm: mujoco.MjModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    meas, pred, _ = _series(arm)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install -e '\.\[report\]' in the mjsysid checkout"):
        plot_sensor_comparison(arm, pred, meas)


# -- render_rollout ----------------------------------------------------------------------------
def test_frame_indices_picks_last_sample_at_or_before() -> None:
    t = np.arange(10) * 0.1
    np.testing.assert_array_equal(
        frame_indices(t, np.array([0.0, 0.1, 0.15, 0.9, 5.0])), [0, 1, 1, 9, 9]
    )


def test_render_rollout_frames_or_documented_error(arm: mujoco.MjModel) -> None:
    a = _rollout(arm, [0.1, -0.2])
    b = _rollout(arm, [0.8, 0.4])
    duration = a.times[-1] - a.times[0]
    try:
        single = render_rollout(arm, None, a.state, 20, width=64, height=48)
    except RuntimeError as e:  # no offscreen OpenGL on this machine: the documented error
        assert isinstance(e, OffscreenRenderingError)
        assert "MUJOCO_GL=egl" in str(e) and "osmesa" in str(e)
        pytest.skip(f"no offscreen OpenGL here, the error is the documented one: {e}")
    assert len(single) == int(np.floor(duration * 20 + 1e-9)) + 1
    assert all(f.shape == (48, 64, 3) and f.dtype == np.uint8 for f in single)
    assert single[0].std() > 0  # something was drawn
    both = render_rollout([arm, arm], None, [a.state, b.state], 20, width=64, height=48)
    assert len(both) == len(single)
    assert any(not np.array_equal(x, y) for x, y in zip(single, both, strict=True))
    # Different lengths and a shared model; a larger image than the offscreen buffer.
    short = render_rollout(
        arm, mujoco.MjData(arm), [a.state, b.state[:50]], 10, width=700, height=500, max_frames=2
    )
    assert len(short) == 2 and short[0].shape == (500, 700, 3)


def test_render_rollout_without_gl_raises_clear_error(
    arm: mujoco.MjModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(width: int, height: int) -> plotting.GLContext:
        raise OSError("libEGL.so.1: cannot open shared object file")

    monkeypatch.setattr(
        plotting, "gl_backend_candidates", lambda: [("egl", broken), ("osmesa", broken)]
    )
    a = _rollout(arm, [0.1, -0.2], nstep=50)
    with pytest.raises(RuntimeError, match="MUJOCO_GL=egl") as info:
        render_rollout(arm, None, a.state, 30)
    assert isinstance(info.value, OffscreenRenderingError)
    assert "egl: OSError: libEGL.so.1" in str(info.value)
    assert str(info.value).startswith(NO_GL_HELP)


def test_render_rollout_disabled_by_env(
    arm: mujoco.MjModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUJOCO_GL", "disable")
    assert gl_backend_candidates() == []
    a = _rollout(arm, [0.1, -0.2], nstep=50)
    with pytest.raises(RuntimeError, match="disabled by MUJOCO_GL='disable'"):
        render_rollout(arm, None, a.state, 30)


def test_gl_backend_candidates_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MUJOCO_GL", "osmesa")
    assert [n for n, _ in gl_backend_candidates()] == ["osmesa"]
    monkeypatch.delenv("MUJOCO_GL")
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)
    monkeypatch.delenv("DISPLAY", raising=False)
    if sys.platform.startswith("linux"):
        assert [n for n, _ in gl_backend_candidates()] == ["egl", "osmesa"]
        monkeypatch.setenv("DISPLAY", ":0")
        assert [n for n, _ in gl_backend_candidates()] == ["glfw", "egl", "osmesa"]


def test_render_rollout_validates_before_touching_gl(arm: mujoco.MjModel) -> None:
    a = _rollout(arm, [0.1, -0.2], nstep=50)
    with pytest.raises(ValueError, match=r"state\[0\] must be shape \(nstep, \d+\)"):
        render_rollout(arm, None, a.state[:, :3], 30)
    with pytest.raises(ValueError, match="model must be one model or 2"):
        render_rollout([arm, arm, arm], None, [a.state, a.state], 30)
    with pytest.raises(ValueError, match="framerate must be a positive number"):
        render_rollout(arm, None, a.state, 0)
    with pytest.raises(ValueError, match="width must be a positive integer"):
        render_rollout(arm, None, a.state, 30, width=0)
    with pytest.raises(KeyError, match="camera 'nope' must be a camera of the model"):
        render_rollout(arm, None, a.state, 30, camera="nope")
