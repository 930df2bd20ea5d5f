"""``mujoco.sysid._src.timeseries``: ``TimeSeries``, ``SignalType``, the mapping type and the
mapping codecs, as in the peer."""

from __future__ import annotations

from mjsysid.data.interpolation import InterpolationMethod
from mjsysid.data.timeseries import SignalMappingType, SignalType, TimeSeries
from mjsysid.data.timeseries_files import decode_signal_mapping, encode_signal_mapping

__all__ = [
    "InterpolationMethod",
    "SignalMappingType",
    "SignalType",
    "TimeSeries",
    "decode_signal_mapping",
    "encode_signal_mapping",
]
