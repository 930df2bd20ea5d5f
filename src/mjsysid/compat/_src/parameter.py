"""``mujoco.sysid._src.parameter``: ``Parameter``, ``ParameterDict`` and ``InertiaType``.

:class:`Parameter` accepts equal bounds on a free parameter, as the peer does (mjsysid's asks
to freeze it); :func:`mjsysid.compat.optimize` keeps such a parameter at its value.
"""

from __future__ import annotations

from mjsysid.params.inertia import InertiaType
from mjsysid.params.parameter import Parameter as _CoreParameter
from mjsysid.params.parameter import ParameterDict as _CoreParameterDict

__all__ = ["InertiaType", "Parameter", "ParameterDict"]


class Parameter(_CoreParameter):
    """:class:`mjsysid.Parameter` that also takes ``min_value == max_value`` while free."""

    REQUIRE_OPEN_BOX = False
    __slots__ = ()


class ParameterDict(_CoreParameterDict):
    """:class:`mjsysid.ParameterDict` whose loaded parameters are :class:`Parameter` s of
    this module (equal bounds accepted)."""

    PARAMETER = Parameter
