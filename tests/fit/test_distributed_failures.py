"""A Dask cluster that fails cannot hang a fit: real sockets, real schedulers and workers.

Every wait on the network has a deadline: a "scheduler" that accepts the connection and never
answers, an HTTP server, a worker's address, a scheduler that stops answering after the
handshake or in the middle of a call, and a cluster that loses its last worker each end in a
message within the documented timeout. Hostile timeouts are refused. A ``--workers`` fit
leaves nothing in the system's temporary folder or the working directory, and its workers'
MuJoCo messages land in the results folder.
"""

from __future__ import annotations

import http.server
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")  # the optional extra: mjsysid[distributed]

import mjsysid as ms  # noqa: E402
from conftest import ARM2  # noqa: E402
from mjsysid.app.cli import main  # noqa: E402
from mjsysid.fit.distributed import distribute, executor_options, make_executor  # noqa: E402
from mjsysid.util.limits import limits_set  # noqa: E402
from mjsysid.util.mujoco_log import MUJOCO_LOG, mujoco_log_in  # noqa: E402

EXAMPLES = Path(ms.__file__).parent / "examples"


# -- servers that are not Dask schedulers ------------------------------------------------------
@pytest.fixture
def silent_server() -> Iterator[str]:
    """A TCP server that accepts every connection and never sends a byte."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])
            except OSError:  # closed
                return

    threading.Thread(target=accept, daemon=True).start()
    yield f"tcp://127.0.0.1:{listener.getsockname()[1]}"
    listener.close()
    for conn in held:
        conn.close()


class _AnswersAtOnce(http.server.BaseHTTPRequestHandler):
    """http.server's handling of a request line, run on whatever bytes came first (as servers
    with a header timeout or a size check do): Dask's binary handshake gets a 400 page."""

    def handle(self) -> None:
        self.raw_requestline = self.rfile.read1(65536)
        self.parse_request()  # (answers 400 Bad Request itself)

    def log_message(self, *args: Any) -> None:
        pass


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def _http(handler: type) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"tcp://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def http_server() -> Iterator[str]:
    yield from _http(_AnswersAtOnce)


@pytest.fixture
def waiting_http_server() -> Iterator[str]:
    """http.server as it is: it waits for the end of a request line that never comes."""
    yield from _http(_Quiet)


def _refused(address: str, timeout: float) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(ConnectionError) as e:
        make_executor(scheduler=address, timeout=timeout)
    return str(e.value), time.monotonic() - t0


def test_a_silent_scheduler_fails_within_the_timeout(silent_server: str) -> None:
    """It hung forever: Dask's handshake read has no deadline."""
    message, took = _refused(silent_server, 1.5)
    assert f"{silent_server!r} accepted the connection but did not answer as a Dask " in message
    assert "within 1.5 s" in message and "dask scheduler" in message
    assert took < 1.5 + 2.0


def test_a_silent_scheduler_given_to_fit_fails_within_the_documented_10_s(
    silent_server: str, tmp_path: Path
) -> None:
    """``mjsysid fit --scheduler`` with the default timeout (10 s): an error, not a hang."""
    err = io.StringIO()
    t0 = time.monotonic()
    code = main(
        [
            *("fit", "example:dcmotor", "--out", str(tmp_path / "o"), "--no-report", "-q"),
            *("--scheduler", silent_server, "--no-timing-check"),
        ],
        stdout=io.StringIO(),
        stderr=err,
    )
    took = time.monotonic() - t0
    assert code == 1
    assert "did not answer as a Dask scheduler within 10 s" in err.getvalue()
    assert 10 <= took < 10 + 15  # (loading the example takes a few seconds)


def test_an_http_server_is_not_a_dask_scheduler(http_server: str) -> None:
    """It was numpy's 'Unable to allocate 5.02 EiB' (the first bytes of the page, read as a
    frame length)."""
    message, took = _refused(http_server, 5)
    assert f"{http_server!r} is not a Dask scheduler" in message
    assert "an HTTP server such as the scheduler's dashboard" in message
    assert "EiB" not in message and "<!DOCTYPE" not in message
    assert took < 5


def test_an_http_server_that_waits_for_a_request_line(waiting_http_server: str) -> None:
    message, took = _refused(waiting_http_server, 1)
    assert "accepted the connection but did not answer as a Dask scheduler" in message
    assert took < 1 + 2.0


