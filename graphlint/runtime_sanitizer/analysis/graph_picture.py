"""Pictures of a captured graph: SVG and an HTML page, drawn in pure Python (no CUDA, no
system binary), so the sanitizer's findings can be seen where they are in the DAG.

Streams do not survive capture as such, so lanes are recovered from the graph: a chain
decomposition in topological order keeps a node in its first predecessor's lane until a
fork, and a fork opens a new lane (a side stream). Rows are networkx's topological
generations. Hazards are coloured: GL504 pairs red and joined by a dashed line, GL505
arguments orange, GL502 input slots purple; each carries its finding's text as a tooltip and
in the list under the graph.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

from graphlint.findings import Finding
from graphlint.runtime_sanitizer.analysis.snapshot import GraphSnapshot, Node
from graphlint.runtime_sanitizer.analysis.two_capture import Word, tensor_index

HAZARD_COLOURS = {"GL504": "#d62728", "GL505": "#ff7f0e", "GL502": "#9467bd"}
_BOX_W, _BOX_H, _COL_W, _ROW_H, _MARGIN = 220, 44, 260, 78, 30
_LENGTH = re.compile(r"[1-9]\d*")
_NOISE = {"at", "native", "c10", "std", "detail", "cuda", "void", "cutlass", "impl", "array"}


@dataclass
class Hazards:
    """Where each finding points in the graph: nodes, node pairs and input slots."""

    nodes: dict[int, list[Finding]] = field(default_factory=dict)
    pairs: list[tuple[int, int, Finding]] = field(default_factory=list)
    slots: dict[tuple[int, int], list[Finding]] = field(default_factory=dict)


def short_kernel_name(node: Node, limit: int = 30) -> str:
    """`aten.addmm` or a demangled-enough kernel name: what a person recognises in a box."""
    if node.op:
        name = node.op.removesuffix(".default")
    elif node.type != "kernel":
        name = node.type
    else:
        name = _demangle_hint(node.name)
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _demangle_hint(mangled: str) -> str:
    """The function's own name plus the first telling identifier in its template arguments."""
    if not mangled.startswith("_Z"):
        return mangled.split("(")[0].split("<")[0].removeprefix("void ")
    parts = [p for p in _mangled_identifiers(mangled) if p not in _NOISE and not p.startswith("_GLOBAL__N")]
    if not parts:
        return mangled[:30]
    nested = mangled.startswith("_ZN")  # namespaces first: the kernel is a later component
    function = next((p for p in parts if "kernel" in p.lower()), parts[0]) if nested else parts[0]
    hints = [p for p in parts if p != function]
    return f"{function}<{hints[0]}>" if hints and "elementwise" in function else function


def _mangled_identifiers(mangled: str) -> list[str]:
    """The length-prefixed identifiers of an Itanium-mangled name (`2at6native...` -> at, native)."""
    found, position = [], 2
    while position < len(mangled):
        match = _LENGTH.match(mangled, position)
        if match is None or mangled[position - 2 : position - 1] == "L":  # `Li4E`: a literal, not a length
            position += 1
            continue
        length, start = int(match.group()), match.end()
        name = mangled[start : start + length]
        if name[:1].isalpha() or name[:1] == "_":
            found.append(name)
            position = start + length
        else:
            position = start
    return found


def lanes(snapshot: GraphSnapshot) -> tuple[dict[int, int], dict[int, int]]:
    """(node -> lane, node -> row): lanes stand for the streams the capture forked."""
    import networkx as nx

    dag = nx.DiGraph()
    dag.add_nodes_from(node.index for node in snapshot.nodes)
    dag.add_edges_from(snapshot.edges)
    row = {n: depth for depth, generation in enumerate(nx.topological_generations(dag)) for n in generation}
    lane: dict[int, int] = {}
    continued: set[int] = set()
    next_lane = 0
    for n in nx.lexicographical_topological_sort(dag):
        free = [p for p in sorted(dag.predecessors(n)) if p not in continued]
        if free:
            lane[n] = lane[free[0]]
            continued.add(free[0])
        else:
            lane[n] = next_lane
            next_lane += 1
    return lane, row


