"""Residual evaluations on a Dask cluster (``pip install 'mjsysid[distributed]'``).

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
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import mujoco
import numpy as np
import numpy.typing as npt

from mjsysid.data.sequences import ModelSequences
from mjsysid.data.timeseries import TimeSeries
from mjsysid.fit.executors import executor_options
from mjsysid.objective.residual import (
    ResidualFunction,
    SequencePrediction,
    build_options,
    build_residual_fn,
)
from mjsysid.params.parameter import ParameterDict
from mjsysid.util.errors import must_be
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

logger = logging.getLogger(__name__)

_INSTALL_HINT = "install the optional extra: pip install 'mjsysid[distributed]'"
_CONNECT_TIMEOUT = 10.0  # s, default wait for a scheduler to answer
_WORKER_TIMEOUT = 30.0  # s, default wait for a first worker to join


try:  # an optional dependency: this module is imported only when a cluster is asked for
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
class _RecipePlugin(WorkerPlugin):
    """Worker plugin holding one recipe; builds the residual function on first use.

    One lock per worker: a ``ResidualFunction`` and its heads evaluate one call at a time.
    """

    def __init__(self, name: str, recipe: ResidualRecipe) -> None:
        self.name = name
        self.recipe = recipe
        self._fresh()

    def _fresh(self) -> None:
        """The worker-side state (never shipped: each worker builds its own)."""
        self._rf: ResidualFunction | None = None
        self._heads: dict[float, ResidualFunction] = {}
        self._lock = threading.Lock()
        self._nthread: int | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "recipe": self.recipe}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name, self.recipe = state["name"], state["recipe"]
        self._fresh()

    def setup(self, worker: Any) -> None:
        self._nthread = int(getattr(worker.state, "nthreads", 1) or 1)

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
    ) -> tuple[np.ndarray, list[str]]:
        with self._lock:
            rf = self.residual(fraction)
            return rf(X, params), list(rf.last_divergence)


def _worker_plugin(name: str, worker: Any = None) -> _RecipePlugin:
    """The plugin ``name`` of ``worker`` (default: the worker running this task)."""
    worker = distributed.get_worker() if worker is None else worker
    plugin = worker.plugins.get(name)
    if plugin is None:
        raise RuntimeError(
            f"Dask worker {worker.address} has no mjsysid residual {name!r} (closed, or the "
            "worker joined a different scheduler)"
        )
    return plugin


def _evaluate_chunk(
    name: str, fraction: float, params: list[ParameterDict], X: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Task: ``(n, k)`` residuals and divergence messages of one chunk, on a worker."""
    return _worker_plugin(name).evaluate(fraction, params[0], X)