def test_nothing_listening() -> None:
    message, took = _refused("tcp://127.0.0.1:9", 0.5)
    assert "no Dask scheduler answered at 'tcp://127.0.0.1:9' within 0.5 s" in message
    assert took < 0.5 + 2.0


@pytest.fixture(scope="module")
def threads_cluster() -> Iterator[Any]:
    """A scheduler and one worker in this process (threads), on real TCP sockets."""
    cluster = distributed.LocalCluster(
        n_workers=1, processes=False, threads_per_worker=1, dashboard_address=":0", protocol="tcp"
    )
    yield cluster
    cluster.close()


def test_a_workers_address_is_not_the_schedulers(threads_cluster: Any) -> None:
    worker = next(iter(threads_cluster.scheduler.workers))
    message, _ = _refused(worker, 5)
    assert (
        message
        == f"{worker!r} is a Dask Worker, not a Dask scheduler: give the scheduler's address"
    )


def _relay(listen: socket.socket, target: tuple[str, int], conns: list[socket.socket]) -> None:
    """Forwards the first connection to ``target``; holds the later ones without a byte."""
    first = True
    while True:
        try:
            conn = listen.accept()[0]
        except OSError:
            return
        conns.append(conn)
        if not first:
            continue
        first = False
        upstream = socket.create_connection(target)
        conns.append(upstream)
        for a, b in ((conn, upstream), (upstream, conn)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass


def test_a_scheduler_that_stops_answering_after_the_handshake(threads_cluster: Any) -> None:
    """The first connection is a real scheduler's; every later one is held silent: the
    client's own connection (Dask's handshake, no deadline) is given up in time."""
    host, port = threads_cluster.scheduler_address.removeprefix("tcp://").split(":")
    listen = socket.create_server(("127.0.0.1", 0))
    conns: list[socket.socket] = []
    threading.Thread(target=_relay, args=(listen, (host, int(port)), conns), daemon=True).start()
    address = f"tcp://127.0.0.1:{listen.getsockname()[1]}"
    try:
        message, took = _refused(address, 2)
    finally:
        listen.close()
        for c in conns:
            c.close()
    assert message.startswith(f"the Dask scheduler at {address!r} answered, then did not")
    assert took < 2 + 2.0


# -- timeouts -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("timeout", "expected"),
    [
        (1e9, r"executor\.timeout: 1e\+09 exceeds the limit max_timeout_s=3,600"),
        (float("nan"), r"executor\.timeout must be a finite number of seconds > 0, got nan"),
        (float("inf"), r"executor\.timeout must be a finite number of seconds > 0, got inf"),
        (-1, r"executor\.timeout must be a finite number of seconds > 0, got -1"),
        (0, r"executor\.timeout must be a finite number of seconds > 0, got 0"),
        ("10", r"executor\.timeout must be a finite number of seconds > 0, got '10'"),
    ],
)
def test_hostile_timeouts_are_refused(timeout: Any, expected: str) -> None:
    with pytest.raises(ValueError, match=expected):
        executor_options({"scheduler": "tcp://h:8786", "timeout": timeout})


def test_hostile_timeouts_of_the_functions(threads_cluster: Any, make_problem: Any) -> None:
    with pytest.raises(ValueError, match=r"^timeout: 1e\+09 exceeds the limit max_timeout_s"):
        make_executor(scheduler="tcp://127.0.0.1:9", timeout=1e9)
    with pytest.raises(ValueError, match=r"^timeout must be a finite number of seconds > 0"):
        make_executor(workers=1, timeout=float("nan"))
    rf = ms.build_residual_fn(make_problem(ARM2, n=50).sequences, nthread=1)
    with pytest.raises(ValueError, match=r"^worker_timeout: 1e\+12 exceeds the limit"):
        distribute(rf, threads_cluster.scheduler_address, worker_timeout=1e12)
    with pytest.raises(ValueError, match=r"^timeout must be a finite number of seconds > 0"):
        distribute(rf, threads_cluster.scheduler_address, timeout=-5)


def test_a_raised_limit_lets_a_long_timeout_through() -> None:
    """(control) The limit is a named one: raised, the same timeout is taken."""
    with limits_set(max_timeout_s=10**10):
        assert executor_options({"scheduler": "tcp://h:8786", "timeout": 1e9})["timeout"] == 1e9


