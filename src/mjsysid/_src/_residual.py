"""``mjsysid._src.residual``: build_residual_fn and the peer's residual, model_residual,
construct_ts_from_defaults, SystemTrajectory and sysid_rollout."""

from __future__ import annotations

from typing import Any

from mjsysid._src._facade import Chain

_CHAIN = Chain(
    __name__,
    (
        "mjsysid.objective.residual",
        "mjsysid.objective.peer_residual",
        "mjsysid.sim.rollout",
        "mjsysid.data.sequences",
    ),
)


def __getattr__(name: str) -> Any:
    return _CHAIN.getattr(name)


def __dir__() -> list[str]:
    return _CHAIN.dir()