def _warm(name: str, fraction: float, dask_worker: Any = None) -> int:
    """``client.run`` job: builds the residual function (or its head) on ``dask_worker``;
    returns its sequence count."""
    plugin = _worker_plugin(name, dask_worker)
    with plugin._lock:
        return len(plugin.residual(fraction).sequence_labels)


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
    """What a residual and its heads share: the client, the plugin and the parameters sent."""

    client: Any
    name: str
    owns_client: bool
    owns_local: bool = True
    worker_timeout: float = _WORKER_TIMEOUT
    stats: DistributedStats = field(default_factory=DistributedStats)
    params_key: tuple[object, ...] | None = None
    params_future: Any = None
    closed: bool = False


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
            sh.params_future = sh.client.scatter([params.copy()], broadcast=True, hash=False)
            sh.params_key = key
        return sh.params_future

    def _workers(self) -> list[tuple[str, int]]:
        """``(address, threads)`` of every worker, in address order (waits for a first one)."""
        sh = self._shared
        if sh.closed:
            raise RuntimeError("DistributedResidual: closed; make a new one with distribute()")
        info = sh.client.scheduler_info(n_workers=-1)["workers"]
        if not info:
            address = sh.client.scheduler.address
            try:
                sh.client.wait_for_workers(1, timeout=sh.worker_timeout)
            except TimeoutError:
                raise RuntimeError(
                    f"the Dask scheduler at {address} has no workers (waited "
                    f"{sh.worker_timeout:g} s): start some with `dask worker {address}`"
                ) from None
            info = sh.client.scheduler_info(n_workers=-1)["workers"]
        return sorted((a, int(w.get("nthreads", 1) or 1)) for a, w in info.items())

    def __call__(self, x: npt.ArrayLike, params: ParameterDict) -> np.ndarray:
        """Residuals for ``x`` of shape ``(p,)`` -> ``(n,)``, or ``(p, k)`` -> ``(n, k)``;
        the columns are evaluated on the workers, in contiguous chunks."""
        t0 = time.perf_counter()
        flat = np.ndim(x) == 1
        X = self._check_x(x, params)
        self.local.check_params(params)
        sh = self._shared
        workers = self._workers()
        pf = self._params_future(params)
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
            for sl, (addr, _) in zip(
                _chunks(X.shape[1], [t for _, t in workers]), workers, strict=False
            )
        ]
        parts = sh.client.gather(futures)
        out = np.concatenate([r for r, _ in parts], axis=1)
        self.last_divergence = [m for _, msgs in parts for m in msgs]
        sh.stats.calls += 1
        sh.stats.candidates += X.shape[1]
        sh.stats.tasks += len(futures)
        sh.stats.time_total += time.perf_counter() - t0
        return np.ascontiguousarray(out[:, 0]) if flat else out

    # -- what the fit and the reports read (answered locally) -------------------------------
    def predict(
        self,
        x: npt.ArrayLike | ParameterDict | None = None,
        params: ParameterDict | npt.ArrayLike | None = None,
    ) -> list[SequencePrediction]:
        """Detailed prediction of every sequence (evaluated locally, see
        :meth:`ResidualFunction.predict`)."""
        return self.local.predict(x, params)

    def check_params(self, params: ParameterDict) -> None:
        self.local.check_params(params)

    def signal_groups(self) -> np.ndarray | None:
        return self.local.signal_groups()

    def describe_index(self, i: int) -> str:
        return self.local.describe_index(i)

    @property
    def sequence_labels(self) -> list[str]:
        return self.local.sequence_labels

    @property
    def block_offsets(self) -> np.ndarray:
        return self.local.block_offsets

    @property
    def models_sequences(self) -> list[ModelSequences]:
        return self.local.models_sequences

    def simulates(self, params: ParameterDict) -> bool:
        return self.local.simulates(params)

    def supports_horizons(self, params: ParameterDict | None = None) -> bool:
        return self.local.supports_horizons(params)

    def horizon_samples(self, fraction: float, params: ParameterDict | None = None) -> list[int]:
        return self.local.horizon_samples(fraction, params)

    def head(self, fraction: float) -> DistributedResidual:
        """The residual of the first ``fraction`` of every sequence, evaluated on the workers
        (each builds the head of its residual function on first use)."""
        local = self.local.head(fraction)  # (checks fraction)
        if local is self.local:
            return self
        return DistributedResidual(self._shared, local, fraction)

    def worker_stats(self) -> dict[str, dict[str, Any]]:
        """Each worker's :class:`~mjsysid.objective.residual.ResidualStats`, as dicts."""
        return self._shared.client.run(_worker_stats, self._shared.name)

    def close(self) -> None:
        """Removes the residual from the workers; closes the client and the local residual
        function if it made them."""
        sh = self._shared
        if sh.closed:
            return
        sh.closed = True
        sh.params_future = None
        try:
            sh.client.unregister_worker_plugin(sh.name)
        except (ValueError, KeyError, OSError):  # already gone (workers lost, scheduler down)
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
        return (
            f"DistributedResidual({self.local!r} on {self._shared.client.scheduler.address}{head})"
        )


# -- making one ------------------------------------------------------------------------------
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

    Args:
      workers: Worker processes of a local cluster (exclusive with ``scheduler``).
      scheduler: Address of a running scheduler.
      threads_per_worker: Threads of each local worker (its rollouts use as many).
      timeout: Seconds to wait for the scheduler to answer.
      **cluster_options: More ``LocalCluster`` keyword arguments.

    Raises:
      ConnectionError: Nothing answers at ``scheduler`` (the message names the address).
    """
    if (workers is None) == (scheduler is None):
        raise ValueError(
            must_be("make_executor", "given workers=N or scheduler='tcp://host:port'", None)
        )
    if scheduler is not None:
        if not isinstance(scheduler, str) or not scheduler:
            raise TypeError(must_be("scheduler", "an address such as 'tcp://host:8786'", scheduler))
        try:
            return distributed.Client(scheduler, timeout=timeout)
        except (OSError, TimeoutError) as e:
            raise ConnectionError(
                f"no Dask scheduler answered at {scheduler!r} within {timeout:g} s: start one "
                f"there (`dask scheduler`) and workers (`dask worker {scheduler}`), or check "
                "the address"
            ) from e
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(must_be("workers", "a positive integer", workers))
    options: dict[str, Any] = {"processes": True, "dashboard_address": ":0"}
    options.update(cluster_options)
    # a client that starts its cluster closes it too
    return distributed.Client(
        n_workers=workers, threads_per_worker=threads_per_worker, set_as_default=False, **options
    )


def _client(executor: Any) -> tuple[Any, bool]:
    """``(client, owned)`` for a Client, or for an address string (a new client)."""
    if isinstance(executor, str):
        return make_executor(scheduler=executor), True
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
      worker_timeout: Seconds a call waits for a first worker when the cluster has none.

    Returns:
      A :class:`DistributedResidual`; call :meth:`~DistributedResidual.close` when done.
    """
    if not isinstance(residual, ResidualFunction | ResidualRecipe):
        raise TypeError(must_be("residual", "a ResidualFunction or a ResidualRecipe", residual))
    client, owned = _client(executor)
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
    client.register_plugin(_RecipePlugin(name, recipe), name=name)
    owns_local = not isinstance(residual, ResidualFunction)
    shared = _Shared(client, name, owned, owns_local, worker_timeout=float(worker_timeout))
    out = DistributedResidual(shared, local)
    if warm and client.scheduler_info(n_workers=-1)["workers"]:
        try:
            client.run(_warm, name, 1.0)
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
