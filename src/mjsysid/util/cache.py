"""A small bounded cache: at most ``maxsize`` entries, the oldest dropped first.

Compiled signal plans, interpolation readers and stacked control batches are kept between
calls of the residual by key; each cache is bounded so memory does not grow with the number of
distinct keys seen. Eviction is first-in first-out (the order entries were added; a hit does
not refresh an entry), which is all these caches need: their keys repeat in long runs (the
columns of one Jacobian, one sequence after another).

The entries live in a :class:`collections.OrderedDict`. Lookups are plain dict reads (atomic
under the GIL); adding an entry, and the eviction it causes, hold a lock, so threads that fill
one cache at once never evict past the bound nor race on the same oldest entry. A copy or a
pickle of a cache is empty: what it holds is rebuilt on demand.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar, overload

from mjsysid.util.errors import must_be

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")


class BoundedCache(Generic[K, V]):
    """Up to ``maxsize`` values by key; adding one more drops the oldest entry.

    Args:
      maxsize: The most entries kept (an ``int >= 1``).
    """

    __slots__ = ("_items", "_lock", "maxsize")

    def __init__(self, maxsize: int) -> None:
        if isinstance(maxsize, bool) or not isinstance(maxsize, int) or maxsize < 1:
            raise ValueError(must_be("BoundedCache: maxsize", "an integer >= 1", maxsize))
        self.maxsize = maxsize
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    @overload
    def get(self, key: K) -> V | None: ...
    @overload
    def get(self, key: K, default: D) -> V | D: ...
    def get(self, key: K, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default`` (one lookup: an entry evicted by
        another thread meanwhile is never half-seen)."""
        return self._items.get(key, default)

    def put(self, key: K, value: V) -> V:
        """Stores ``value`` under ``key`` (dropping the oldest entries past ``maxsize``) and
        returns it."""
        with self._lock:
            items = self._items
            items[key] = value
            while len(items) > self.maxsize:
                items.popitem(last=False)
        return value

    def clear(self) -> None:
        """Drops every entry."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __getstate__(self) -> dict[str, Any]:
        return {"maxsize": self.maxsize}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.maxsize = state["maxsize"]
        self._items = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"BoundedCache(maxsize={self.maxsize}, entries={len(self)})"
