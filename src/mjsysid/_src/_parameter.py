"""``mjsysid._src.parameter``: Parameter, ParameterDict and InertiaType."""

from __future__ import annotations

from typing import Any

from mjsysid._src._facade import Chain

_CHAIN = Chain(
    __name__,
    (
        "mjsysid.params.parameter",
        "mjsysid.params.inertia",
    ),
)


def __getattr__(name: str) -> Any:
    return _CHAIN.getattr(name)


def __dir__() -> list[str]:
    return _CHAIN.dir()
