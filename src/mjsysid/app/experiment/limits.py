"""The ``limits:`` key, and the checks of :mod:`mjsysid.util.limits` raising
:class:`~mjsysid.app.experiment.nodes.ExperimentError`."""

from __future__ import annotations

from mjsysid.app.experiment.nodes import ExperimentError, _Node
from mjsysid.util.limits import check_limit, set_limits


def _limits(top: _Node, source: str) -> None:
    """The ``limits:`` key: raises (or lowers) named limits of :mod:`mjsysid.util.limits`
    for this process."""
    value = top.get("limits", dict, None, expected="a mapping of limit names to numbers")
    if value is not None:
        try:
            set_limits(value, f"{source}: limits")
        except ValueError as e:
            raise ExperimentError(str(e)) from None


def _limited(name: str, value: float, what: str) -> None:
    """:func:`check_limit` raising an :class:`ExperimentError`."""
    try:
        check_limit(name, value, what)
    except ValueError as e:
        raise ExperimentError(str(e)) from None
