"""What the report tests share: a small real fit of a two-joint arm (:class:`Fit`, fixture
``fit``), the figures of a written page (:func:`figures_of`), and Debian's headless
``chromium`` driven through the Chrome DevTools protocol (fixture ``browser``, with the
``websockets`` package's synchronous client): open a page, read its console errors and
network requests, take screenshots and PDFs.

The test modules load it as a plugin (``pytest_plugins``, for its fixtures) after importing
its names, so pytest must not try to rewrite it: PYTEST_DONT_REWRITE.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import pytest

import mjsysid as ms
from conftest import LIT_ARM
from mjsysid.output.report import default_report

ARM = LIT_ARM.format(
    tip="",
    sensors='<jointpos name="j1_pos" joint="j1"/><jointpos name="j2_pos" joint="j2"/>'
    '<jointvel name="j1_vel" joint="j1"/><jointvel name="j2_vel" joint="j2"/>',
)


class Fit:
    """A small real identification: two joint dampings, the second one's bound too low."""

    def __init__(self) -> None:
        self.spec = mujoco.MjSpec.from_string(ARM)
        model = self.spec.compile()
        params = ms.ParameterDict()
        params.add(ms.make_parameter("joint_damping", model, "j1", min_value=0.01, max_value=1.0))
        params.add(ms.make_parameter("joint_damping", model, "j2", min_value=0.01, max_value=0.2))
        truth = params.copy()
        truth.update_from_vector(np.array([0.3, 0.4]))  # j2 truth above its upper bound
        rng = np.random.default_rng(0)
        ctrl = np.repeat(rng.normal(size=(16, 2)), 50, axis=0)
        x0 = ms.create_initial_state(model, qpos=[0.1, -0.2])
        traj = ms.sysid_rollout(ms.apply_param_modifiers(truth, self.spec), None, ctrl, x0)[0]
        noisy = traj.sensordata + 0.002 * rng.normal(size=traj.sensordata.shape)
        self.seq = ms.ModelSequences(
            "arm",
            self.spec,
            "s1",
            x0,
            ms.TimeSeries.from_control_names(traj.times, ctrl, model),
            ms.TimeSeries.from_names(traj.times, noisy, model),
        )
        self.rf = ms.build_residual_fn([self.seq])
        self.params = params
        self.opt_params, self.result = ms.optimize(params, self.rf)

    def report(self, folder: Path | Any, **options: Any) -> Path:
        """:func:`default_report` of this fit in ``folder`` (``options``: its keywords)."""
        return default_report(
            self.seq, self.params, self.opt_params, self.result, self.rf, folder, **options
        )


@pytest.fixture(scope="module")
def fit() -> Iterator[Fit]:
    f = Fit()
    yield f
    f.rf.close()


def figures_of(html: str) -> dict[str, Any]:
    m = re.search(
        r'<script type="application/json" id="mjsysid-figures">(.*?)</script>', html, re.S
    )
    assert m is not None
    return json.loads(m.group(1), parse_constant=lambda c: pytest.fail(f"non-JSON {c} in figures"))


# -- headless browser --------------------------------------------------------------------------
CHROMIUM = "/usr/bin/chromium"


class DevTools:
    """A minimal Chrome DevTools protocol client over one websocket (flattened sessions)."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        deadline = time.monotonic() + timeout
        while True:
            reply = json.loads(self.ws.recv(timeout=max(deadline - time.monotonic(), 0.1)))
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def evaluate(self, session: str, expression: str, timeout: float = 30.0) -> Any:
        res = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session,
            timeout,
        )
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression!r} failed: {res['exceptionDetails']}")
        return res["result"].get("value")

    def wait_for(self, session: str, expression: str, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(session, expression)
            if value:
                return value
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[DevTools]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium) "
            "to open the report in a headless browser"
        )
    ws_client = pytest.importorskip(
        "websockets.sync.client",
        reason="the browser test talks to chromium with the websockets package",
    )
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    log = open(tmp_path / "chromium.log", "wb")  # closed in the finally block below
    proc = subprocess.Popen(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-default-apps",
            "--disable-extensions",
            "--mute-audio",
            f"--user-data-dir={profile}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "about:blank",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and len(port_file.read_text().splitlines()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    "chromium did not start: "
                    + (tmp_path / "chromium.log").read_text(errors="replace")[-2000:]
                )
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        with ws_client.connect(
            f"ws://127.0.0.1:{port}{path}", max_size=None, open_timeout=20
        ) as ws:
            yield DevTools(ws)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def open_page(cdp: DevTools, url: str, width: int = 1280, height: int = 1400) -> str:
    target = cdp.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = cdp.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Runtime", "Log", "Network", "Page"):
        cdp.call(f"{domain}.enable", {}, session)
    cdp.call(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        session,
    )
    cdp.call("Page.navigate", {"url": url}, session)
    cdp.wait_for(
        session,
        "document.readyState === 'complete' && document.documentElement.dataset.ready === '1'",
    )
    return session


def page_problems(cdp: DevTools, session: str) -> tuple[list[str], list[str], list[str]]:
    """(console/JS errors, non-local network requests, all requests) seen by this page."""
    cdp.evaluate(session, "1")  # flush pending events
    errors, remote, urls = [], [], []
    for ev in cdp.events:
        if ev.get("sessionId") != session:
            continue
        m, p = ev["method"], ev.get("params", {})
        if m == "Runtime.exceptionThrown":
            errors.append(json.dumps(p["exceptionDetails"])[:500])
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(
                " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
            )
        elif m == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(p["entry"].get("text", ""))
        elif m == "Network.requestWillBeSent":
            url = p["request"]["url"]
            urls.append(url)
            if not url.startswith(("file://", "data:", "blob:", "about:")):
                remote.append(url)
    return errors, remote, urls


def screenshot(cdp: DevTools, session: str, path: Path) -> Path:
    data = cdp.call("Page.captureScreenshot", {"format": "png"}, session)["data"]
    path.write_bytes(base64.b64decode(data))
    print(f"screenshot: {path}")
    return path
