"""Plots and offscreen rendering for scripts, notebooks and the HTML report.

* :func:`plot_sensor_comparison`: a matplotlib figure overlaying measured, identified (and
  optionally initial) signals, one axes per signal. The figure is created without pyplot, so
  it works headless (no display, Agg) and leaves no global state behind.
* :func:`render_rollout`: RGB frames of one or several models' full-physics state
  trajectories, drawn into the same picture (the first solid, the others as translucent
  "ghosts"), rendered offscreen.

Offscreen OpenGL. MuJoCo needs an OpenGL context to draw. Without a display, Linux offers two
headless backends: EGL (GPU drivers, or Mesa's software ``llvmpipe``) and OSMesa (pure
software). :func:`render_rollout` honours ``MUJOCO_GL`` (``egl``, ``osmesa``, ``glfw``) and
otherwise tries ``glfw`` (only when ``DISPLAY`` is set), then ``egl``, then ``osmesa``. PyOpenGL
binds one platform per process, so the first backend that loads fixes the choice for the
process. When none works, a :class:`RuntimeError` says how to enable one.

Nothing is written into the user's home folder: Mesa (``llvmpipe``, OSMesa, EGL on Mesa) keeps
compiled shaders in ``~/.cache/mesa_shader_cache``, the home folder found from the password
database (not ``$HOME``) or ``$XDG_CACHE_HOME``. The cache is turned off while the context (and
so Mesa's screen, which decides on the cache) is created, through ``MESA_SHADER_CACHE_DISABLE``
set for that moment only and then removed again; a cache the user chose
(``MESA_SHADER_CACHE_DIR`` or ``MESA_SHADER_CACHE_DISABLE`` set) is left as it is.

matplotlib is imported lazily (``pip install -e '.[report]'`` in the mjsysid checkout).
"""

from __future__ import annotations

import contextlib
import copy
import os
import platform
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.states import STATE_SPEC, state_size
from mjsysid.data.timeseries import TimeSeries
from mjsysid.util.errors import must_be

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

    from mjsysid.objective.residual import SequencePrediction

REPORT_EXTRA_HINT = "pip install -e '.[report]' in the mjsysid checkout"

NO_GL_HELP = (
    "render_rollout needs an offscreen OpenGL context and none could be created. On a machine "
    "without a display, install a headless backend and select it before Python starts: "
    "EGL (Debian/Ubuntu: apt-get install libegl1 libgl1-mesa-dri, or a GPU driver) with "
    "MUJOCO_GL=egl, or OSMesa (apt-get install libosmesa6) with MUJOCO_GL=osmesa"
)

#: Colours (RGBA) of the 2nd, 3rd, ... trajectories drawn by :func:`render_rollout`.
GHOST_COLORS: tuple[tuple[float, float, float, float], ...] = (
    (0.10, 0.75, 0.25, 0.45),
    (0.95, 0.45, 0.10, 0.45),
    (0.55, 0.25, 0.85, 0.45),
    (0.10, 0.55, 0.95, 0.45),
)


def _require_matplotlib() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError as e:
        raise ImportError(f"plot_sensor_comparison needs matplotlib: {REPORT_EXTRA_HINT}") from e
    return Figure


# -- plot_sensor_comparison -----------------------------------------------------------------------
def _as_series(value: Any, what: str, use: str) -> TimeSeries:
    """A TimeSeries from a TimeSeries or a SequencePrediction (its ``use`` attribute)."""
    if isinstance(value, TimeSeries):
        return value
    ts = getattr(value, use, None)
    if isinstance(ts, TimeSeries):
        return ts
    raise TypeError(must_be(what, "a TimeSeries or a SequencePrediction", type(value).__name__))


