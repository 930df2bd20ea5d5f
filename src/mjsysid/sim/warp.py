"""Rollouts of a population of candidate models as MuJoCo Warp worlds (the ``warp`` extra).

:class:`WarpRollout` has the contract of :meth:`mjsysid.sim.rollout.BatchRollout.run` (and,
with force laws, of :meth:`mjsysid.sim.lockstep.LockstepRollout.run`): ``nbatch`` candidate
models, initial states and controls in; states, sensor values and a finite mask out. Each
rollout is one world of one ``mujoco_warp`` model. The model fields in which the candidates
differ (masses, inertias, dampings, gains, ... and the constants ``mj_setConst`` derived
from them, read from the candidates' compiled models) become per-world fields
(``put_model(..., batch_sizes=...)``); a candidate that differs in a field MuJoCo Warp cannot
vary per world is refused with the field's name.

Force laws run in NumPy (float64) between device steps: before each step the state is
copied to the host, the laws write ``ctrl`` and ``qfrc_applied``, which are copied back. Laws
that read the joint-space dynamics are refused (the CPU rollout runs them).

Precision: MuJoCo Warp computes in float32 (relative rounding ~6e-8 per operation, growing
along a trajectory), so a population's costs are those of the float64 rollout to a few
significant digits: enough to rank candidates in a global search, not for finite-difference
Jacobians, whose default relative step (1.5e-8) is below float32's resolution. The local
least-squares stage therefore stays on the CPU (:mod:`mjsysid.fit.search`). The time column
of the returned states is computed in float64 (``t_0 + (k+1)·dt``); divergence shows as
non-finite values or as an acceleration above MuJoCo's ``mjMAXVAL`` (``1e10``, read from
the velocities): where MuJoCo resets a simulation, MuJoCo Warp goes on.

Devices: ``device=None`` takes Warp's default (a CUDA GPU when there is one, else the CPU).
On the CPU device MuJoCo Warp runs its kernels on one core, slowly: useful for tests, not
for speed. The first run of a model compiles its kernels (minutes on a CPU; cached on disk
by Warp).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np

from mjsysid.data.states import state_size, state_slices
from mjsysid.sim.laws.core import ForceLaw, State, StepContext, run_laws, start_laws
from mjsysid.sim.lockstep import LawEngine, LawRun, merge_laws
from mjsysid.sim.model_key import ModelKey, model_key
from mjsysid.util.errors import must_be

__all__ = ["INSTALL_HINT", "WarpRollout", "import_warp", "warp_available"]

_MAXVAL = 1e10  # MuJoCo's mjMAXVAL: a larger |qacc| is a divergence
INSTALL_HINT = (
    "pip install -e '.[warp]' in the mjsysid checkout (installs mujoco-warp and warp-lang)"
)


def warp_available() -> bool:
    """Whether ``mujoco_warp`` and ``warp`` can be imported (without importing them)."""
    return all(importlib.util.find_spec(m) is not None for m in ("warp", "mujoco_warp"))


def import_warp() -> tuple[Any, Any]:
    """``(warp, mujoco_warp)``, initialised quietly, or an ``ImportError`` saying how to
    install them."""
    try:
        import mujoco_warp as mjw
        import warp as wp
    except ImportError as e:
        raise ImportError(
            f"the Warp backend (rollout='warp') needs MuJoCo Warp: {INSTALL_HINT}"
        ) from e
    if wp.config.log_level == wp.LOG_INFO:  # Warp's default: no module-load lines on stdout
        wp.config.log_level = wp.LOG_WARNING
    wp.init()
    return wp, mjw


def _model_array_fields(mjw: Any) -> tuple[frozenset[str], frozenset[str]]:
    """Names of ``mujoco_warp`` model arrays that are also ``MjModel`` arrays: those that may
    differ per world (spec ``("*", ...)``) and the others."""
    from mujoco_warp._src import types, warp_util

    batched: set[str] = set()
    shared: set[str] = set()
    probe = mujoco.MjModel.from_xml_string("<mujoco/>")
    for f in dataclasses.fields(types.Model):
        if not warp_util.is_array_spec(f.type) or not hasattr(probe, f.name):
            continue
        shape = getattr(f.type, "shape", ())
        (batched if shape and shape[0] == "*" else shared).add(f.name)
    return frozenset(batched), frozenset(shared)


def _differing(
    models: Sequence[mujoco.MjModel], names: frozenset[str], ref: mujoco.MjModel
) -> dict[str, np.ndarray]:
    """``{field: (nbatch, ...) values}`` of the fields among ``names`` in which a model
    differs from ``ref``."""
    out = {}
    for name in sorted(names):
        first = getattr(ref, name)
        if not isinstance(first, np.ndarray) or first.size == 0:
            continue
        values = np.array([getattr(m, name) for m in models])
        if (values != first).any():
            out[name] = values
    return out


class WarpRollout(LawEngine):
    """Rolls out candidate models as MuJoCo Warp worlds (module docstring).

    Args:
      laws: Force laws, run on the host between device steps (none reading the dynamics).
      device: A Warp device name (``"cuda:0"``, ``"cpu"``); ``None``: Warp's default.

    Raises:
      ImportError: ``mujoco_warp`` or ``warp`` is not installed (with the install command).
      ValueError: A law reads the joint-space dynamics.
    """

    def __init__(self, laws: Sequence[ForceLaw] = (), device: str | None = None) -> None:
        self._wp, self._mjw = import_warp()
        super().__init__(laws)
        self.device = self._wp.get_device(device)
        dyn = [law.name for law in self.laws if law.dynamics]
        if dyn:
            raise ValueError(
                must_be(
                    "force laws on the Warp backend",
                    "laws that do not read the joint-space dynamics",
                    dyn,
                    "run them with rollout='cpu'",
                )
            )
        self._fields = _model_array_fields(self._mjw)
        self._models: dict[tuple[object, ...], Any] = {}
        self._refs: dict[ModelKey, mujoco.MjModel] = {}
        self._datas: dict[tuple[ModelKey, int], Any] = {}

    @property
    def device_name(self) -> str:
        """The device, in words (``"cuda:0 (NVIDIA H200)"``, ``"cpu (x86_64)"``)."""
        return f"{self.device.alias} ({self.device.name})"

    def _device_model(self, models: Sequence[mujoco.MjModel]) -> Any:
        """The ``mujoco_warp`` model of the batch, its differing fields per world."""
        batched, shared = self._fields
        m0 = models[0]
        fixed = _differing(models, shared, m0)
        if fixed:
            raise ValueError(
                must_be(
                    "the candidate models on the Warp backend",
                    "models that differ only in fields MuJoCo Warp can vary per world",
                    sorted(fixed),
                    "run this problem with rollout='cpu'",
                )
            )
        dts = {float(m.opt.timestep) for m in models}
        if len(dts) > 1:
            raise ValueError(must_be("the candidates' timesteps", "one timestep", sorted(dts)))
        # the shared fields come from the reference model the device models were made of
        sig = model_key(m0)
        ref = self._refs.get(sig)
        if ref is None or _differing([m0], shared, ref):
            ref = self._refs[sig] = m0.__copy__()
            self._models = {k: v for k, v in self._models.items() if k[0] != sig}
        per_world = _differing(models, batched, ref)
        key = (sig, len(models), tuple(sorted(per_world)))
        mw = self._models.get(key)
        if mw is None:
            if len(self._models) >= 4:
                self._models.clear()
            with self._wp.ScopedDevice(self.device):
                sizes = {name: len(models) for name in per_world}
                mw = self._models[key] = self._mjw.put_model(ref, batch_sizes=sizes)
            # a solver at its iteration limit goes on, as MuJoCo's does, without a print
            mw.opt.warn_overflow &= ~int(self._mjw.OverflowType.ITERATIONS)
        for name, values in per_world.items():
            target = getattr(mw, name)
            inner = tuple(getattr(target.dtype, "_shape_", ()))
            target.assign(values.reshape(target.shape + inner).astype(np.float32, copy=False))
        return mw

    def _device_data(self, model: mujoco.MjModel, nworld: int) -> Any:
        key = (model_key(model), nworld)
        d = self._datas.get(key)
        if d is None:
            if len(self._datas) >= 4:
                self._datas.clear()
            with self._wp.ScopedDevice(self.device):
                d = self._datas[key] = self._mjw.make_data(model, nworld=nworld)
        return d

    def rollout(self, run: LawRun) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`~mjsysid.sim.lockstep.LawEngine.run` on the device (float64 results from
        the device's float32)."""
        models, x0, control, align = run.models, run.initial_states, run.control, run.align
        m0 = models[0]
        _check_supported(m0)
        nbatch, nstep = control.shape[0], control.shape[1]
        mw = self._device_model(models)
        d = self._device_data(m0, nbatch)
        with self._wp.ScopedDevice(self.device):
            self._start(mw, d, m0, x0)
            if self.laws:
                q, v, act, sens = self._step_laws(mw, d, run)
            else:
                q, v, act, sens = self._step_plain(mw, d, m0, control)
        sl = state_slices(m0)
        raw = np.zeros((nbatch, nstep, state_size(m0)))
        raw[:, :, 0] = x0[:, :1] + float(m0.opt.timestep) * np.arange(1, nstep + 1)
        raw[:, :, sl["qpos"]] = q
        raw[:, :, sl["qvel"]] = v
        raw[:, :, sl["act"]] = act
        with np.errstate(over="ignore", invalid="ignore"):
            ok = np.isfinite(raw.sum(axis=(1, 2))) & np.isfinite(sens.sum(axis=(1, 2)))
            # MuJoCo resets (diverges) where |qacc| > mjMAXVAL; MuJoCo Warp goes on: the
            # same test on the acceleration the velocities imply
            dv = np.diff(np.concatenate([x0[:, None, sl["qvel"]], v], axis=1), axis=1)
            ok &= ~(np.abs(dv) > _MAXVAL * float(m0.opt.timestep)).any(axis=(1, 2))
        if not align:
            return raw, sens, ok
        state = np.empty_like(raw)
        state[:, 0] = x0
        state[:, 1:] = raw[:, :-1]
        return state, sens, ok

    def _start(self, mw: Any, d: Any, m0: mujoco.MjModel, x0: np.ndarray) -> None:
        """Every world reset, then set to its initial state."""
        self._mjw.reset_data(mw, d)
        sl = state_slices(m0)
        f32 = np.float32
        d.time.assign(x0[:, 0].astype(f32))
        d.qpos.assign(np.ascontiguousarray(x0[:, sl["qpos"]], dtype=f32))
        d.qvel.assign(np.ascontiguousarray(x0[:, sl["qvel"]], dtype=f32))
        if m0.na:
            d.act.assign(np.ascontiguousarray(x0[:, sl["act"]], dtype=f32))

    def _step_plain(
        self, mw: Any, d: Any, m0: mujoco.MjModel, control: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """All steps on the device (controls uploaded once, states recorded on the device,
        copied back once)."""
        wp, mjw = self._wp, self._mjw
        nbatch, nstep, nu = control.shape
        ctrl = wp.array(np.ascontiguousarray(control.transpose(1, 0, 2), dtype=np.float32))
        fields = [("qpos", m0.nq), ("qvel", m0.nv), ("act", m0.na), ("sensordata", m0.nsensordata)]
        rec = {f: wp.empty((nstep, nbatch, n), dtype=float) for f, n in fields if n}
        for k in range(nstep):
            if nu:
                wp.copy(d.ctrl, ctrl, src_offset=k * nbatch * nu, count=nbatch * nu)
            mjw.step(mw, d)
            for f, n in fields:
                if n:
                    wp.copy(rec[f], getattr(d, f), dest_offset=k * nbatch * n, count=nbatch * n)
        out = []
        for f, n in fields:
            host = rec[f].numpy() if n else np.zeros((nstep, nbatch, 0), np.float32)
            out.append(host.transpose(1, 0, 2).astype(np.float64))
        return tuple(out)

    def _step_laws(self, mw: Any, d: Any, run: LawRun) -> tuple[np.ndarray, ...]:
        """Each step: the state to the host, the laws (NumPy, float64), ``ctrl`` and
        ``qfrc_applied`` back, one device step."""
        m0, x0, control = run.models[0], run.initial_states, run.control
        laws, merged = merge_laws(self.bound(m0), run.values)
        nbatch, nstep, _ = control.shape
        law_data = run.data.time_major(nbatch, nstep)
        assert law_data.new_command is not None
        sl = state_slices(m0)
        q, v, act = x0[:, sl["qpos"]], x0[:, sl["qvel"]], x0[:, sl["act"]]
        t = x0[:, 0]
        dt = float(m0.opt.timestep)
        out = [np.empty((nbatch, nstep, n)) for n in (m0.nq, m0.nv, m0.na, m0.nsensordata)]
        states: list[State] = []
        for k in range(nstep):
            ctx = StepContext(
                q, v, act, control[:, k].astype(np.float64), np.zeros((nbatch, m0.nv)), t, dt,
                law_data.new_command[k],
            )  # fmt: skip
            inputs = {name: col[k] for name, col in law_data.inputs.items()}
            if k == 0:
                states = start_laws(laws, ctx, merged, inputs, law_data.constants)
            run_laws(laws, ctx, merged, states, inputs, law_data.constants)
            if m0.nu:
                d.ctrl.assign(ctx.ctrl.astype(np.float32))
            d.qfrc_applied.assign(ctx.force.astype(np.float32))
            self._mjw.step(mw, d)
            q, v = d.qpos.numpy().astype(np.float64), d.qvel.numpy().astype(np.float64)
            act = d.act.numpy().astype(np.float64) if m0.na else np.zeros((nbatch, 0))
            t = t + dt
            out[0][:, k], out[1][:, k], out[2][:, k] = q, v, act
            if m0.nsensordata:
                out[3][:, k] = d.sensordata.numpy()
        return tuple(out)


def _check_supported(model: mujoco.MjModel) -> None:
    """The full-physics state must be time, qpos, qvel and act (no actuator or sensor
    history, no plugin state)."""
    extra = state_size(model) - (1 + model.nq + model.nv + model.na)
    if extra:
        raise ValueError(
            must_be(
                "a model on the Warp backend",
                "one whose state is time, qpos, qvel and act",
                f"{extra} more state entries (history or plugin state)",
                "run it with rollout='cpu'",
            )
        )
