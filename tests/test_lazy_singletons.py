"""A singleton built on first use (`if cls._instance is None: cls._instance = Manager()`) is
built by the eager runs before a capture, once per process: Megatron's offload manager builds
pinned buffers that way, reached from its layer captures. A lazy field of `self` is not one
(the object may be built per call, and its field filled again under each capture), nor is a
branch that tests the holder without building it."""

from __future__ import annotations

from conftest import check_json

SOURCE = """\
import torch

_POOL = None


class Manager:
    INSTANCE = None

    def __init__(self):
        self.pinned = torch.empty(16, pin_memory=True)

    @classmethod
    def get(cls):
        if cls.INSTANCE is None:
            cls.INSTANCE = Manager()
        return cls.INSTANCE

    @staticmethod
    def shared():
        if Manager.INSTANCE is None:
            Manager.INSTANCE = Manager()
        return Manager.INSTANCE

    @classmethod
    def checked(cls):
        if cls.INSTANCE is None:
            torch.empty(1, pin_memory=True)
            raise RuntimeError("call get() first")
        return cls.INSTANCE


def pool():
    global _POOL
    if _POOL is None:
        _POOL = torch.empty(8, pin_memory=True)
    return _POOL


class Batch:
    def __init__(self):
        self.cache = None

    def positions(self, n):
        if self.cache is None:
            self.cache = torch.empty(n, pin_memory=True)
        return self.cache


def step(graph):
    batch = Batch()
    with torch.cuda.graph(graph):
        Manager.get()
        Manager.shared()
        Manager.checked()
        pool()
        batch.positions(4)
"""


def test_a_process_wide_singleton_is_built_before_the_capture_and_a_per_object_field_is_not(write_tree) -> None:
    root = write_tree({"lazy.py": SOURCE})
    found = sorted(f["line"] for f in check_json("--select", "GL112", ".", cwd=root))
    assert found == [27, 45]  # the branch that only tests the holder, and the field of `self`
