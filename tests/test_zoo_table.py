"""The wide zoo's table (benchmarks/zoo_table.py): a `--costs-only` re-time lays new times over
the verdicts an earlier run gave, never makes a verdict, and the summary counts each clock."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import zoo_table


def _write(path: Path, results: dict) -> str:
    path.write_text(json.dumps({"results": results}))
    return str(path)


def _times(launcher: float, copy: float) -> dict:
    return {
        "launcher_gpu_us": launcher,
        "copy_gpu_us": copy,
        "launcher_busy_us": launcher - 1,
        "copy_busy_us": copy + 1,
        "launcher_cpu_us": 10.0,
        "copy_cpu_us": 12.0,
        "launcher_host_us": 8.0,  # the thread's CPU time per call, calls queued behind a spin
        "copy_host_us": 9.5,
        "launcher_pool_mib": 24.0,
        "copy_pool_mib": 26.0,  # a first capture's pool can be larger: not counted as saved
        "launcher_held_mib": 24.0,
        "copy_held_mib": 27.5,
    }


def test_a_timed_only_run_replaces_times_and_keeps_verdicts(tmp_path: Path) -> None:
    scored = _write(
        tmp_path / "scored.json",
        {
            "m.a[float32]": {"pass": True, "bit_identical": "3/3", "patched_nodes": 2, **_times(110.0, 100.0)},
            "m.b[float32]": {"pass": False, "capturable": False, "cause": "host copy in capture"},
        },
    )
    retimed = _write(
        tmp_path / "retimed.json",
        {
            "m.a[float32]": {"timed_only": True, **_times(95.0, 100.0)},
            "m.b[float32]": {"timed_only": True, **_times(1.0, 2.0)},  # no verdict to lay it over
            "m.c[float32]": {"timed_only": True, **_times(1.0, 2.0)},
        },
    )
    rows = zoo_table.merged([scored, retimed], [])
    assert set(rows) == {"m.a[float32]", "m.b[float32]"}
    assert rows["m.a[float32]"]["pass"] is True and rows["m.a[float32]"]["launcher_gpu_us"] == 95.0
    assert "launcher_gpu_us" not in rows["m.b[float32]"] and rows["m.b[float32]"]["pass"] is False
    summary = "\n".join(zoo_table.summary(rows))
    assert "GPU latency from an idle device: 1 of 1" in summary
    assert "GPU busy time: 1 of 1" in summary
    assert "CPU time of the calling thread, calls queued: 1 of 1, median 0.842" in summary
    assert "fewer static input bytes in 1 of 1 rows, 1.50 MiB less" in summary
    assert (
        "| m.a | float32 | pass | bit for bit 3/3 | 2 | 24.0 / 27.5 | 95.0 / 100.0 | 94.0 / 101.0 "
        "| 10.0 / 12.0 | 8.0 / 9.5 |"
    ) in zoo_table.line("m.a[float32]", rows["m.a[float32]"])


def test_rows_timed_before_the_busy_and_thread_clocks_show_a_dash(tmp_path: Path) -> None:
    old = {"pass": True, "bit_identical": "3/3", "launcher_gpu_us": 5.0, "copy_gpu_us": 4.0}
    old.update(launcher_cpu_us=1.0, copy_cpu_us=2.0)
    rows = zoo_table.merged([_write(tmp_path / "old.json", {"m.a[bfloat16]": old})], [])
    assert zoo_table.line("m.a[bfloat16]", rows["m.a[bfloat16]"]).endswith("| 5.0 / 4.0 | - | 1.0 / 2.0 | - |")
    summary = "\n".join(zoo_table.summary(rows))
    assert "GPU busy time" not in summary and "calling thread" not in summary


def test_retimed_rows_are_those_of_every_costs_only_run_not_only_the_last(tmp_path: Path) -> None:
    """A sample too long for one device call is timed in parts; `--retimed-only` keeps the rows
    any part timed, and leaves out rows only a scoring run timed."""
    verdicts = {f"m.{name}[float32]": {"pass": True, **_times(10.0, 11.0)} for name in "abc"}
    scored = _write(tmp_path / "scored.json", verdicts)
    first = _write(tmp_path / "part1.json", {"m.a[float32]": {"timed_only": True, **_times(9.0, 11.0)}})
    second = _write(tmp_path / "part2.json", {"m.b[float32]": {"timed_only": True, **_times(9.0, 11.0)}})
    assert zoo_table._retimed([scored, first, second]) == {"m.a[float32]", "m.b[float32]"}


def test_the_copy_path_against_itself_is_counted_beside_the_launcher_on_the_same_rows(tmp_path: Path) -> None:
    """An `--aa` run's second capture sets how far above the copy path a row can land with no
    difference in method; the summary gives that spread and the launcher's count on those rows
    only, and an earlier run's times never carry an A/A figure over."""
    scored = _write(tmp_path / "scored.json", {f"m.{n}[bfloat16]": {"pass": True, **_times(9.0, 10.0)} for n in "abc"})
    aa = {
        "m.a[bfloat16]": {"timed_only": True, **_times(9.0, 10.0), "copy_recaptured_busy_us": 11.22},
        "m.b[bfloat16]": {"timed_only": True, **_times(9.0, 10.0), "copy_recaptured_busy_us": 10.89},
    }
    aa["m.b[bfloat16]"]["launcher_busy_us"] = 11.2  # above the copy path's 11.0
    rows = zoo_table.merged([scored, _write(tmp_path / "aa.json", aa)], [])
    assert "copy_recaptured_busy_us" not in rows["m.c[bfloat16]"]
    summary = "\n".join(zoo_table.summary(rows))
    assert (
        "GPU busy time, the copy path against itself (a second capture): 1 of 2 at or below, median 1.005, "
        "from 0.990 to 1.020; the launcher on the same rows: 1 of 2"
    ) in summary
    assert "the same graph" not in summary and "GPU busy time: 2 of 3" in summary


def test_the_launcher_is_counted_against_the_copy_recipe_on_its_own_graph(tmp_path: Path) -> None:
    """A `--same-graph` run's rows compare the launcher with the copy recipe replayed on a clone
    of the launcher's graph (the same kernels): the summary counts those rows alone, apart from
    the count against the copy path's own capture, and a row without the variant is left out."""
    scored = _write(tmp_path / "scored.json", {f"m.{n}[float32]": {"pass": True, **_times(9.0, 10.0)} for n in "abc"})
    same = {
        "m.a[float32]": {"timed_only": True, **_times(9.0, 10.0), "copy_launcher_graph_busy_us": 10.8},
        "m.b[float32]": {"timed_only": True, **_times(9.0, 10.0), "copy_launcher_graph_busy_us": 8.25},
    }
    for row in same.values():  # launched through the Python bindings: no count of the copy path
        row["copy_launcher_graph_host_us"] = 50.0
    same["m.a[float32]"]["launcher_busy_us"] = 11.2  # above its own capture's copy path (11.0)
    rows = zoo_table.merged([scored, _write(tmp_path / "same.json", same)], [])
    summary = "\n".join(zoo_table.summary(rows))
    assert "GPU busy time: 2 of 3" in summary
    assert (
        "GPU busy time, the launcher against the copy recipe on its own graph: 1 of 2 at or below, "
        "median 1.003, from 0.970 to 1.037"
    ) in summary
    assert "CPU time of the calling thread, the launcher against the copy recipe" not in summary
