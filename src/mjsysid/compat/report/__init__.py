"""``mujoco.sysid.report``: :func:`~mjsysid.compat.report.defaults.default_report`."""

from mjsysid.compat.report.defaults import Report, default_report

__all__ = ["Report", "default_report"]
