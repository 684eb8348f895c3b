"""GL510's analysis on the memory ranges the guard measures (no CUDA): graphs sharing a pool
replayed out of capture order, or at once on two unordered streams, while their memory overlaps;
and the orders and pools that are sound, which report nothing."""

from __future__ import annotations

from graphlint.runtime_sanitizer.analysis.pool_order import PoolGraph, PoolOrder, violation_message

POOL = (0, 1)
STREAM, SIDE = 7, 9


def _three_successive(pool_of_the_later: tuple[int, int] = POOL) -> PoolOrder:
    """g0 makes b, c, d; g1 reads c (then c dies); g2 reads d and gets c's block for f."""
    order = PoolOrder()
    b, c, d, e = (0x1000, 256), (0x1100, 256), (0x1200, 256), (0x1300, 256)
    order.captured(PoolGraph(0, "graph captured at t.py:10", POOL, [b, c, d], [(0x9000, 256)]))
    order.captured(PoolGraph(1, "graph captured at t.py:14", pool_of_the_later, [e], [c]))
    f = c if pool_of_the_later == POOL else (0x5000, 256)  # a block of another pool is elsewhere
    order.captured(PoolGraph(2, "graph captured at t.py:18", pool_of_the_later, [f], [d]))
    return order


def _replay(order: PoolOrder, keys: list[int], stream: int = STREAM) -> list:
    return [v for key in keys for v in order.replayed(key, stream)]


def test_replaying_in_capture_order_again_and_again_is_sound() -> None:
    assert _replay(_three_successive(), [0, 1, 2, 0, 1, 2, 0, 1, 2]) == []


def test_a_later_capture_replayed_before_the_reader_overwrites_what_it_reads() -> None:
    order = _three_successive()
    assert _replay(order, [0, 1, 2]) == []
    found = _replay(order, [0, 2, 1])
    assert [(v.reader.key, v.other.key, v.producer.key, v.concurrent) for v in found] == [(1, 2, 0, False)]
    message = violation_message(found[0], 2)
    for part in ("t.py:14", "t.py:18", "t.py:10", "256 bytes at 0x1100", "capture order"):
        assert part in message, message


def test_each_broken_pair_is_reported_once() -> None:
    order = _three_successive()
    assert len(_replay(order, [0, 2, 1, 0, 2, 1, 0, 2, 1])) == 1


def test_graphs_in_their_own_pools_never_interfere() -> None:
    assert _replay(_three_successive(pool_of_the_later=(0, 2)), [0, 2, 1, 0, 2, 1]) == []


def test_a_reader_whose_producer_never_replayed_relies_on_nothing_yet() -> None:
    assert _replay(_three_successive(), [2, 1]) == []


def _two_sharing_temporaries() -> PoolOrder:
    """g0's temporaries were freed during its capture and handed to g1's."""
    order = PoolOrder()
    order.captured(PoolGraph(0, "graph captured at t.py:30", POOL, [(0x1000, 512), (0x2000, 64)], []))
    order.captured(PoolGraph(1, "graph captured at t.py:34", POOL, [(0x1000, 512), (0x3000, 64)], []))
    return order


def test_two_pool_mates_on_two_unordered_streams_race() -> None:
    order = _two_sharing_temporaries()
    order.replayed(0, SIDE)
    found = order.replayed(1, STREAM)
    assert [(v.reader.key, v.other.key, v.concurrent, v.overlap) for v in found] == [(1, 0, True, (0x1000, 512))]
    assert "another stream" in violation_message(found[0], 1)


def test_a_wait_or_a_sync_between_the_two_replays_orders_them() -> None:
    for between in (PoolOrder.waited, PoolOrder.synchronized):
        order = _two_sharing_temporaries()
        order.replayed(0, SIDE)
        between(order)
        assert order.replayed(1, STREAM) == []


def test_a_wait_made_before_the_first_replay_orders_nothing_after_it() -> None:
    order = _two_sharing_temporaries()
    order.waited()  # PyTorch's concurrent test: s1.wait_stream(s0) before g0 replays on s0
    order.replayed(0, SIDE)
    assert [v.concurrent for v in order.replayed(1, STREAM)] == [True]


def test_pool_mates_on_one_stream_are_ordered_by_it() -> None:
    order = _two_sharing_temporaries()
    assert _replay(order, [0, 1, 0, 1]) == []
