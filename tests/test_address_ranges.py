"""Address ranges merged once, then asked about (`analysis.address_ranges`): the launcher's
GL507 test for an input inside memory the graph writes, and the guard's Triton write sets."""

from __future__ import annotations

from graphlint.runtime_sanitizer.analysis.address_ranges import merged, overlaps


def test_touching_and_overlapping_ranges_merge_and_order_does_not_matter() -> None:
    assert merged([(300, 400), (100, 200), (200, 250), (150, 160)]) == ([100, 300], [250, 400])


def test_a_range_overlaps_only_where_it_shares_a_byte() -> None:
    spans = merged([(100, 200), (300, 400)])
    assert overlaps(spans, 150, 160) and overlaps(spans, 50, 101) and overlaps(spans, 250, 301)
    assert not overlaps(spans, 200, 300)  # between them, touching both ends
    assert not overlaps(spans, 0, 100) and not overlaps(spans, 400, 500)
    assert overlaps(spans, 0, 1000)  # holding them both
    assert not overlaps(merged([]), 0, 1 << 40)
