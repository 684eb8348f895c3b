"""Pictures of captured graphs, drawn from the snapshots recorded on an H200 (no GPU needed)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT
from graphlint.runtime_sanitizer.analysis.graph_picture import HAZARD_COLOURS, lanes, short_kernel_name
from graphlint.runtime_sanitizer.analysis.report import analyze_pair
from graphlint.runtime_sanitizer.analysis.snapshot import load_captures

SVG = "{http://www.w3.org/2000/svg}"
RECORDED = sorted(p.stem for p in (FIXTURES / "snapshots").glob("*.json") if p.stem != "SUMMARY")


def _report(name: str):
    captures, _ = load_captures(FIXTURES / "snapshots" / f"{name}.json")
    return analyze_pair(
        captures["first"], captures["second"], ("x.py", 1), name, captures.get("repeat"), captures.get("ordering")
    )


@pytest.mark.parametrize("name", RECORDED)
def test_svg_is_well_formed_with_one_element_per_node(name: str, tmp_path: Path) -> None:
    report = _report(name)
    svg_path, html_path = report.write_pictures(tmp_path)
    root = ET.parse(svg_path).getroot()
    nodes = [g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]
    assert sorted(g.get("id") for g in nodes) == sorted(f"node-{n.index}" for n in report.graph.nodes)
    assert "<svg" in html_path.read_text()


def test_race_pair_is_drawn_in_colour_with_the_finding_text(tmp_path: Path) -> None:
    report = _report("race")
    assert [f.code for f in report.findings] == ["GL504"]
    svg_path, html_path = report.write_pictures(tmp_path, "race")
    root = ET.parse(svg_path).getroot()
    pair = [line for line in root.iter(f"{SVG}line") if line.get("class") == "hazard-pair"]
    assert len(pair) == 1 and pair[0].get("stroke") == HAZARD_COLOURS["GL504"]
    assert "no dependency orders them" in pair[0].find(f"{SVG}title").text
    boxes = [g.find(f"{SVG}rect") for g in root.iter(f"{SVG}g") if g.get("class") == "node"]
    assert {box.get("stroke") for box in boxes} == {HAZARD_COLOURS["GL504"]}
    assert "unordered-cross-stream-access" in html_path.read_text()


def test_side_stream_gets_its_own_lane_and_names_are_short() -> None:
    captures, _ = load_captures(FIXTURES / "snapshots" / "two_streams.json")
    lane, row = lanes(captures["first"])
    assert lane[0] == lane[1] != lane[2] == lane[3]  # the fork at the start: two streams
    assert row[4] == 2 and lane[4] == lane[0]  # the join
    names = [short_kernel_name(node) for node in captures["first"].nodes]
    assert all(len(name) <= 30 for name in names)
    assert names[4].startswith("vectorized_elementwise_kerne")


def test_chromium_renders_the_page(tmp_path: Path) -> None:
    if shutil.which("chromium") is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    _, html_path = _report("race").write_pictures(tmp_path, "race")
    png = tmp_path / "race.png"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "screenshot_graph_picture.py"), str(html_path), str(png)],
        check=True,
        timeout=180,
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
