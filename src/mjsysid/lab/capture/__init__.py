"""Capturing recordings from a microcontroller over a serial line.

:mod:`~mjsysid.lab.capture.device` (the YAML device description),
:mod:`~mjsysid.lab.capture.lines` (line templates), :mod:`~mjsysid.lab.capture.session`
(the capture loop), :mod:`~mjsysid.lab.capture.safety` (limits, reset),
:mod:`~mjsysid.lab.capture.output` (recording and sidecar),
:mod:`~mjsysid.lab.capture.serialport` (pyserial, imported lazily).
"""

from mjsysid.lab.capture.device import DeviceDescription, DeviceError, load_device
from mjsysid.lab.capture.lines import LineFormat
from mjsysid.lab.capture.session import CaptureResult, CaptureSession, EndReason

__all__ = [
    "CaptureResult",
    "CaptureSession",
    "DeviceDescription",
    "DeviceError",
    "EndReason",
    "LineFormat",
    "load_device",
]
