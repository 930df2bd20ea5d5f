"""The key under which simulation caches (``MjData``, bound laws, batches) hold a model.

``MjModel.signature`` hashes the model's structure, but two models that differ only in an
actuator's dynamics (``dyntype``: a filter adds an activation, ``na`` grows) share it, and an
``MjData`` made for one is the wrong size for the other. The key adds every size an
``MjData`` or a bound law depends on.
"""

from __future__ import annotations

import mujoco

#: What :func:`model_key` returns.
ModelKey = tuple[int, ...]

#: The model sizes, besides the signature, that decide an ``MjData``'s layout.
_SIZES = ("nq", "nv", "na", "nu", "nbody", "nmocap", "nsensordata", "nuserdata", "neq")


def model_key(model: mujoco.MjModel) -> ModelKey:
    """``(signature, nq, nv, na, nu, nbody, nmocap, nsensordata, nuserdata, neq)`` of ``model``.

    Equal keys mean an ``MjData`` of one model serves the other and laws bound to one index
    the other's arrays correctly.
    """
    return (int(model.signature), *(int(getattr(model, name)) for name in _SIZES))