def locate(findings: Sequence[Finding], words: Sequence[Word] = ()) -> Hazards:
    """Map findings to graph elements by the node and input numbers their messages state."""
    hazards = Hazards()
    for finding in findings:
        if finding.code == "GL504":
            match = re.search(r"nodes (\d+) .*? and (\d+) ", finding.message)
            if match:
                a, b = int(match.group(1)), int(match.group(2))
                hazards.pairs.append((a, b, finding))
                for n in (a, b):
                    hazards.nodes.setdefault(n, []).append(finding)
        elif finding.code == "GL505":
            match = re.search(r"argument (\d+) of .*\(node (\d+)\)", finding.message)
            if match:
                hazards.nodes.setdefault(int(match.group(2)), []).append(finding)
                hazards.slots.setdefault((int(match.group(2)), int(match.group(1))), []).append(finding)
        elif finding.code == "GL502":
            match = re.match(r"input (\d+) ", finding.message)
            for word in words:
                if match and word.role == "input" and tensor_index(word) == int(match.group(1)):
                    hazards.slots.setdefault((word.node, word.param), []).append(finding)
    return hazards


def render_svg(
    snapshot: GraphSnapshot, findings: Sequence[Finding] = (), words: Sequence[Word] = (), title: str = ""
) -> str:
    """The graph as one SVG document: a `<g class="node">` per node, lanes as columns."""
    lane, row = lanes(snapshot)
    hazards = locate(list(findings), list(words))
    width = _MARGIN * 2 + _COL_W * (max(lane.values(), default=0) + 1)
    height = _MARGIN * 2 + 30 + _ROW_H * (max(row.values(), default=0) + 1)

    def centre(n: int) -> tuple[float, float]:
        return _MARGIN + lane[n] * _COL_W + _BOX_W / 2, _MARGIN + 30 + row[n] * _ROW_H + _BOX_H / 2

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>',
        f"<title>{escape(title or 'captured CUDA graph')}</title>",
    ]
    for index in range(max(lane.values(), default=-1) + 1):
        x = _MARGIN + index * _COL_W
        parts.append(
            f'<text class="lane" x="{x}" y="{_MARGIN + 12}" fill="#666">{"stream " + str(index) if index else "main stream"}</text>'
        )
    parts += [_edge(centre(a), centre(b)) for a, b in snapshot.edges if a in lane and b in lane]
    for a, b, finding in hazards.pairs:
        if a in lane and b in lane:
            (x1, y1), (x2, y2) = centre(a), centre(b)
            parts.append(
                f'<line class="hazard-pair" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{HAZARD_COLOURS["GL504"]}" '
                f'stroke-width="2.5" stroke-dasharray="6 4"><title>{escape(finding.message)}</title></line>'
            )
    parts += [_node(node, centre(node.index), hazards, words) for node in snapshot.nodes if node.index in lane]
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _edge(start: tuple[float, float], end: tuple[float, float]) -> str:
    (x1, y1), (x2, y2) = start, end
    return (
        f'<line class="edge" x1="{x1}" y1="{y1 + _BOX_H / 2}" x2="{x2}" y2="{y2 - _BOX_H / 2}" '
        'stroke="#555" stroke-width="1.2" marker-end="url(#arrow)"/>'
    )


def _node(node: Node, centre: tuple[float, float], hazards: Hazards, words: Sequence[Word]) -> str:
    x, y = centre[0] - _BOX_W / 2, centre[1] - _BOX_H / 2
    found = hazards.nodes.get(node.index, [])
    stroke = HAZARD_COLOURS.get(found[0].code, "#333") if found else "#333"
    fill = (
        "#fde0dd"
        if found
        else {"kernel": "#e8f0fe", "memcpy": "#e6f4ea", "memset": "#e6f4ea"}.get(node.type, "#f1f3f4")
    )
    tip = "\n".join([f"node {node.index}: {node.op or node.type} {node.name}".strip(), *(f.message for f in found)])
    out = [
        f'<g class="node" id="node-{node.index}"><title>{escape(tip)}</title>',
        f'<rect x="{x}" y="{y}" width="{_BOX_W}" height="{_BOX_H}" rx="6" fill="{fill}" stroke="{stroke}" '
        f'stroke-width="{3 if found else 1}"/>',
        f'<text x="{x + 8}" y="{y + 18}" font-weight="bold">{escape(short_kernel_name(node))}</text>',
        f'<text x="{x + 8}" y="{y + 34}" fill="#555">#{node.index} {escape(_second_line(node, found))}</text>',
    ]
    out += _slot_marks(node, x, y, hazards, words)
    out.append("</g>")
    return "".join(out)


