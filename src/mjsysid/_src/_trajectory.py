"""``mjsysid._src.trajectory``: SystemTrajectory, sysid_rollout, ModelSequences,
create_initial_state and the array helpers of ``mujoco.sysid``'s ``_src.trajectory``."""

from __future__ import annotations

from typing import Any

from mjsysid._src._facade import Chain

_CHAIN = Chain(
    __name__,
    (
        "mjsysid.sim.rollout",
        "mjsysid.sim.trajectory",
        "mjsysid.sim.peer_rollout",
        "mjsysid.data.states",
        "mjsysid.data.sequences",
    ),
)


def __getattr__(name: str) -> Any:
    return _CHAIN.getattr(name)


def __dir__() -> list[str]:
    return _CHAIN.dir()