def test_the_experiment_files_timeout(tmp_path: Path) -> None:
    from mjsysid.app.experiment import ExperimentError, load_experiment, resolve_experiment_path

    src = resolve_experiment_path("example:dcmotor")
    for f in src.parent.iterdir():
        if f.is_file():
            (tmp_path / f.name).write_bytes(f.read_bytes())
    bad = tmp_path / "bad.yaml"
    executor = "executor: {scheduler: 'tcp://h:8786', timeout: 1000000000}"
    bad.write_text(src.read_text() + f"\n{executor}\n")
    with pytest.raises(ExperimentError, match=r"executor\.timeout: 1e\+09 exceeds the limit"):
        load_experiment(bad)


# -- a cluster that fails during a call ----------------------------------------------------
class SlowRollout:
    """A rollout that waits ``delay`` s first: a call long enough to fail in the middle of."""

    def __init__(self, delay: float) -> None:
        self.delay = delay

    def __call__(self, models: Any, datas: Any, ctrl: Any, x0: Any, params: Any) -> Any:
        time.sleep(self.delay)
        return [ms.sysid_rollout(m, None, ctrl[i], x0[i])[0] for i, m in enumerate(models)]


def _start(args: list[str], tmp_path: Path, name: str) -> subprocess.Popen[bytes]:
    """``python -m <args>`` that imports what this test does (SlowRollout, for a worker)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    with (tmp_path / f"{name}.log").open("wb") as log:  # (the child keeps its own descriptor)
        return subprocess.Popen(
            [sys.executable, "-m", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
            env=env,
        )


@pytest.fixture
def cluster(
    tmp_path: Path,
) -> Iterator[tuple[str, subprocess.Popen[bytes], subprocess.Popen[bytes]]]:
    """A ``dask scheduler`` and a ``dask worker --no-nanny`` process of their own (so that
    one can be frozen or killed): ``(address, scheduler, worker)``."""
    file = tmp_path / "scheduler.json"
    common = ["--no-dashboard", "--scheduler-file", str(file)]
    scheduler = _start(
        ["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", *common],
        tmp_path,
        "scheduler",
    )
    started = [scheduler]
    try:
        address = _scheduler_address(file)
        started.append(
            _start(
                ["distributed.cli.dask_worker", "--no-nanny", "--nthreads", "1", *common],
                tmp_path,
                "worker",
            )
        )
        yield address, scheduler, started[1]
    finally:  # (also when the scheduler never said where it listens)
        for p in reversed(started):
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
            p.wait(timeout=30)


def _scheduler_address(file: Path, wait: float = 60.0) -> str:
    """The address in the scheduler's file, once the file is written whole (it appears
    before its contents: read too early, it is empty or cut)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            return str(json.loads(file.read_text())["address"])
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _slow_call(address: str, make_problem: Any, timeout: float) -> tuple[Any, Any, np.ndarray]:
    prob = make_problem(ARM2, n=100)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", prob.model, "j1")])
    rf = ms.build_residual_fn(prob.sequences, custom_rollout=SlowRollout(30), nthread=1)
    client = distributed.Client(address, set_as_default=False, timeout=30)
    client.wait_for_workers(1, timeout=60)
    drf = distribute(rf, client, timeout=timeout, worker_timeout=2)
    return client, drf, params


def _fails_meanwhile(drf: Any, params: Any, act: Any) -> tuple[BaseException, float]:
    """Starts a call of ``drf``, does ``act()`` once it runs; the call's error and the time
    from ``act`` to the error."""
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            drf(np.array([0.1, 0.2]).reshape(1, 2), params)
        except BaseException as e:  # the test reads it
            box["error"], box["at"] = e, time.monotonic()

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    time.sleep(2.0)  # the chunk is running on the worker (its rollout sleeps 30 s)
    t0 = time.monotonic()
    act()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the call still waits"
    return box["error"], box["at"] - t0


def test_a_scheduler_frozen_during_a_call(cluster: Any, make_problem: Any) -> None:
    """SIGSTOP on the scheduler while the workers compute: Dask's gather waited forever."""
    address, scheduler, _ = cluster
    client, drf, params = _slow_call(address, make_problem, timeout=1.5)
    try:
        error, took = _fails_meanwhile(drf, params, lambda: scheduler.send_signal(signal.SIGSTOP))
    finally:
        scheduler.send_signal(signal.SIGCONT)
        drf.close()
        client.close(timeout=5)
    assert isinstance(error, TimeoutError)
    assert str(error).startswith(f"the Dask scheduler at {address} did not answer a request")
    assert "within 1.5 s" in str(error)
    assert took < 1.5 * 2 + 2.0