def _second_line(node: Node, found: list[Finding]) -> str:
    codes = " ".join(sorted({f.code for f in found}))
    kernel = _demangle_hint(node.name)[:18] if node.op and node.name else node.type
    return f"{kernel} {codes}".strip()


def _slot_marks(node: Node, x: float, y: float, hazards: Hazards, words: Sequence[Word]) -> list[str]:
    """Small tags on the box's right edge: `in0`/`out0` slots, coloured when a hazard names them."""
    marks: list[str] = []
    seen: set[tuple[str, int]] = set()
    slots = [w for w in words if w.node == node.index and w.role in ("input", "output")]
    for w in slots:
        key = (w.role, w.param)
        if key in seen:
            continue
        seen.add(key)
        found = hazards.slots.get((w.node, w.param), [])
        colour = (
            HAZARD_COLOURS.get(found[0].code, "#2e7d32") if found else ("#2e7d32" if w.role == "input" else "#1565c0")
        )
        label = f"{'in' if w.role == 'input' else 'out'}{w.region[-1] if w.region and w.region[-1].isdigit() else ''}"
        tip = escape(
            f"{w.role} slot: argument {w.param} byte {w.offset} -> {w.region}"
            + "".join("\n" + f.message for f in found)
        )
        offset = len(marks) * 16
        marks.append(
            f'<g class="slot {w.role}"><title>{tip}</title><rect x="{x + _BOX_W - 34}" y="{y + 2 + offset}" width="32" '
            f'height="13" rx="3" fill="{colour}"/><text x="{x + _BOX_W - 31}" y="{y + 12 + offset}" fill="white" '
            f'font-size="9">{label}</text></g>'
        )
    for (n, param), found in hazards.slots.items():
        if n == node.index and not any(w.param == param for w in slots):
            marks.append(
                f'<g class="slot hazard"><title>{escape(found[0].message)}</title><rect x="{x + _BOX_W - 34}" '
                f'y="{y + 2 + len(marks) * 16}" width="32" height="13" rx="3" fill="{HAZARD_COLOURS[found[0].code]}"/>'
                f'<text x="{x + _BOX_W - 31}" y="{y + 12 + (len(marks)) * 16}" fill="white" font-size="9">arg{param}</text></g>'
            )
    return marks


def render_html(
    snapshot: GraphSnapshot, findings: Sequence[Finding] = (), words: Sequence[Word] = (), title: str = ""
) -> str:
    """A page with the SVG, a legend, the findings' text and the recording's provenance."""
    svg = render_svg(snapshot, findings, words, title)
    legend = " ".join(
        f'<span style="border-left:14px solid {colour};padding-left:4px;margin-right:12px">{code}</span>'
        for code, colour in HAZARD_COLOURS.items()
    )
    items = "".join(
        f'<li><b style="color:{HAZARD_COLOURS.get(f.code, "#333")}">{f.code} [{html.escape(f.name)}]</b> '
        f"{html.escape(f.message)}</li>"
        for f in findings
    )
    provenance = ", ".join(f"{k}: {v}" for k, v in snapshot.provenance.items())
    return (
        f'<!doctype html>\n<html><head><meta charset="utf-8"><title>{html.escape(title or "graph")}</title>'
        "<style>body{font-family:sans-serif;margin:24px} li{margin:4px 0}</style></head><body>"
        f"<h1>{html.escape(title or 'captured CUDA graph')}</h1><p>{len(snapshot.nodes)} nodes, "
        f"{len(snapshot.edges)} edges. Lanes are the streams recovered from forks and joins. {legend}</p>"
        f"{svg}<h2>Findings</h2><ul>{items or '<li>none</li>'}</ul>"
        f'<p style="color:#666">{html.escape(provenance)}</p></body></html>\n'
    )


def write_graph_pictures(
    directory: Path, name: str, snapshot: GraphSnapshot, findings: Sequence[Finding] = (), words: Sequence[Word] = ()
) -> tuple[Path, Path]:
    """Write `NAME.svg` and `NAME.html` under ``directory``; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "graph"
    svg_path, html_path = directory / f"{stem}.svg", directory / f"{stem}.html"
    svg_path.write_text(render_svg(snapshot, findings, words, name), encoding="utf-8")
    html_path.write_text(render_html(snapshot, findings, words, name), encoding="utf-8")
    return svg_path, html_path
