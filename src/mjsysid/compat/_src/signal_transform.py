"""``mujoco.sysid._src.signal_transform``: ``SignalTransform`` (mjsysid's: the peer's rules,
patterns and defaults; its methods also return the transform, for chaining)."""

from __future__ import annotations

from mjsysid.objective.signal_transform import SignalTransform

__all__ = ["SignalTransform"]
