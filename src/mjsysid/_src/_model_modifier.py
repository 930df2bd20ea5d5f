"""``mjsysid._src.model_modifier``: spec modifiers, gains and the body-inertia helpers
(``mujoco.sysid``'s ``_src.model_modifier``)."""

from __future__ import annotations

from typing import Any

from mjsysid._src._facade import Chain

_CHAIN = Chain(
    __name__,
    (
        "mjsysid.params.apply",
        "mjsysid.params.inertia",
        "mjsysid.params.parameter",
    ),
)


def __getattr__(name: str) -> Any:
    return _CHAIN.getattr(name)


def __dir__() -> list[str]:
    return _CHAIN.dir()