def test_the_last_worker_lost_during_a_call(cluster: Any, make_problem: Any) -> None:
    """The only worker killed (no nanny to restart it): the parameters sent to it are lost
    and Dask gives the chunk up: a message that says so, at once."""
    address, _, worker = cluster
    client, drf, params = _slow_call(address, make_problem, timeout=5)
    try:
        error, took = _fails_meanwhile(drf, params, worker.kill)
    finally:
        drf.close()
        client.close(timeout=5)
    assert isinstance(error, RuntimeError)  # (it was Dask's FutureCancelledError)
    assert str(error).startswith(f"the Dask cluster at {address} gave up this call (")
    assert str(error).endswith("): its workers were lost")
    assert took < 5


# -- nothing outside --out -------------------------------------------------------------------
@pytest.fixture(scope="module")
def workers_fit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``mjsysid fit ... --workers 2`` on the cart-pole whose motor has a gear of 1e40 (every
    simulation is unstable: MuJoCo warns in the workers), in a process whose temporary
    folder, working directory and home folder are empty folders of their own."""
    root = tmp_path_factory.mktemp("workers-fit")
    folders = {name: root / name for name in ("tmp", "cwd", "home")}
    for f in folders.values():
        f.mkdir()
    unstable = root / "unstable"
    (unstable).mkdir()
    for f in (EXAMPLES / "cartpole").iterdir():
        if f.is_file():
            (unstable / f.name).write_bytes(f.read_bytes())
    xml = unstable / "cartpole.xml"
    xml.write_text(xml.read_text().replace('gear="1"', 'gear="1e40"'))
    env = dict(os.environ, TMPDIR=str(folders["tmp"]), HOME=str(folders["home"]))
    env.pop("XDG_CACHE_HOME", None)
    env.pop("XDG_CONFIG_HOME", None)
    argv = ["fit", str(unstable / "experiment.yaml"), "--out", str(root / "res")]
    done = subprocess.run(
        [sys.executable, "-m", "mjsysid.app.cli", *argv, "--no-report", "-q", "--workers", "2"],
        cwd=folders["cwd"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # (the model diverges: a message, exit 1)
    assert "error: the residual must be finite at the start point" in done.stderr
    (root / "stdout.txt").write_text(done.stdout)
    return {**folders, "res": root / "res", "stdout": root / "stdout.txt"}


def test_the_workers_scratch_space_is_removed(workers_fit: dict[str, Path]) -> None:
    """Dask's dask-scratch-space (its lock files) stayed in the system's temporary folder."""
    assert sorted(workers_fit["tmp"].rglob("*")) == []
    assert sorted(workers_fit["home"].rglob("*")) == []


def test_the_workers_mujoco_log_lands_in_the_results_folder(workers_fit: dict[str, Path]) -> None:
    """The workers wrote MUJOCO_LOG.TXT into their working directory (the command's) and
    printed MuJoCo's warnings on its stdout."""
    assert sorted(workers_fit["cwd"].rglob("*")) == []
    assert "Nan, Inf or huge value" not in workers_fit["stdout"].read_text()
    log = (workers_fit["res"] / MUJOCO_LOG).read_text()
    assert ": [Dask worker tcp://127.0.0.1:" in log
    assert "] Nan, Inf or huge value in QACC at DOF 0. The simulation is unstable." in log


def test_messages_of_a_worker_in_this_process_are_not_relayed(
    threads_cluster: Any, make_problem: Any, tmp_path: Path
) -> None:
    """(control) A worker thread of this process logs where this process does: once."""
    prob = make_problem(ARM2, n=50)
    params = ms.ParameterDict([ms.make_parameter("joint_damping", prob.model, "j1")])
    rf = ms.build_residual_fn(prob.sequences, nthread=1)
    with mujoco_log_in(tmp_path), distribute(rf, threads_cluster.scheduler_address) as drf:
        drf(np.array([[0.1, -1e300]]), params)
    log = (tmp_path / MUJOCO_LOG).read_text()
    assert "Dask worker" not in log and log.count("Check model") == 1
