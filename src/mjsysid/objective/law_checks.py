"""Checks of the force laws given to a residual function and of their parameters."""

from __future__ import annotations

from collections.abc import Sequence

from mjsysid.data.sequences import ModelSequences
from mjsysid.params.parameter import ParameterDict
from mjsysid.sim.force_laws import ForceLaw
from mjsysid.sim.law_params import parameter_name
from mjsysid.sim.lockstep import bind_laws
from mjsysid.util.errors import must_be


def law_parameter_names(laws: Sequence[ForceLaw]) -> list[str]:
    """The full names of the parameters of ``laws``."""
    return [parameter_name(law, k) for law in laws for k in law.parameters]


def checked_laws(
    laws: Sequence[ForceLaw], models_sequences: Sequence[ModelSequences], custom: object
) -> list[ForceLaw]:
    """The force laws, checked against every model (and refused with a custom rollout)."""
    out = list(laws)
    for law in out:
        if not isinstance(law, ForceLaw):
            raise TypeError(must_be("force_laws", "a sequence of ForceLaw", law))
    if out and custom is not None:
        raise ValueError("force_laws cannot be combined with custom_rollout: apply them there")
    names = [law.name for law in out]
    if len(set(names)) != len(names):
        raise ValueError(must_be("force law names", "unique", names))
    for ms in models_sequences:
        bind_laws(out, ms.model)
    return out


def check_law_params(laws: Sequence[ForceLaw], params: ParameterDict) -> None:
    """Every parameter of every law is in ``params`` with its declared size.

    Raises:
      KeyError: One is missing (declare them with ``force_law_params``).
    """
    for law in laws:
        for key, size in law.parameters.items():
            name = parameter_name(law, key)
            if name not in params.keys():
                raise KeyError(
                    f"force law {law.name!r} needs parameter {name!r}; add "
                    "force_law_params(law, nominal) to the parameters"
                )
            if params[name].size != size:
                raise ValueError(must_be(f"parameter {name!r} size", str(size), params[name].size))
