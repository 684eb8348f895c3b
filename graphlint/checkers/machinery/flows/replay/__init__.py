"""The replay flow: what happens around `replay()`, and static outputs that cross files
through a function that replays and returns (runner traces)."""
