"""Opening the serial port (pyserial, the ``capture`` extra, imported only here)."""

from __future__ import annotations

from typing import Any

from mjsysid.lab.capture.device import DeviceDescription

READ_TIMEOUT = 0.005
"""s: how long one read waits for bytes (short, so the watchdog is checked often)."""


def open_port(device: DeviceDescription, port: str | None = None) -> Any:
    """Opens ``port`` (default ``device.port``) at ``device.baud``, input flushed.

    Raises:
      ImportError: pyserial is not installed.
      OSError: The port cannot be opened (``serial.SerialException`` is an ``OSError``).
    """
    try:
        import serial
    except ImportError:
        raise ImportError(
            "capturing needs pyserial: pip install -e '.[capture]' in the mjsysid checkout"
        ) from None
    name = port or device.port
    if not name:
        raise ValueError(f"{device.source}: port is empty; give it there or with --port")
    ser = serial.Serial(name, device.baud, timeout=READ_TIMEOUT, write_timeout=1.0)
    ser.reset_input_buffer()  # lines queued before the capture are old
    return ser
