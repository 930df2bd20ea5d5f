"""Capturing recordings from a microcontroller over a serial line.

:mod:`~mjsysid.data.capture.device` (the YAML device description),
:mod:`~mjsysid.data.capture.lines` (line templates), :mod:`~mjsysid.data.capture.session`
(the capture loop), :mod:`~mjsysid.data.capture.safety` (limits, reset),
:mod:`~mjsysid.data.capture.output` (recording and sidecar),
:mod:`~mjsysid.data.capture.serialport` (pyserial, imported lazily).
"""

from mjsysid.data.capture.device import DeviceDescription, DeviceError, load_device
from mjsysid.data.capture.lines import LineFormat
from mjsysid.data.capture.session import CaptureResult, CaptureSession, EndReason

__all__ = [
    "CaptureResult",
    "CaptureSession",
    "DeviceDescription",
    "DeviceError",
    "EndReason",
    "LineFormat",
    "load_device",
]
