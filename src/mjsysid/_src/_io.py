"""``mjsysid._src.io``: saving results, ModelSequences and calculate_intervals."""

from __future__ import annotations

from typing import Any

from mjsysid._src._facade import Chain

_CHAIN = Chain(
    __name__,
    (
        "mjsysid.output.results",
        "mjsysid.fit.intervals",
        "mjsysid.data.sequences",
    ),
)


def __getattr__(name: str) -> Any:
    return _CHAIN.getattr(name)


def __dir__() -> list[str]:
    return _CHAIN.dir()
