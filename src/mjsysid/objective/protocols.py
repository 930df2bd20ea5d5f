"""The seams of mjsysid as named protocols: the user's callbacks and what a fit asks of a
residual function.

Each protocol documents the exact call signature mjsysid uses, so type checkers and readers
know what a callback receives and must return. The stages meet here, never at each other's
attributes: a fit asks a residual function for more than its values only through a
``runtime_checkable`` protocol (:class:`DescribedResidualFn`, :class:`HorizonResidualFn`,
:class:`BatchResidualModifier`), checked with ``isinstance``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import mujoco
import numpy as np

from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.levels import LevelBracket
from mjsysid.params.parameter import ModelModifierFn, ModifierFn, ParameterDict
from mjsysid.sim.trajectory import SystemTrajectory

__all__ = [
    "BatchResidualModifier",
    "BuildModelFn",
    "CustomRolloutFn",
    "DescribedResidualFn",
    "DeviceResidualFn",
    "HeadRowsResidualFn",
    "HorizonResidualFn",
    "ModelModifierFn",
    "ModifierFn",
    "ModifyResidualFn",
    "ResidualFn",
    "ThresholdResidualFn",
    "batch_modifier",
]


class ResidualFn(Protocol):
    """``residual_fn(x, params)``: ``(p,) -> (n,)`` and ``(p, k) -> (n, k)``, the residual of
    one candidate or of ``k`` candidates (columns) at once.

    It may also return a list of arrays (one per sequence): they are stacked along their
    first axis (:func:`~mjsysid.fit.jacobian.residual_array`). (``mujoco.sysid``'s residual
    functions return ``(residuals, predictions, records)``: :mod:`mjsysid.compat` takes
    those.)
    """

    def __call__(self, x: np.ndarray, params: ParameterDict, /) -> Any: ...


@runtime_checkable
class DescribedResidualFn(Protocol):
    """A residual function that says where its entries come from:
    :class:`~mjsysid.ResidualFunction` (and the wrappers of one) implements it.

    A fit asks it, through this protocol only, to check the parameters before simulating,
    to name the entry a non-finite value came from, for the signal of every entry (noise
    estimates per signal) and for the blocks (sequences or windows: the block bootstrap).
    """

    last_divergence: list[str]
    """Messages about the candidates whose simulation diverged in the last call."""

    @property
    def block_offsets(self) -> np.ndarray:
        """``(B + 1,)`` first residual row of every block (sequence or window), then ``n``."""
        ...

    def describe_index(self, i: int) -> str:
        """The sequence, signal and time of residual entry ``i``, in words."""
        ...

    def signal_groups(self) -> np.ndarray | None:
        """``(n,)`` signal label of every residual entry (``None``: one group)."""
        ...

    def check_params(self, params: ParameterDict) -> None:
        """Raises when ``params`` lacks a parameter the residual needs (a delay, a law's)."""
        ...


@runtime_checkable
class ThresholdResidualFn(Protocol):
    """A residual function that says what its recorded command levels determine about the
    force laws' command thresholds (:mod:`mjsysid.objective.levels`):
    :class:`~mjsysid.ResidualFunction` implements it. The intervals of a fit read it through
    this protocol only."""

    def threshold_brackets(self, params: ParameterDict) -> list[LevelBracket]:
        """One :class:`~mjsysid.objective.levels.LevelBracket` per free threshold entry."""
        ...


class BuildModelFn(Protocol):
    """Turns parameters and a spec into a compiled model (default: ``apply_param_modifiers``)."""

    def __call__(self, params: ParameterDict, spec: mujoco.MjSpec, /) -> mujoco.MjModel: ...


class ModifyResidualFn(Protocol):
    """Custom residual for one sequence and one candidate.

    Called as ``fn(params, sensordata_predicted, sensordata_measured, model, return_pred_all,
    state=state, sensor_weights=weights)`` where the predicted series is on the simulation grid
    and the measured one is the recording. ``state`` has shape ``(nstep, nstate)`` (full physics
    state at each predicted time). Returns ``(residual, predicted, measured)``: a 1-D (or 2-D,
    flattened by the caller) residual array and the two aligned series it was computed from.
    The residual length must not depend on the parameter values.
    """

    def __call__(
        self,
        params: ParameterDict,
        sensordata_predicted: TimeSeries,
        sensordata_measured: TimeSeries,
        model: mujoco.MjModel,
        return_pred_all: bool,
        /,
        *,
        state: TimeSeries | None = None,
        sensor_weights: Mapping[str, Any] | None = None,
    ) -> tuple[np.ndarray, TimeSeries, TimeSeries]: ...


class CustomRolloutFn(Protocol):
    """Replaces the built-in batched rollout.

    Called as ``fn(models, datas, control_signal, initial_states, param_dicts)`` with ``models``
    a list of ``nbatch`` compiled models, ``datas`` one ``MjData`` per thread, ``control_signal``
    of shape ``(nbatch, nstep, nu)``, ``initial_states`` of shape ``(nbatch, nstate)`` and
    ``param_dicts`` the candidate ``ParameterDict`` of each model. Returns one
    ``SystemTrajectory`` per model.
    """

    def __call__(
        self,
        models: Sequence[mujoco.MjModel],
        datas: Sequence[mujoco.MjData],
        control_signal: np.ndarray,
        initial_states: np.ndarray,
        param_dicts: Sequence[ParameterDict],
        /,
    ) -> Sequence[SystemTrajectory]: ...


@runtime_checkable
class BatchResidualModifier(Protocol):
    """A custom residual that also evaluates every candidate of a sequence in one call.

    :class:`~mjsysid.SignalTransform` implements it; so may any user object. Passing
    ``modify_residual=obj.apply`` (its bound ``apply``) to
    :func:`~mjsysid.build_residual_fn` lets the residual function call
    :meth:`batch_residuals` instead of ``apply`` once per candidate; both must give the same
    numbers. The residual function also reads :attr:`normalize` (how it scales the measured
    signals) and calls :meth:`validate_signals` before any simulation.
    """

    normalize: bool | str

    def apply(self, *args: Any, **kwargs: Any) -> tuple[np.ndarray, TimeSeries, TimeSeries]:
        """The :class:`ModifyResidualFn` of one candidate."""
        ...

    def batch_residuals(
        self,
        params: ParameterDict,
        values: Callable[[str], np.ndarray],
        which: np.ndarray,
        predictions: np.ndarray,
        grid: np.ndarray,
        mapping: Any,
        sensordata_measured: TimeSeries,
        sensor_weights: Mapping[str, Any] | None = None,
        out: np.ndarray | None = None,
        rms_reference: TimeSeries | None = None,
    ) -> np.ndarray:
        """``(k, m)`` residual blocks of ``k`` candidates of one sequence; row ``j`` equals
        ``apply(...)[0].reshape(-1)`` for candidate ``j``.

        Args:
          params: The parameters (names, sizes, bounds; the values come from ``values``).
          values: ``values(name) -> (k, size)``: each candidate's value of a parameter.
          which: ``(k,)`` row of ``predictions`` each candidate reads.
          predictions: ``(u, nstep, D)`` simulated signals on ``grid`` (``(nstep,)`` times,
            s), columns as ``mapping`` says.
          sensordata_measured: The measured series of the sequence.
          sensor_weights: Weights by signal name or pattern.
          out: ``(k, m)`` array to write into (ignored when its size does not fit).
          rms_reference: Series whose RMS normalises this sequence (its whole recording, for
            a window), or ``None`` for the measured series itself.
        """
        ...

    def validate_signals(
        self,
        names: Sequence[str],
        params: ParameterDict | None = None,
        widths: Mapping[str, int] | None = None,
    ) -> None:
        """Raises when a rule names no measured signal or a parameter is missing."""
        ...

    def delay_bounds(self, params: ParameterDict) -> tuple[float, float]:
        """``(lo, hi)`` (s): the range of delays the parameters' bounds allow."""
        ...


def batch_modifier(fn: object) -> BatchResidualModifier | None:
    """The :class:`BatchResidualModifier` whose bound ``apply`` ``fn`` is (else ``None``)."""
    owner = getattr(fn, "__self__", None)
    # a plain function or None skips the runtime protocol check, which reads every member
    # of the protocol and runs at every residual call
    if owner is None:
        return None
    if isinstance(owner, BatchResidualModifier) and fn == owner.apply:
        return owner
    return None


@runtime_checkable
class HorizonResidualFn(Protocol):
    """A batched residual function that can be fitted on growing horizons.

    :func:`~mjsysid.optimize` asks it, through this protocol only, whether horizon stages
    can help and for the residual of the first part of every sequence.
    :class:`~mjsysid.ResidualFunction` implements it.
    """

    def __call__(self, x: np.ndarray, params: ParameterDict, /) -> np.ndarray: ...

    def supports_horizons(self, params: ParameterDict | None = None) -> bool:
        """Whether shorter horizons are meaningful: no custom code receives shortened series
        unasked, and (with ``params``) a free parameter changes the simulation."""
        ...

    def horizon_samples(self, fraction: float, params: ParameterDict | None = None) -> list[int]:
        """Measured samples each sequence keeps (and can read, given the delay bounds of
        ``params``) in the first ``fraction`` of its duration."""
        ...

    def head(self, fraction: float) -> HorizonResidualFn:
        """The residual of the first ``fraction`` of every sequence."""
        ...


@runtime_checkable
class HeadRowsResidualFn(Protocol):
    """A residual function whose heads' residuals are rows of its own.

    A staged fit that has the whole data's residual and Jacobian at the point where a head's
    stage starts takes the head's from their rows instead of simulating the head again.
    :class:`~mjsysid.ResidualFunction` implements it.
    """

    def head_rows(self, fraction: float) -> np.ndarray | None:
        """The indices of this function's residual entries that are, in order and bit for
        bit, the residual of ``head(fraction)`` at any point; ``None`` when its head's
        residual is not a part of this one's."""
        ...


@runtime_checkable
class DeviceResidualFn(Protocol):
    """A batched residual function whose rollouts can run elsewhere than on the CPU.

    The outer stages of a fit (:mod:`mjsysid.fit.search`) ask it, through this protocol
    only, for the same residual with its populations simulated on another backend
    (:data:`mjsysid.sim.rollout.ROLLOUTS`). :class:`~mjsysid.ResidualFunction` implements it.
    """

    def __call__(self, x: np.ndarray, params: ParameterDict, /) -> np.ndarray: ...

    def on_backend(self, backend: str) -> ResidualFn:
        """The same residual with its rollouts on ``backend`` (``"cpu"``: itself)."""
        ...
