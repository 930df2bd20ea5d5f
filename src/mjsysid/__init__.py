"""mjsysid: system identification for MuJoCo models."""

from mjsysid.parameter import Parameter, ParameterDict

__all__ = ["Parameter", "ParameterDict"]
__version__ = "0.1.0"
