"""The bounded cache: at most ``maxsize`` entries, oldest first out, empty when copied."""

from __future__ import annotations

import copy
import pickle
import threading

import pytest

from mjsysid.util.cache import BoundedCache


def test_the_oldest_entry_goes_first_and_a_hit_does_not_refresh_it():
    cache: BoundedCache[str, int] = BoundedCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # a hit, yet "a" stays the oldest
    assert cache.put("c", 3) == 3
    assert len(cache) == 2 and "a" not in cache
    assert cache.get("a") is None and cache.get("a", -1) == -1
    assert cache.get("b") == 2 and cache.get("c") == 3


def test_a_stored_none_is_told_from_a_miss():
    cache: BoundedCache[int, None] = BoundedCache(1)
    missing = object()
    cache.put(0, None)
    assert cache.get(0, missing) is None
    assert cache.get(1, missing) is missing


def test_copies_and_pickles_start_empty_with_the_same_bound():
    cache: BoundedCache[int, int] = BoundedCache(3)
    cache.put(1, 1)
    for clone in (copy.deepcopy(cache), pickle.loads(pickle.dumps(cache))):
        assert len(clone) == 0 and clone.maxsize == 3
        clone.put(2, 2)
        assert clone.get(2) == 2
    assert cache.get(1) == 1 and 2 not in cache


def test_threads_filling_one_cache_never_pass_the_bound():
    cache: BoundedCache[tuple[int, int], int] = BoundedCache(8)

    def fill(t: int) -> None:
        for i in range(2000):
            cache.put((t, i), i)

    threads = [threading.Thread(target=fill, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(cache) == 8
    cache.clear()
    assert len(cache) == 0


@pytest.mark.parametrize("maxsize", [0, -1, 2.5, True, "4"])
def test_a_bad_bound_is_named(maxsize):
    with pytest.raises(ValueError, match=r"BoundedCache: maxsize must be an integer >= 1, got"):
        BoundedCache(maxsize)
