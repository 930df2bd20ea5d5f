"""``mujoco.sysid._src.io``: ``save_results`` (and the names the peer's module imports).

The peer pickles its result and intervals (``results.pkl``, ``confidence.pkl``); mjsysid
never pickles: the folder holds mjsysid's YAML + npz files (``params_x_0.yaml``,
``params_x_hat.yaml``, ``result.npz``, ``confidence.yaml``, ``<model>.xml``, ...), read back
with :func:`mjsysid.load_results`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mjsysid.compat._src.optimize import as_core_result
from mjsysid.compat._src.residual import PeerResidual
from mjsysid.compat._src.trajectory import ModelSequences
from mjsysid.fit.intervals import calculate_intervals
from mjsysid.output.results import save_results as _core_save_results
from mjsysid.params.parameter import ParameterDict

__all__ = ["ModelSequences", "calculate_intervals", "save_results"]


def save_results(
    experiment_results_folder: str | os.PathLike[str],
    models_sequences: Sequence[ModelSequences],
    initial_params: ParameterDict,
    opt_params: ParameterDict,
    opt_result: Any,
    residual_fn: Callable[..., Any],
) -> Path:
    """Writes the results folder (module docstring) for a fit made by
    :func:`mjsysid.compat.optimize` (or any result with ``x``, ``jac`` and ``grad``).

    Returns:
      The folder.
    """
    fn = residual_fn.residual_function if isinstance(residual_fn, PeerResidual) else residual_fn
    result = as_core_result(opt_result, opt_params, fn)
    return _core_save_results(
        Path(experiment_results_folder), models_sequences, initial_params, opt_params, result, fn
    )
