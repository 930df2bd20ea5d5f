"""Residual evaluations on a Dask cluster (``pip install -e '.[distributed]'`` in the mjsysid
checkout).

A fit's cost is candidate rollouts: ``p + 1`` per Jacobian, a population per CMA-ES
generation, one per start of a multi-start. :class:`DistributedResidual` evaluates the
candidates of one batched call ``rf(X, params)`` (``X`` of shape ``(p, k)``) on the workers of a
``dask.distributed`` cluster and returns the same ``(n, k)`` residual as the local
:class:`~mjsysid.objective.residual.ResidualFunction`:

1. A :class:`ResidualRecipe` (spec XML and compiled model, sequences as arrays and signal
   mappings, residual options) is registered once as a worker plugin; every worker, present
   or joining later (a replacement of a lost one too), builds its own ``ResidualFunction``
   from it on first use and keeps it, with its data, in memory.
2. The parameters travel once per structure (scattered to every worker).
3. A call splits the columns of ``X`` into contiguous chunks, one per worker (sized by its
   threads), ships only those vectors, and concatenates the returned residual blocks in
   order. Each worker evaluates its chunk in one batched, multithreaded call.

Results are the local ones bit for bit: both sides run the same float64 code on the same
compiled model (the ``MjModel`` travels as is; each candidate's rollout is independent of
the others in its batch). One exception: candidates built by compiling the spec (a custom
``build_model``, or parameters without a compiled-model fast path) compile it from its XML on
the workers, and ``MjSpec.to_xml`` may round values in the last bit (a ``fromto`` geom, a
mass from density): those residuals agree to rounding, not bit for bit.

A worker lost mid-call: Dask reruns its chunk on another worker (the chunk's tasks may go
to any worker; the recipe is a plugin of all of them) and the call returns the same result.

Every network wait has a deadline (Dask's own handshake read and ``gather`` have none):
:func:`make_executor` probes a scheduler's address within ``timeout`` (what is there instead
is named), a request to the scheduler fails after ``timeout``, and while the workers compute
the scheduler must answer every ``timeout`` (:class:`_Shared`). Workers log MuJoCo's messages
to a private file and send them back with each call; a local cluster's scratch space is a
temporary folder removed at exit.

Which cluster a fit's residual evaluations run on, as an experiment file or the command
line declares it (validated without importing Dask; :mod:`mjsysid.fit.distributed` uses it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import os
import shutil
import struct
import sys
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from pickle import UnpicklingError  # (Dask's reader raises it; nothing here unpickles)
from typing import Any, cast

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import TimeSeries
from mjsysid.objective.residual import (
    ResidualFunction,
    build_options,
    build_residual_fn,
)
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be
from mjsysid.util.limits import check_positive
from mjsysid.util.mjcf_text import spec_xml

__all__ = [
    "DistributedResidual",
    "DistributedStats",
    "ResidualRecipe",
    "distribute",
    "distributed_residual_fn",
    "executor_options",
    "make_executor",
    "residual_recipe",
]

_EXECUTOR_KEYS = ("workers", "scheduler", "threads_per_worker", "timeout")


def executor_options(value: Any, where: str = "executor") -> dict[str, Any]:
    """The :func:`make_executor` keyword arguments an experiment file's ``executor:`` means.

    ``"tcp://host:8786"`` (a scheduler address), ``4`` (a local cluster of 4 workers) or a
    mapping ``{workers: 4, threads_per_worker: 1}`` / ``{scheduler: ..., timeout: 10}``.

    Raises:
      ValueError, TypeError: Anything else, naming ``where``.
    """
    if isinstance(value, str):
        value = {"scheduler": value}
    elif isinstance(value, int) and not isinstance(value, bool):
        value = {"workers": value}
    expected = "a scheduler address, a worker count, or {workers: N} / {scheduler: address}"
    if not isinstance(value, Mapping):
        raise TypeError(must_be(where, expected, value))
    unknown = sorted(set(value) - set(_EXECUTOR_KEYS))
    if unknown or ("workers" in value) == ("scheduler" in value):
        raise ValueError(must_be(where, expected + f" (keys among {list(_EXECUTOR_KEYS)})", value))
    for key in ("workers", "threads_per_worker"):
        n = value.get(key)
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(must_be(f"{where}.{key}", "a positive integer", n))
    scheduler = value.get("scheduler")
    if scheduler is not None and (not isinstance(scheduler, str) or "://" not in scheduler):
        raise ValueError(
            must_be(f"{where}.scheduler", "an address such as 'tcp://host:8786'", scheduler)
        )
    if value.get("timeout") is not None:
        _check_timeout(value["timeout"], f"{where}.timeout")
    return dict(value)


def _check_timeout(seconds: Any, what: str) -> float:
    """``seconds`` as a float: a finite number of seconds > 0 within the limit
    ``max_timeout_s`` (:mod:`mjsysid.util.limits`), else a ValueError naming ``what``."""
    check_positive("max_timeout_s", seconds, what, expected="a finite number of seconds > 0")
    return float(seconds)


logger = logging.getLogger(__name__)

_INSTALL_HINT = (
    "install the optional extra: pip install -e '.[distributed]' in the mjsysid checkout"
)
_CONNECT_TIMEOUT = 10.0  # s, default: how long the scheduler may take to answer
_WORKER_TIMEOUT = 30.0  # s, default: how long a call waits for a first worker


try:  # an optional dependency: this module is imported only when a cluster is asked for
    import dask.config
    import distributed
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError as e:  # pragma: no cover - the test environment has it
    raise ImportError(f"mjsysid's Dask support needs dask.distributed: {_INSTALL_HINT}") from e


# -- the recipe: a residual function as plain data -------------------------------------------
@dataclass(frozen=True)
class SeriesRecipe:
    """A :class:`TimeSeries` as arrays: ``times (N,)`` s, ``data (N, D)``, its mapping."""

    times: np.ndarray
    data: np.ndarray
    signal_mapping: dict[str, Any] | None

    @classmethod
    def of(cls, series: TimeSeries | None) -> SeriesRecipe | None:
        if series is None:
            return None
        mapping = None if series.signal_mapping is None else dict(series.signal_mapping)
        return cls(np.asarray(series.times), np.asarray(series.data), mapping)

    def build(self) -> TimeSeries:
        return TimeSeries(self.times, self.data, self.signal_mapping)


def _series(recipe: SeriesRecipe | None) -> TimeSeries | None:
    return None if recipe is None else recipe.build()


@dataclass(frozen=True)
class ModelRecipe:
    """A :class:`ModelSequences` as plain data.

    Attributes:
      xml: The spec's MJCF in full precision (:func:`~mjsysid.util.mjcf_text.spec_xml`).
      assets: The spec's in-memory assets (name -> bytes).
      model: The compiled nominal model (an ``MjModel`` pickles exactly; an ``MjSpec`` does
        not), used by the workers in place of a compile of ``xml``.
    """

    name: str
    xml: str
    assets: dict[str, bytes]
    model: mujoco.MjModel
    sequence_names: list[str]
    initial_states: list[np.ndarray]
    controls: list[SeriesRecipe | None]
    sensordata: list[SeriesRecipe]
    rms_reference: list[SeriesRecipe | None] | None
    inputs: list[SeriesRecipe | None]
    constants: list[dict[str, float]]

    @classmethod
    def of(cls, ms: ModelSequences) -> ModelRecipe:
        refs = None if ms.rms_reference is None else [SeriesRecipe.of(r) for r in ms.rms_reference]
        assets = dict(getattr(ms.spec, "assets", None) or {})
        return cls(
            name=ms.name,
            xml=spec_xml(ms.spec),
            assets=assets,
            model=ms.model,
            sequence_names=list(ms.sequence_name),
            initial_states=[np.asarray(s) for s in ms.initial_state],
            controls=[SeriesRecipe.of(c) for c in ms.control],  # type: ignore[union-attr]
            sensordata=[SeriesRecipe.of(s) for s in ms.sensordata],  # type: ignore[misc,union-attr]
            rms_reference=refs,
            inputs=[SeriesRecipe.of(ms.law_data(i)[0]) for i in range(len(ms))],
            constants=[dict(ms.law_data(i)[1]) for i in range(len(ms))],
        )

    def build(self) -> ModelSequences:
        spec = mujoco.MjSpec.from_string(self.xml, assets=self.assets or None)
        out = ModelSequences(
            self.name,
            spec,
            list(self.sequence_names),
            [s.copy() for s in self.initial_states],
            [_series(c) for c in self.controls],
            [s.build() for s in self.sensordata],
            None if self.rms_reference is None else [_series(r) for r in self.rms_reference],
            inputs=[_series(r) for r in self.inputs],
            constants=[dict(c) for c in self.constants],
        )
        out.model = self.model  # exactly the local nominal model (the XML may round)
        return out


@dataclass(frozen=True)
class ResidualRecipe:
    """Everything :func:`build_residual_fn` needs, as data a worker can rebuild it from.

    ``options`` are the keyword arguments of :func:`build_residual_fn` (callables such as a
    ``modify_residual`` or a ``control_transform`` travel as objects: Dask's transport pickles
    them; nothing here is ever written to a file). ``nthread``: rollout threads on each
    worker (``None``: the worker's thread count).
    """

    models: list[ModelRecipe]
    options: dict[str, Any] = field(default_factory=dict)
    nthread: int | None = None

    def build(self, nthread: int | None = None) -> ResidualFunction:
        """The residual function (``nthread`` rollout threads when the recipe names none)."""
        threads = self.nthread if self.nthread is not None else nthread
        return build_residual_fn([m.build() for m in self.models], **self.options, nthread=threads)


_OPTION_NAMES = (
    "modify_residual",
    "custom_rollout",
    "build_model",
    "sensor_weights",
    "enabled_observations",
    "normalize",
    "control_interpolation",
    "fast_model_edits",
    "control_transform",
    "force_laws",
    "compiled_laws",
)


def residual_recipe(
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    *,
    nthread: int | None = None,
    **options: Any,
) -> ResidualRecipe:
    """The recipe of ``build_residual_fn(models_sequences, **options)``.

    Args:
      models_sequences: As for :func:`build_residual_fn`.
      nthread: Rollout threads on each worker (default: the worker's thread count).
      **options: Keyword arguments of :func:`build_residual_fn` but ``nthread``.
    """
    unknown = sorted(set(options) - set(_OPTION_NAMES))
    if unknown:
        raise TypeError(must_be("residual options", f"names among {list(_OPTION_NAMES)}", unknown))
    if isinstance(models_sequences, ModelSequences):
        models_sequences = [models_sequences]
    return ResidualRecipe([ModelRecipe.of(m) for m in models_sequences], dict(options), nthread)


def recipe_of(rf: ResidualFunction, nthread: int | None = None) -> ResidualRecipe:
    """The recipe of an existing residual function (its whole data, not a head)."""
    return residual_recipe(rf.models_sequences, nthread=nthread, **build_options(rf))


# -- the worker side -------------------------------------------------------------------------
_MAX_RELAYED = 1000  # MuJoCo messages a worker sends back per call (the rest are counted)


class _WorkerMujocoLog:
    """Where MuJoCo logs in a worker process: a private file under the worker's local
    directory (Dask removes it with the worker), never ``MUJOCO_LOG.TXT`` in its working
    directory nor its stdout. Set once per process and kept (MuJoCo's log configuration is
    process-wide, and plugins come and go in any order); each call takes the messages logged
    since the last one, and the client writes them into its own MuJoCo log
    (:func:`_relay_mujoco_messages`)."""

    lock = threading.Lock()
    path: Path | None = None

    @classmethod
    def route(cls, folder: str) -> None:
        with cls.lock:
            if cls.path is not None:
                return
            private = Path(tempfile.mkdtemp(prefix="mjsysid-mujoco-log-", dir=folder))
            config = mujoco.MjLogConfig.get()
            config.logfile, config.logto_console, config.logto_file = (
                str(private / "MUJOCO_LOG.TXT"),
                False,
                True,
            )
            config.set()
            cls.path = private / "MUJOCO_LOG.TXT"

    @classmethod
    def take(cls, address: str) -> list[str]:
        """The messages logged since the last call (lines ``TYPE date: [Dask worker
        <address>] text``), at most :data:`_MAX_RELAYED` and a line counting the others."""
        with cls.lock:
            if cls.path is None or not cls.path.exists():
                return []
            taken = cls.path.with_name("taken.txt")
            os.replace(cls.path, taken)  # MuJoCo opens the file per message: the next is new
            lines = [ln for ln in taken.read_text(errors="replace").splitlines() if ln.strip()]
            taken.unlink()
        if len(lines) > _MAX_RELAYED:
            more = len(lines) - _MAX_RELAYED
            lines = [*lines[:_MAX_RELAYED], f"WARNING: {more} more messages were not relayed"]
        return [
            f"{head}{sep}[Dask worker {address}] {text}"
            for head, sep, text in (line.partition(": ") for line in lines)
        ]


def _relay_mujoco_messages(lines: Sequence[str]) -> None:
    """Writes the workers' MuJoCo messages where MuJoCo logs in this process
    (:class:`mujoco.MjLogConfig`: the file :func:`~mjsysid.util.mujoco_log.mujoco_log_in`
    routes to, and the console if it is on)."""
    if not lines:
        return
    config = mujoco.MjLogConfig.get()
    if config.logto_file and config.logfile:
        with open(config.logfile, "a", encoding="utf-8") as f:
            f.writelines(line + "\n\n" for line in lines)
    if config.logto_console:
        print(*lines, sep="\n", file=sys.stdout)


class _RecipePlugin(WorkerPlugin):
    """Worker plugin holding one recipe; builds the residual function on first use.

    One lock per worker: a ``ResidualFunction`` and its heads evaluate one call at a time.
    ``client_pid``: the client's process; a worker in another one has its MuJoCo log routed
    (:class:`_WorkerMujocoLog`), a worker thread of the client's own process (a cluster made
    with ``processes=False``) logs where the client does.
    """

    def __init__(self, name: str, recipe: ResidualRecipe, client_pid: int) -> None:
        self.name = name
        self.recipe = recipe
        self.client_pid = client_pid
        self._fresh()

    def _fresh(self) -> None:
        """The worker-side state (never shipped: each worker builds its own)."""
        self._rf: ResidualFunction | None = None
        self._heads: dict[float, ResidualFunction] = {}
        self._lock = threading.Lock()
        self._nthread: int | None = None
        self._address = ""

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "recipe": self.recipe, "client_pid": self.client_pid}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name, self.recipe, self.client_pid = (
            state["name"],
            state["recipe"],
            state["client_pid"],
        )
        self._fresh()

    def setup(self, worker: Any) -> None:
        self._nthread = int(getattr(worker.state, "nthreads", 1) or 1)
        self._address = str(worker.address)
        if os.getpid() != self.client_pid:
            _WorkerMujocoLog.route(worker.local_directory)

    def teardown(self, worker: Any) -> None:
        if self._rf is not None:
            self._rf.close()
        self._rf, self._heads = None, {}

    def residual(self, fraction: float) -> ResidualFunction:
        if self._rf is None:
            self._rf = self.recipe.build(self._nthread)
        if fraction == 1.0:
            return self._rf
        head = self._heads.get(fraction)
        if head is None:
            head = self._heads[fraction] = self._rf.head(fraction)
        return head

    def evaluate(
        self, fraction: float, params: ParameterDict, X: np.ndarray
    ) -> tuple[np.ndarray, list[str], list[str]]:
        """Residuals, divergence messages and MuJoCo's messages of one chunk."""
        with self._lock:
            rf = self.residual(fraction)
            r = rf(X, params)
            return r, list(rf.last_divergence), _WorkerMujocoLog.take(self._address)


def _worker_plugin(name: str, worker: Any = None) -> _RecipePlugin:
    """The plugin ``name`` of ``worker`` (default: the worker running this task)."""
    worker = distributed.get_worker() if worker is None else worker
    plugin = worker.plugins.get(name)
    if plugin is None:
        raise RuntimeError(
            f"Dask worker {worker.address} has no mjsysid residual {name!r} (closed, or the "
            "worker joined a different scheduler)"
        )
    return cast(_RecipePlugin, plugin)


def _evaluate_chunk(
    name: str, fraction: float, params: list[ParameterDict], X: np.ndarray
) -> tuple[np.ndarray, list[str], list[str]]:
    """Task: ``(n, k)`` residuals, divergence and MuJoCo messages of one chunk, on a
    worker."""
    return _worker_plugin(name).evaluate(fraction, params[0], X)


def _warm(name: str, fraction: float, dask_worker: Any = None) -> list[str]:
    """``client.run`` job: builds the residual function (or its head) on ``dask_worker``;
    returns MuJoCo's messages meanwhile."""
    plugin = _worker_plugin(name, dask_worker)
    with plugin._lock:
        plugin.residual(fraction)
    return _WorkerMujocoLog.take(plugin._address)


def _worker_stats(name: str, dask_worker: Any = None) -> dict[str, Any]:
    """``client.run`` job: the counters of the residual function on ``dask_worker``."""
    rf = _worker_plugin(name, dask_worker)._rf
    return {} if rf is None else dict(vars(rf.stats))


# -- the client side -------------------------------------------------------------------------
@dataclass
class DistributedStats:
    """Counters of the client side (cumulative; shared with :meth:`DistributedResidual.head`).

    ``tasks``: chunks sent; ``time_total``: wall time of calls (s), transfers included.
    """

    calls: int = 0
    candidates: int = 0
    tasks: int = 0
    time_total: float = 0.0


@dataclass
class _Shared:
    """What a residual and its heads share: the client, the plugin and the parameters sent;
    how long the scheduler may take to answer (``timeout``, s) and a call may wait for a
    first worker (``worker_timeout``, s).

    Every wait on the cluster has a deadline: a request the scheduler answers at once
    (:meth:`ask`) fails after ``timeout``; work on the workers (:meth:`wait`, :meth:`results`:
    registering the residual, sending the parameters, a call's tasks) may take as long as it
    takes, but meanwhile the scheduler must answer every ``timeout``. (Dask's own waits have
    none: its handshake read, ``gather`` and ``scheduler_info`` wait forever on a scheduler
    that stopped.) Tasks whose workers are lost are Dask's to rerun or give up.
    """

    client: Any
    name: str
    owns_client: bool
    owns_local: bool = True
    timeout: float = _CONNECT_TIMEOUT
    worker_timeout: float = _WORKER_TIMEOUT
    stats: DistributedStats = field(default_factory=DistributedStats)
    params_key: tuple[object, ...] | None = None
    params_future: Any = None
    closed: bool = False

    @property
    def address(self) -> str:
        return str(self.client.scheduler.address)

    def _start(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)`` started on the client's event loop (where Dask's
        blocking methods return awaitables); a ``concurrent.futures.Future`` of its result."""

        async def run() -> Any:
            return await call(*args, **kwargs)

        return asyncio.run_coroutine_threadsafe(run(), self.client.loop.asyncio_loop)

    def ask(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """The answer of a request, within ``timeout`` s.

        Raises:
          TimeoutError: No answer in time (naming the scheduler and ``what`` was asked).
        """
        running = self._start(call, *args, **kwargs)
        try:
            return running.result(timeout=self.timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(
                f"the Dask scheduler at {self.address} did not answer {what} within "
                f"{self.timeout:g} s: it stopped, is overloaded or cannot be reached (raise "
                "executor: {timeout: N} for a slow network)"
            ) from None
        finally:
            running.cancel()

    def workers(self) -> list[tuple[str, int]]:
        """``(address, threads)`` of every worker now, in address order."""
        info = self.ask("a request for its workers", self.client.scheduler.identity)
        workers = info.get("workers") or {}
        return sorted((a, int(w.get("nthreads", 1) or 1)) for a, w in workers.items())

    def first_workers(self) -> list[tuple[str, int]]:
        """:meth:`workers`, waiting up to ``worker_timeout`` s for a first one."""
        deadline = time.monotonic() + self.worker_timeout
        while not (workers := self.workers()):
            if time.monotonic() >= deadline:
                raise RuntimeError(
                    f"the Dask scheduler at {self.address} has no workers (waited "
                    f"{self.worker_timeout:g} s): start some with `dask worker {self.address}`"
                )
            time.sleep(min(0.1, self.worker_timeout))
        return workers

    def _watch(self, done: Callable[[float], bool]) -> None:
        """Returns once ``done(s)`` (waiting up to ``s`` seconds) is true; between its waits,
        the scheduler must answer (:meth:`ask`: a TimeoutError when it stopped)."""
        while not done(self.timeout):
            self.workers()

    def wait(self, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """The result of work on the workers, watched (:meth:`_watch`)."""
        running = self._start(call, *args, **kwargs)
        try:
            self._watch(lambda s: bool(concurrent.futures.wait([running], timeout=s).done))
            return running.result()
        finally:
            running.cancel()

    def results(self, futures: Sequence[Any]) -> list[Any]:
        """The results of Dask futures: their tasks watched (:meth:`_watch`) until all are
        done, then gathered. (Not Dask's ``gather`` all along: given up while tasks run, it
        leaves a task whose ``AllExit`` asyncio prints from the event loop's thread.)"""
        left, lock, finished = [len(futures)], threading.Lock(), threading.Event()

        def one_done(_: Any) -> None:
            with lock:
                left[0] -= 1
                if left[0] == 0:
                    finished.set()

        for future in futures:
            future.add_done_callback(one_done)
        self._watch(finished.wait)
        return cast(list[Any], self.wait(self.client.gather, list(futures)))


def _params_key(params: ParameterDict) -> tuple[object, ...]:
    """What a worker's copy of ``params`` must match: structure, bounds, frozen values and the
    modifiers (the values of free parameters come with each candidate)."""
    return (
        id(params),
        *(
            (
                p.name,
                p.frozen,
                id(p.modifier),
                id(p.model_modifier),
                p.min_value.tobytes(),
                p.max_value.tobytes(),
                p.value.tobytes() if p.frozen else p.size,
                repr(sorted(p.meta.items())),
            )
            for p in params.values()
        ),
    )


def _chunks(k: int, threads: Sequence[int]) -> list[slice]:
    """Contiguous column ranges of ``k`` columns, one per worker, sized by its threads
    (at most ``k`` ranges, none empty)."""
    w = np.asarray(threads[: max(1, min(k, len(threads)))], dtype=np.float64)
    ends = np.rint(np.cumsum(w) / w.sum() * k).astype(int)
    starts = np.concatenate([[0], ends[:-1]])
    return [slice(int(a), int(b)) for a, b in zip(starts, ends, strict=True) if b > a]


class _Local:
    """A capability a :class:`DistributedResidual` forwards to its local residual function:
    ``drf.<name>`` is ``drf.local.<name>`` (a bound method or a property's value), with the
    meaning and signature documented on
    :class:`~mjsysid.objective.residual.ResidualFunction`."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: DistributedResidual | None, owner: type | None = None) -> Any:
        if obj is None:  # the class attribute: the descriptor itself (for help and tools)
            return self
        return getattr(obj.local, self.name)

    def __repr__(self) -> str:
        return f"<forwarded to DistributedResidual.local.{self.name}>"


class DistributedResidual:
    """A residual function whose batched calls run on a Dask cluster.

    Same call protocol as :class:`~mjsysid.objective.residual.ResidualFunction` (``rf(x,
    params)``, ``x`` of shape ``(p,)`` -> ``(n,)`` or ``(p, k)`` -> ``(n, k)``) and the
    :class:`~mjsysid.objective.protocols.HorizonResidualFn` protocol. Everything else a fit or
    a report reads (``predict``, ``signal_groups``, ``sequence_labels``, ``describe_index``,
    ``check_params``, ...) is answered by a local residual function built from the same
    recipe (:attr:`local`). Make one with :func:`distribute`.

    Attributes:
      local: The local residual function (evaluates :meth:`predict`).
      stats: :class:`DistributedStats`; :meth:`worker_stats` gives each worker's counters.
      last_divergence: Messages about diverged candidates of the last call.
    """

    def __init__(self, shared: _Shared, local: ResidualFunction, fraction: float = 1.0) -> None:
        self._shared = shared
        self.local = local
        self.fraction = float(fraction)
        self.last_divergence: list[str] = []

    # -- evaluation -----------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The Dask ``Client``."""
        return self._shared.client

    @property
    def stats(self) -> DistributedStats:
        return self._shared.stats

    def _check_x(self, x: npt.ArrayLike, params: ParameterDict) -> np.ndarray:
        if not isinstance(params, ParameterDict):
            raise TypeError(
                must_be("residual_fn: params", "a ParameterDict", type(params).__name__)
            )
        arr = np.asarray(x, dtype=np.float64)
        p = sum(q.size for q in params.non_frozen())
        if arr.ndim not in (1, 2) or arr.shape[0] != p or (arr.ndim == 2 and arr.shape[1] < 1):
            raise ValueError(
                must_be(
                    "residual_fn: x",
                    f"shape ({p},) or ({p}, k) for the {p} free parameter values",
                    arr,
                    hint=f"got shape {np.shape(x)}",
                )
            )
        if not np.all(np.isfinite(arr)):
            raise ValueError("residual_fn: x must be finite, got non-finite entries")
        return arr if arr.ndim == 2 else arr[:, None]

    def _params_future(self, params: ParameterDict) -> Any:
        sh = self._shared
        key = _params_key(params)
        if key != sh.params_key:
            sh.params_future = sh.wait(
                sh.client.scatter, [params.copy()], broadcast=True, hash=False
            )
            sh.params_key = key
        return sh.params_future

    def __call__(self, x: npt.ArrayLike, params: ParameterDict) -> np.ndarray:
        """Residuals for ``x`` of shape ``(p,)`` -> ``(n,)``, or ``(p, k)`` -> ``(n, k)``;
        the columns are evaluated on the workers, in contiguous chunks."""
        t0 = time.perf_counter()
        flat = np.ndim(x) == 1
        X = self._check_x(x, params)
        self.local.check_params(params)
        sh = self._shared
        if sh.closed:
            raise RuntimeError("DistributedResidual: closed; make a new one with distribute()")
        workers = sh.first_workers()
        pf = self._params_future(params)
        chunks = _chunks(X.shape[1], [t for _, t in workers])
        futures = [
            sh.client.submit(
                _evaluate_chunk,
                sh.name,
                self.fraction,
                pf,
                np.ascontiguousarray(X[:, sl]),
                workers=[addr],
                allow_other_workers=True,  # a lost worker's chunk reruns elsewhere
                pure=False,
            )
            for sl, (addr, _) in zip(chunks, workers, strict=False)
        ]
        try:
            parts = sh.results(futures)
        except concurrent.futures.CancelledError as e:  # Dask gave the tasks up
            sh.params_key = None  # (the parameters sent may be lost with their workers)
            left = len(sh.workers())
            raise RuntimeError(
                f"the Dask cluster at {sh.address} gave up this call ({e}): "
                + (f"{left} worker(s) left" if left else "its workers were lost")
            ) from None
        out = np.concatenate([r for r, _, _ in parts], axis=1)
        self.last_divergence = [m for _, msgs, _ in parts for m in msgs]
        _relay_mujoco_messages([m for _, _, lines in parts for m in lines])
        sh.stats.calls += 1
        sh.stats.candidates += X.shape[1]
        sh.stats.tasks += len(futures)
        sh.stats.time_total += time.perf_counter() - t0
        return np.ascontiguousarray(out[:, 0]) if flat else out

    # -- what the fit and the reports read: the local residual function's answers ------------
    # (each name is forwarded explicitly, so the interface is the list below; see _Local)
    predict = _Local()  # detailed predictions, evaluated locally
    check_params = _Local()
    signal_groups = _Local()
    describe_index = _Local()
    sequence_labels = _Local()
    block_offsets = _Local()
    models_sequences = _Local()
    simulates = _Local()
    supports_horizons = _Local()
    horizon_samples = _Local()
    head_rows = _Local()
    threshold_brackets = _Local()

    def head(self, fraction: float) -> DistributedResidual:
        """The residual of the first ``fraction`` of every sequence, evaluated on the workers
        (each builds the head of its residual function on first use)."""
        local = self.local.head(fraction)  # (checks fraction)
        if local is self.local:
            return self
        return DistributedResidual(self._shared, local, fraction)

    def worker_stats(self) -> dict[str, dict[str, Any]]:
        """Each worker's :class:`~mjsysid.objective.residual.ResidualStats`, as dicts."""
        sh = self._shared
        return cast(dict[str, dict[str, Any]], sh.wait(sh.client.run, _worker_stats, sh.name))

    def close(self) -> None:
        """Removes the residual from the workers; closes the client and the local residual
        function if it made them."""
        sh = self._shared
        if sh.closed:
            return
        sh.closed = True
        sh.params_future = None
        try:
            sh.ask("the removal of the residual", sh.client.unregister_worker_plugin, sh.name)
        except (ValueError, KeyError, OSError):  # gone (workers lost, scheduler down or mute)
            logger.debug("worker plugin %s already removed", sh.name)
        if sh.owns_client:
            sh.client.close()
        if sh.owns_local:  # (a residual function given to distribute() stays its caller's)
            self.local.close()

    def __enter__(self) -> DistributedResidual:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        head = "" if self.fraction == 1.0 else f", head {self.fraction:g}"
        return f"DistributedResidual({self.local!r} on {self._shared.address}{head})"


# -- making one ------------------------------------------------------------------------------
_NOT_DASK_ANSWER = (  # what Dask's reader raises on bytes that are not its protocol
    struct.error,  # a frame header cut short
    ValueError,  # msgpack's format errors, bad lengths
    TypeError,
    KeyError,
    IndexError,
    AttributeError,  # a handshake that is not a mapping
    MemoryError,  # a "frame length" read from text: 'HTTP/1.1' is 3.07 EiB
    OverflowError,
    EOFError,
    UnpicklingError,
)


def _ask_identity(address: str, timeout: float) -> Any:
    """What answers at ``address`` to Dask's handshake and an ``identity`` request, all within
    ``timeout`` s (run in a thread of its own: the caller may be inside an event loop).

    Raises:
      OSError: Nothing accepted a connection (Dask's connect retries for 0.8 ``timeout``).
      TimeoutError: A connection was accepted, but no answer came within ``timeout``.
    """

    async def identity() -> Any:
        connect = distributed.comm.core.connect
        comm = await connect(address, timeout=0.8 * timeout)  # type: ignore[no-untyped-call]
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    def run() -> Any:
        return asyncio.run(asyncio.wait_for(identity(), timeout))

    with concurrent.futures.ThreadPoolExecutor(1, "mjsysid-dask-probe") as pool:
        return pool.submit(run).result()


def _check_scheduler(address: str, timeout: float) -> None:
    """Refuses, within ``timeout`` s, an address where no Dask scheduler answers.

    Raises:
      ConnectionError: Nothing listens there; something accepts the connection but does not
        answer; something answers that is not Dask (an HTTP server, the dashboard); a Dask
        worker, not its scheduler.
    """
    hint = (
        f"start a scheduler (`dask scheduler`, port 8786) and workers (`dask worker "
        f"{address}`), or check the address"
    )
    try:
        answer = _ask_identity(address, timeout)
    except (TimeoutError, asyncio.TimeoutError):
        raise ConnectionError(
            f"{address!r} accepted the connection but did not answer as a Dask scheduler "
            f"within {timeout:g} s: {hint}"
        ) from None
    except distributed.comm.core.CommClosedError:
        raise ConnectionError(
            f"{address!r} closed the connection without Dask's handshake: not a Dask "
            f"scheduler; {hint}"
        ) from None
    except OSError as e:
        raise ConnectionError(
            f"no Dask scheduler answered at {address!r} within {timeout:g} s: {hint}"
        ) from e
    except _NOT_DASK_ANSWER as e:
        raise ConnectionError(
            f"{address!r} is not a Dask scheduler: what answers there does not speak Dask's "
            f"protocol ({type(e).__name__}; an HTTP server such as the scheduler's dashboard, "
            f"port 8787?); {hint}"
        ) from None
    kind = answer.get("type") if isinstance(answer, dict) else None
    if kind != "Scheduler":
        said = f"a Dask {kind}" if isinstance(kind, str) else "something else"
        raise ConnectionError(
            f"{address!r} is {said[:60]}, not a Dask scheduler: give the scheduler's address"
        )


def _client_within(address: str, seconds: float) -> Any:
    """``distributed.Client(address)``, given up after ``seconds``: Dask's handshake read
    has no deadline of its own. A client made after that is closed at once (its thread
    ends with it)."""
    made: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def connect() -> None:
        try:
            client = distributed.Client(address, timeout=seconds, set_as_default=False)  # type: ignore[no-untyped-call]
            made.set_result(client)
        except concurrent.futures.InvalidStateError:  # given up meanwhile
            client.close()  # type: ignore[no-untyped-call]
        except BaseException as e:  # the waiting thread raises it
            with contextlib.suppress(concurrent.futures.InvalidStateError):
                made.set_exception(e)

    threading.Thread(target=connect, name="mjsysid-dask-connect", daemon=True).start()
    try:
        return made.result(timeout=seconds)
    except concurrent.futures.TimeoutError:
        if not made.cancel():  # done in the meantime
            return made.result()
        raise ConnectionError(
            f"the Dask scheduler at {address!r} answered, then did not complete the "
            f"connection within {seconds:g} s (stopped or overloaded)"
        ) from None


def make_executor(
    workers: int | None = None,
    scheduler: str | None = None,
    *,
    threads_per_worker: int = 1,
    timeout: float = _CONNECT_TIMEOUT,
    **cluster_options: Any,
) -> Any:
    """A Dask ``Client``: of a new ``LocalCluster`` of ``workers`` processes on this machine
    (closed with the client), or connected to the scheduler at ``scheduler`` (e.g.
    ``"tcp://host:8786"``).

    A local cluster's scratch space (Dask's ``temporary-directory``: the scheduler's and the
    workers' ``dask-scratch-space``) is a private temporary folder, removed when the client
    is gone or the program exits, never left in the system's temporary folder.

    Args:
      workers: Worker processes of a local cluster (exclusive with ``scheduler``).
      scheduler: Address of a running scheduler.
      threads_per_worker: Threads of each local worker (its rollouts use as many).
      timeout: Seconds the scheduler has to answer (its handshake, an identity request and
        the connection together), at most the limit ``max_timeout_s``.
      **cluster_options: More ``LocalCluster`` keyword arguments.

    Raises:
      ConnectionError: No Dask scheduler answers at ``scheduler`` in time (the message
        names the address and says what was there instead).
      ValueError: A bad ``workers`` or ``timeout``.
    """
    if (workers is None) == (scheduler is None):
        raise ValueError(
            must_be("make_executor", "given workers=N or scheduler='tcp://host:port'", None)
        )
    timeout = _check_timeout(timeout, "timeout")
    if scheduler is not None:
        if not isinstance(scheduler, str) or not scheduler:
            raise TypeError(must_be("scheduler", "an address such as 'tcp://host:8786'", scheduler))
        deadline = time.monotonic() + timeout
        _check_scheduler(scheduler, timeout)
        return _client_within(scheduler, max(deadline - time.monotonic(), 0.001))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(must_be("workers", "a positive integer", workers))
    options: dict[str, Any] = {"processes": True, "dashboard_address": ":0"}
    options.update(cluster_options)
    scratch = tempfile.mkdtemp(prefix="mjsysid-dask-")
    try:  # a client that starts its cluster closes it too
        with dask.config.set({"temporary-directory": scratch}):  # scheduler, nannies, workers
            client = distributed.Client(  # type: ignore[no-untyped-call]
                n_workers=workers,
                threads_per_worker=threads_per_worker,
                set_as_default=False,
                **options,
            )
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    weakref.finalize(client, shutil.rmtree, scratch, True)
    return client


def _client(executor: Any, timeout: float) -> tuple[Any, bool]:
    """``(client, owned)`` for a Client, or for an address string (a new client)."""
    if isinstance(executor, str):
        return make_executor(scheduler=executor, timeout=timeout), True
    if isinstance(executor, distributed.Client):
        return executor, False
    raise TypeError(
        must_be("executor", "a dask.distributed Client or a scheduler address", executor)
    )


def distribute(
    residual: ResidualFunction | ResidualRecipe,
    executor: Any,
    *,
    nthread: int | None = None,
    warm: bool = True,
    timeout: float | None = None,
    worker_timeout: float = _WORKER_TIMEOUT,
) -> DistributedResidual:
    """Runs the batched calls of ``residual`` on the Dask cluster of ``executor``.

    Args:
      residual: A :class:`ResidualFunction` from :func:`build_residual_fn` (the whole data,
        not a head) or a :class:`ResidualRecipe`.
      executor: A ``dask.distributed.Client`` or a scheduler address (a client is made and
        closed by :meth:`DistributedResidual.close`).
      nthread: Rollout threads on each worker (default: its thread count).
      warm: Build the residual function on every worker now (errors show here, and the first
        call does not pay for it).
      timeout: Seconds the scheduler has to answer a request, and to connect to an address
        (default 10; at most the limit ``max_timeout_s``). Work on the workers has no
        deadline, but the scheduler is asked every ``timeout`` s whether it is alive.
      worker_timeout: Seconds a call waits for a first worker when the cluster has none.

    Returns:
      A :class:`DistributedResidual`; call :meth:`~DistributedResidual.close` when done.

    Raises:
      TimeoutError: The scheduler stopped answering. RuntimeError: No worker in time.
    """
    if not isinstance(residual, ResidualFunction | ResidualRecipe):
        raise TypeError(must_be("residual", "a ResidualFunction or a ResidualRecipe", residual))
    timeout = _check_timeout(_CONNECT_TIMEOUT if timeout is None else timeout, "timeout")
    worker_timeout = _check_timeout(worker_timeout, "worker_timeout")
    client, owned = _client(executor, timeout)
    if isinstance(residual, ResidualFunction):
        recipe, local = recipe_of(residual, nthread), residual
    else:
        recipe = residual if nthread is None else dataclasses.replace(residual, nthread=nthread)
        try:
            local = recipe.build(1)
        except BaseException:
            if owned:
                client.close()
            raise
    name = f"mjsysid-residual-{uuid.uuid4().hex}"
    owns_local = not isinstance(residual, ResidualFunction)
    shared = _Shared(client, name, owned, owns_local, timeout, worker_timeout)
    out = DistributedResidual(shared, local)
    try:
        shared.wait(client.register_plugin, _RecipePlugin(name, recipe, os.getpid()), name=name)
        if warm and shared.workers():
            built = shared.wait(client.run, _warm, name, 1.0)
            _relay_mujoco_messages([m for lines in built.values() for m in lines])
    except BaseException:
        out.close()  # (the build error is the one to see)
        raise
    return out


def distributed_residual_fn(
    models_sequences: Sequence[ModelSequences] | ModelSequences,
    executor: Any,
    *,
    nthread: int | None = None,
    **options: Any,
) -> DistributedResidual:
    """``build_residual_fn(models_sequences, **options)`` evaluated on ``executor``'s cluster
    (``nthread``: rollout threads of each worker)."""
    return distribute(residual_recipe(models_sequences, **options), executor, nthread=nthread)