def _column_groups(ts: TimeSeries, model: mujoco.MjModel | None) -> dict[str, np.ndarray]:
    """``{signal name: columns}``; series without a mapping get names from the model."""
    if ts.signal_mapping is not None:
        return {name: np.asarray(cols) for name, (_, cols) in ts.signal_mapping.items()}
    if model is not None and ts.dim == model.nsensordata:
        out = {}
        for i in range(model.nsensor):
            name = model.sensor(i).name or f"sensor {i}"
            adr, dim = int(model.sensor_adr[i]), int(model.sensor_dim[i])
            out[name] = np.arange(adr, adr + dim)
        return out
    return {f"column {j}": np.array([j]) for j in range(ts.dim)}


def plot_sensor_comparison(
    model: mujoco.MjModel | None,
    predicted: TimeSeries | SequencePrediction,
    measured: TimeSeries | SequencePrediction | None = None,
    *,
    initial: TimeSeries | SequencePrediction | None = None,
    signals: Sequence[str] | None = None,
    title: str | None = None,
    ncols: int = 2,
    figsize: tuple[float, float] | None = None,
) -> Figure:
    """Overlays measured and predicted signals, one axes per signal.

    Each axes holds, for every column of the signal, the measured line (black), the identified
    prediction (solid, blue) and, when ``initial`` is given, the initial prediction (dashed,
    orange): ``2`` or ``3`` lines per column.

    Args:
      model: Compiled model; names the columns of series without a signal mapping (may be
        ``None`` when the series carry names).
      predicted: Identified prediction: a :class:`TimeSeries`, or a
        :class:`~mjsysid.objective.residual.SequencePrediction` (its ``predicted_at_measured``).
      measured: The recording (a TimeSeries, or a SequencePrediction's ``measured_used``).
        Default: taken from ``predicted`` when that is a SequencePrediction.
      initial: Optional prediction before the fit (TimeSeries or SequencePrediction).
      signals: Signal names to plot (default: every signal of ``measured``).
      title: Figure title.
      ncols: Axes per row.
      figsize: Inches; default grows with the number of signals.

    Returns:
      A ``matplotlib.figure.Figure`` (not attached to pyplot; ``fig.savefig(...)`` works
      without a display, and notebooks display it).

    Raises:
      ImportError: matplotlib is missing.
      TypeError: An argument is neither a TimeSeries nor a SequencePrediction.
      KeyError: A name in ``signals`` is not a measured signal.
    """
    figure_cls = _require_matplotlib()
    pred, meas, init = _comparison_series(predicted, measured, initial)
    if not isinstance(ncols, int) or ncols < 1:
        raise ValueError(must_be("ncols", "a positive integer", ncols))
    groups = _selected_groups(_column_groups(meas, model), signals)
    lines = [(pred, _column_groups(pred, model), _IDENTIFIED_STYLE)]
    if init is not None:
        lines.append((init, _column_groups(init, model), _INITIAL_STYLE))
    n = max(len(groups), 1)
    cols = min(ncols, n)
    rows = -(-n // cols)
    fig = figure_cls(figsize=figsize or (6.0 * cols, 2.6 * rows + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax in axes[len(groups) :]:
        ax.set_visible(False)
    for ax, (name, mcols) in zip(axes, groups.items(), strict=False):
        _plot_signal(ax, name, mcols, meas, lines)
    if title:
        fig.suptitle(title)
    return fig


def _comparison_series(
    predicted: Any, measured: Any, initial: Any
) -> tuple[TimeSeries, TimeSeries, TimeSeries | None]:
    """``(identified, measured, initial or None)`` series of :func:`plot_sensor_comparison`."""
    pred = _as_series(predicted, "predicted", "predicted_at_measured")
    if measured is None:
        if isinstance(predicted, TimeSeries):
            raise TypeError(must_be("measured", "given when predicted is a TimeSeries", None))
        meas = _as_series(predicted, "predicted", "measured_used")
    else:
        meas = _as_series(measured, "measured", "measured_used")
    init = None if initial is None else _as_series(initial, "initial", "predicted_at_measured")
    return pred, meas, init


_IDENTIFIED_STYLE: dict[str, Any] = {"color": "tab:blue", "lw": 1.2, "label": "identified"}
_INITIAL_STYLE: dict[str, Any] = {"color": "tab:orange", "lw": 1.0, "ls": "--", "label": "initial"}


def _selected_groups(
    groups: dict[str, np.ndarray], signals: Sequence[str] | None
) -> dict[str, np.ndarray]:
    """``groups`` restricted to ``signals`` (in that order); KeyError for an unknown name."""
    if signals is None:
        return groups
    names = [signals] if isinstance(signals, str) else list(signals)
    unknown = [n for n in names if n not in groups]
    if unknown:
        raise KeyError(f"signals {unknown} must be measured signals; known: {list(groups)}")
    return {n: groups[n] for n in names}


def _plot_signal(
    ax: Any,
    name: str,
    mcols: np.ndarray,
    meas: TimeSeries,
    lines: Sequence[tuple[TimeSeries, dict[str, np.ndarray], dict[str, Any]]],
) -> None:
    """One axes: per column the measured line and every prediction that has the signal."""
    single = mcols.size == 1
    for j, c in enumerate(mcols):
        suffix = "" if single else f"[{j}]"
        ax.plot(meas.times, meas.data[:, c], color="black", lw=1.2, label=f"measured{suffix}")
        for series, groups, style in lines:
            if name in groups and j < groups[name].size:
                ax.plot(
                    series.times,
                    series.data[:, groups[name][j]],
                    **{**style, "label": f"{style['label']}{suffix}"},
                )
    ax.set_title(name)
    ax.set_xlabel("time [s]")
    ax.grid(True, alpha=0.3)
    if single or mcols.size <= 3:
        ax.legend(fontsize="small", loc="best")


# -- render_rollout -------------------------------------------------------------------------------
class OffscreenRenderingError(RuntimeError):
    """No offscreen OpenGL context could be created (see :data:`NO_GL_HELP`)."""


class GLContext(Protocol):
    """What :func:`render_rollout` needs from an OpenGL context (MuJoCo's GLContext classes)."""

    def make_current(self) -> None: ...

    def free(self) -> None: ...


GLContextFactory = Callable[[int, int], GLContext]

_DISABLED = ("disable", "disabled", "off", "false", "0")


def _backend_factory(name: str) -> GLContextFactory:
    """Imports MuJoCo's GLContext class for backend ``name`` (errors surface when called)."""

    def factory(width: int, height: int) -> GLContext:
        if name == "egl":
            from mujoco.egl import GLContext as Ctx
        elif name == "osmesa":
            from mujoco.osmesa import GLContext as Ctx
        elif name == "glfw":
            from mujoco.glfw import GLContext as Ctx
        else:  # the platform default chosen by mujoco at import (cgl, wgl, ...)
            from mujoco.gl_context import GLContext as Ctx
        return Ctx(width, height)

    return factory


def gl_backend_candidates() -> list[tuple[str, GLContextFactory]]:
    """OpenGL backends :func:`render_rollout` tries, in order (see the module docstring)."""
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    if requested in _DISABLED:
        return []
    if requested in ("egl", "osmesa", "glfw"):
        return [(requested, _backend_factory(requested))]
    if platform.system() != "Linux":
        return [(requested or "default", _backend_factory("default"))]
    pyopengl = os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
    if pyopengl in ("egl", "osmesa"):
        return [(pyopengl, _backend_factory(pyopengl))]
    names = (["glfw"] if os.environ.get("DISPLAY") else []) + ["egl", "osmesa"]
    return [(n, _backend_factory(n)) for n in names]


_SHADER_CACHE = ("MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE")
_USER_CACHE = (*_SHADER_CACHE, "MESA_SHADER_CACHE_DIR", "MESA_GLSL_CACHE_DIR")


@contextlib.contextmanager
def _no_shader_cache() -> Iterator[None]:
    """Mesa's on-disk shader cache off within the block (see the module docstring); the
    environment is as it was after it."""
    if any(name in os.environ for name in _USER_CACHE):
        yield  # the user chose where (or whether) Mesa caches
        return
    for name in _SHADER_CACHE:
        os.environ[name] = "true"
    try:
        yield
    finally:
        for name in _SHADER_CACHE:
            os.environ.pop(name, None)


def create_gl_context(width: int, height: int) -> tuple[str, GLContext]:
    """Creates and makes current an offscreen OpenGL context.

    Returns:
      ``(backend name, context)``; the caller frees the context.

    Raises:
      OffscreenRenderingError: (a RuntimeError) No backend works; the message says how to
        enable one and why each candidate failed.
    """
    candidates = gl_backend_candidates()
    if not candidates:
        raise OffscreenRenderingError(
            f"{NO_GL_HELP}. Rendering is disabled by MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}"
        )
    failures = []
    for name, factory in candidates:
        try:
            with _no_shader_cache():  # nothing written to ~/.cache by Mesa
                ctx = factory(width, height)
                ctx.make_current()
        except Exception as e:  # GL backends fail with ImportError, OSError, GLError, ...
            failures.append(f"{name}: {type(e).__name__}: {e}".strip())
            continue
        return name, ctx
    raise OffscreenRenderingError(f"{NO_GL_HELP}. Tried: {'; '.join(failures)}")


def _as_list(value: Any, kind: type | tuple[type, ...]) -> list[Any] | None:
    if value is None:
        return None
    if isinstance(value, kind):
        return [value]
    return list(value)


def _as_states(state: Any) -> list[np.ndarray]:
    """One ``(nstep, nstate)`` array, a stacked 3-D array, or a list of 2-D arrays -> list."""
    if isinstance(state, np.ndarray):
        items = [state] if state.ndim != 3 else list(state)
    elif isinstance(state, Sequence) and state and all(np.ndim(s) == 2 for s in state):
        items = list(state)
    else:
        items = [state]
    return [np.asarray(s, dtype=np.float64) for s in items]


def frame_indices(times: np.ndarray, frame_times: np.ndarray) -> np.ndarray:
    """Index of the last sample at or before each frame time (clipped to the series)."""
    idx = (
        np.searchsorted(
            times, frame_times + 1e-9 * max(1.0, float(np.abs(times).max())), side="right"
        )
        - 1
    )
    return np.clip(idx, 0, times.size - 1)


def _trajectory_times(model: mujoco.MjModel, state: np.ndarray) -> np.ndarray:
    """The time column of full-physics states, or ``k·timestep`` when it is not increasing."""
    t = state[:, 0]
    if t.size > 1 and np.all(np.diff(t) > 0):
        return t
    return float(model.opt.timestep) * np.arange(state.shape[0])


def _camera(model: mujoco.MjModel, camera: int | str | mujoco.MjvCamera | None) -> mujoco.MjvCamera:
    if isinstance(camera, mujoco.MjvCamera):
        return camera
    cam = mujoco.MjvCamera()
    if camera is None:
        mujoco.mjv_defaultFreeCamera(model, cam)
        return cam
    if isinstance(camera, str):
        cid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_CAMERA, camera)
        if cid < 0:
            known = [model.camera(i).name for i in range(model.ncam)]
            raise KeyError(f"camera {camera!r} must be a camera of the model; known: {known}")
    elif isinstance(camera, int | np.integer) and not isinstance(camera, bool):
        cid = int(camera)
        if cid == -1:
            mujoco.mjv_defaultFreeCamera(model, cam)
            return cam
        if not 0 <= cid < model.ncam:
            raise ValueError(must_be("camera", f"a camera id in [-1, {model.ncam})", camera))
    else:
        raise TypeError(must_be("camera", "None, a camera name, an id or an MjvCamera", camera))
    cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
    cam.fixedcamid = cid
    return cam


def render_rollout(
    model: mujoco.MjModel | Sequence[mujoco.MjModel],
    data: mujoco.MjData | Sequence[mujoco.MjData] | None,
    state: npt.ArrayLike | Sequence[npt.ArrayLike],
    framerate: float = 30.0,
    camera: int | str | mujoco.MjvCamera | None = None,
    width: int = 320,
    height: int = 240,
    light_pos: Sequence[float] | None = None,
    *,
    ghost_colors: Sequence[Sequence[float]] | None = None,
    max_frames: int | None = None,
    fast: bool = True,
) -> list[np.ndarray]:
    """Renders state trajectories offscreen, several models overlaid in one picture.

    The first trajectory is drawn with the model's own colours; every further one is drawn
    on top as a translucent ghost (``ghost_colors``, its static world geoms left out), so a
    measured and an identified motion can be compared in one video.

    Args:
      model: One compiled model (shared by all trajectories) or one per trajectory. Models
        must have the same kinematic structure as their states.
      data: Scratch ``MjData`` (one, or one per model) or ``None`` to create them. Their
        contents are overwritten.
      state: ``(nstep, nstate)`` full-physics states (``mjSTATE_FULLPHYSICS``, as in
        :class:`~mjsysid.objective.residual.SequencePrediction.state`), or a list of them, one per
        trajectory. Frame times come from the state's time column (entry 0); trajectories
        may have different lengths and sampling: each frame shows every trajectory at the
        same time (the last sample at or before it).
      framerate: Frames per second of simulated time.
      camera: ``None`` or ``-1`` (free camera framing the whole model), a camera name or id,
        or an ``MjvCamera``.
      width, height: Image size in pixels (the offscreen buffer is enlarged as needed).
        ``camera``, ``width``, ``height`` and ``light_pos`` come in ``mujoco.sysid``'s
        positional order (its defaults are ``-1``, 640 and 480).
      light_pos: ``(3,)`` position (m) of an extra spotlight pointing down, or ``None``.
      ghost_colors: RGBA of the 2nd, 3rd, ... trajectories (default :data:`GHOST_COLORS`).
      max_frames: Stop after this many frames.
      fast: Turn off shadows, reflections and multisampling: much faster with software
        OpenGL (Mesa llvmpipe, OSMesa).

    Returns:
      List of ``(height, width, 3)`` uint8 RGB frames.

    Raises:
      OffscreenRenderingError: (a ``RuntimeError``) No offscreen OpenGL context can be
        created; the message says how to enable one (``MUJOCO_GL=egl`` or ``osmesa``).
      ValueError: Shapes that do not match the models, or bad options.
    """
    models, datas, states = _rollout_inputs(model, data, state)
    colors, light = _render_options(framerate, width, height, ghost_colors, light_pos)
    frames = _FrameSchedule.of(models, states, framerate, max_frames)
    buffer_model = _buffer_model(models[0], width, height, fast)
    cam = _camera(models[0], camera)
    _, ctx = create_gl_context(width, height)
    mjr = None
    try:
        mjr = mujoco.MjrContext(buffer_model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, mjr)
        renderer = _Renderer(
            _scene(models, fast),
            mjr,
            cam,
            colors,
            mujoco.MjrRect(0, 0, width, height),
            np.empty((height, width, 3), dtype=np.uint8),
            light,
        )
        return [
            renderer.frame(models, datas, states, [int(idx[f]) for idx in frames.picks])
            for f in range(frames.times.size)
        ]
    finally:
        if mjr is not None:
            mjr.free()
        ctx.free()


def _render_options(
    framerate: float,
    width: int,
    height: int,
    ghost_colors: Sequence[Sequence[float]] | None,
    light_pos: Sequence[float] | None,
) -> tuple[list[tuple[float, ...]], np.ndarray | None]:
    """The checked options of :func:`render_rollout`: ``(ghost colours, light position)``."""
    if not (np.isfinite(framerate) and framerate > 0):
        raise ValueError(must_be("framerate", "a positive number of frames per second", framerate))
    for what, v in (("width", width), ("height", height)):
        if not isinstance(v, int | np.integer) or isinstance(v, bool) or v < 1:
            raise ValueError(must_be(what, "a positive integer number of pixels", v))
    colors = [tuple(float(c) for c in rgba) for rgba in (ghost_colors or GHOST_COLORS)]
    if any(len(c) != 4 for c in colors):
        raise ValueError(must_be("ghost_colors", "RGBA 4-tuples", ghost_colors))
    light = None if light_pos is None else np.asarray(light_pos, dtype=np.float64).reshape(-1)
    if light is not None and (light.size != 3 or not np.all(np.isfinite(light))):
        raise ValueError(must_be("light_pos", "None or 3 finite coordinates (m)", light_pos))
    return colors, light


def _rollout_inputs(
    model: Any, data: Any, state: Any
) -> tuple[list[mujoco.MjModel], list[mujoco.MjData], list[np.ndarray]]:
    """One model, one MjData and one checked state array per trajectory."""
    states = _as_states(state)
    models = _as_list(model, mujoco.MjModel) or []
    if not states:
        raise ValueError(must_be("state", "a (nstep, nstate) array or a non-empty list", state))
    if len(models) == 1 and len(states) > 1:
        models = models * len(states)
    if len(models) != len(states):
        raise ValueError(
            must_be(
                "model", f"one model or {len(states)} (one per trajectory)", f"{len(models)} models"
            )
        )
    for i, (m, s) in enumerate(zip(models, states, strict=True)):
        _check_trajectory(i, m, s)
    datas = _as_list(data, mujoco.MjData)
    if datas is None:
        datas = [mujoco.MjData(m) for m in models]
    elif len(datas) == 1 and len(models) > 1:
        datas = datas + [mujoco.MjData(m) for m in models[1:]]
    if len(datas) != len(models):
        raise ValueError(must_be("data", f"None, one MjData or {len(models)}", f"{len(datas)}"))
    return models, datas, states


def _check_trajectory(i: int, m: Any, s: np.ndarray) -> None:
    if not isinstance(m, mujoco.MjModel):
        raise TypeError(must_be(f"model[{i}]", "a compiled mujoco.MjModel", type(m).__name__))
    if s.ndim != 2 or s.shape[1] != state_size(m) or s.shape[0] < 1:
        raise ValueError(
            must_be(
                f"state[{i}]",
                f"shape (nstep, {state_size(m)}) of full-physics states",
                s,
                hint=f"got shape {s.shape}",
            )
        )
    if not np.all(np.isfinite(s)):
        raise ValueError(must_be(f"state[{i}]", "finite", s))


@dataclass(frozen=True)
class _FrameSchedule:
    """Frame times ``(nframe,)`` [s] and, per trajectory, the state index shown in each frame."""

    times: np.ndarray
    picks: list[np.ndarray]

    @classmethod
    def of(
        cls,
        models: Sequence[mujoco.MjModel],
        states: Sequence[np.ndarray],
        framerate: float,
        max_frames: int | None,
    ) -> _FrameSchedule:
        times = [_trajectory_times(m, s) for m, s in zip(models, states, strict=True)]
        t0 = float(times[0][0])
        t1 = float(max(t[-1] for t in times))
        frame_times = t0 + np.arange(int(np.floor((t1 - t0) * framerate + 1e-9)) + 1) / framerate
        if max_frames is not None:
            frame_times = frame_times[: max(int(max_frames), 1)]
        return cls(frame_times, [frame_indices(t, frame_times) for t in times])


def _buffer_model(base: mujoco.MjModel, width: int, height: int, fast: bool) -> mujoco.MjModel:
    """``base``, or a copy whose offscreen buffer fits the image (no multisampling if fast)."""
    if not (
        width > base.vis.global_.offwidth
        or height > base.vis.global_.offheight
        or (fast and base.vis.quality.offsamples)
    ):
        return base
    buffer_model = copy.copy(base)
    buffer_model.vis.global_.offwidth = max(width, base.vis.global_.offwidth)
    buffer_model.vis.global_.offheight = max(height, base.vis.global_.offheight)
    if fast:
        buffer_model.vis.quality.offsamples = 0
    return buffer_model


def _scene(models: Sequence[mujoco.MjModel], fast: bool) -> mujoco.MjvScene:
    """A scene with room for every model's geoms (no shadows or reflections if fast)."""
    scene = mujoco.MjvScene(models[0], maxgeom=max(1000, sum(int(m.ngeom) + 50 for m in models)))
    if fast:
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION):
            scene.flags[flag] = 0
    return scene


@dataclass
class _Renderer:
    """What every frame reuses: scene, GPU context, camera, options and the pixel buffer."""

    scene: mujoco.MjvScene
    mjr: mujoco.MjrContext
    cam: mujoco.MjvCamera
    colors: Sequence[tuple[float, ...]]
    rect: mujoco.MjrRect
    rgb: np.ndarray
    light_pos: np.ndarray | None = None
    opt: mujoco.MjvOption = field(default_factory=mujoco.MjvOption)
    pert: mujoco.MjvPerturb = field(default_factory=mujoco.MjvPerturb)

    def frame(
        self,
        models: Sequence[mujoco.MjModel],
        datas: Sequence[mujoco.MjData],
        states: Sequence[np.ndarray],
        rows: Sequence[int],
    ) -> np.ndarray:
        """The states at ``rows``, the first trajectory solid, the others as ghosts; (h, w, 3)."""
        opt, pert, scene = self.opt, self.pert, self.scene
        for m, d, s, row in zip(models, datas, states, rows, strict=True):
            mujoco.mj_setState(m, d, s[row], STATE_SPEC.value)
            mujoco.mj_fwdPosition(m, d)
        mujoco.mjv_updateScene(
            models[0], datas[0], opt, pert, self.cam, mujoco.mjtCatBit.mjCAT_ALL.value, scene
        )
        for k in range(1, len(models)):
            start = scene.ngeom
            mujoco.mjv_addGeoms(
                models[k], datas[k], opt, pert, mujoco.mjtCatBit.mjCAT_DYNAMIC.value, scene
            )
            rgba = self.colors[(k - 1) % len(self.colors)]
            for g in range(start, scene.ngeom):
                scene.geoms[g].rgba[:] = rgba
                scene.geoms[g].matid = -1
        if self.light_pos is not None:
            self._add_light(scene, self.light_pos)
        mujoco.mjr_render(self.rect, scene, self.mjr)
        mujoco.mjr_readPixels(self.rgb, None, self.rect, self.mjr)
        return np.flipud(self.rgb).copy()

    @staticmethod
    def _add_light(scene: mujoco.MjvScene, pos: np.ndarray) -> None:
        """A spotlight at ``pos`` pointing down (``mujoco.sysid``'s ``light_pos``)."""
        if scene.nlight >= len(scene.lights):
            return
        light = scene.lights[scene.nlight]
        scene.nlight += 1
        light.pos[:] = pos
        light.dir[:] = (0.0, 0.0, -1.0)
        light.type = mujoco.mjtLightType.mjLIGHT_SPOT
        light.diffuse[:] = (0.7, 0.7, 0.7)
        light.specular[:] = (0.3, 0.3, 0.3)
        light.ambient[:] = (0.0, 0.0, 0.0)
        light.attenuation[:] = (1.0, 0.0, 0.0)
        light.cutoff, light.exponent, light.castshadow = 45.0, 10.0, False


__all__ = ["OffscreenRenderingError", "plot_sensor_comparison", "render_rollout"]
