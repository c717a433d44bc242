"""The UI's figures: plotly figure specs, drawn in the browser by the plotly.js that ships
inside the installed plotly package (served by the app; no CDN, no network).

Each function takes the light attempt rows of ``LedgerView`` and returns a figure as a
JSON-ready dict in plotly's figure schema. They are built as plain dicts rather than
through ``plotly.graph_objects``: its per-property validation cost 50-100 ms a figure at
300 points on this project's 2-core CI machine, more than the whole page budget allows.
The tests pass every figure through ``plotly.graph_objects.Figure`` to validate it.
"""

from __future__ import annotations

import math
from typing import Any

import networkx as nx

VERDICT_COLORS = {
    "correct": "#2e7d32",
    "incorrect": "#c62828",
    "rejected": "#6a1b9a",
    "compile_error": "#ef6c00",
    "runtime_error": "#d84315",
    "timeout": "#795548",
    "crashed": "#37474f",
    "invalid": "#9e9e9e",
}
_LAYOUT = dict(
    margin=dict(l=50, r=20, t=30, b=45), height=380, template="plotly_white", legend=dict(orientation="h", y=-0.18)
)


def _fig(data: list, **layout: Any) -> dict[str, Any]:
    return {"data": data, "layout": {**_LAYOUT, **layout}}


def _scatter(**props: Any) -> dict[str, Any]:
    return {"type": "scatter", **props}


def _axis(title: str, **props: Any) -> dict[str, Any]:
    """An axis with its title in the form plotly.js 2 and later read ({"text": ...}; a bare string
    is dropped without a word)."""
    return {"title": {"text": title}, **props}


def _label(r: dict[str, Any]) -> str:
    """A node's printed label: the id's tail and the speedup, enough to tell nodes apart at a glance."""
    sp = r.get("speedup_vs_eager")
    return f"{r['id'][-4:]} {sp:.2f}x" if sp else r["id"][-4:]


def _hover(r: dict[str, Any]) -> str:
    sp = f"{r['speedup_vs_eager']:.2f}x vs eager" if r.get("speedup_vs_eager") else "not timed"
    techs = ", ".join(r.get("techniques") or []) or "no technique"
    return f"{r['id']}<br>{r['verdict']}, {sp}<br>{techs}"


def step_techniques(row: dict[str, Any], parent: dict[str, Any] | None) -> list[str]:
    """What an attempt added over its parent: the techniques that label the edge between them."""
    mine = list(row.get("techniques") or [])
    if parent is None:
        return mine
    had = set(parent.get("techniques") or [])
    return [t for t in mine if t not in had] or mine


def lineage(rows: list[dict[str, Any]], attempt_url: str) -> dict[str, Any]:
    """The lineage as a graph: attempts as nodes coloured by verdict (x: generation, from a
    networkx multipartite layout), edges parent -> child labelled with the step's techniques.
    ``attempt_url`` has one ``{id}`` slot; a click on a node opens that attempt."""
    by_id = {r["id"]: r for r in rows}
    g = nx.DiGraph()
    for r in rows:
        g.add_node(r["id"])
        if r.get("parent_id") in by_id:
            g.add_edge(r["parent_id"], r["id"])
    depth: dict[str, int] = {}
    for node in nx.topological_sort(g):
        preds = list(g.predecessors(node))
        depth[node] = depth[preds[0]] + 1 if preds else 0
    nx.set_node_attributes(g, depth, "depth")
    pos = nx.multipartite_layout(g, subset_key="depth") if g.number_of_nodes() else {}
    edge_x: list[float | None] = []
    edge_y: list[float | None] = []
    label_x, label_y, labels = [], [], []
    for a, b in g.edges:
        (x0, y0), (x1, y1) = pos[a], pos[b]
        edge_x += [x0, x1, None]
        edge_y += [y0, y1, None]
        label_x.append((x0 + x1) / 2)
        label_y.append((y0 + y1) / 2)
        labels.append(", ".join(step_techniques(by_id[b], by_id[a])))
    data: list = [
        _scatter(
            x=edge_x, y=edge_y, mode="lines", line=dict(color="#b0bec5", width=1), hoverinfo="skip", showlegend=False
        ),
        _scatter(
            x=label_x,
            y=label_y,
            mode="text",
            text=labels,
            textfont=dict(size=11, color="#455a64"),
            hoverinfo="text",
            hovertext=labels,
            showlegend=False,
            name="techniques",
        ),
    ]
    for verdict, color in VERDICT_COLORS.items():
        ids = [r["id"] for r in rows if r["verdict"] == verdict]
        if not ids:
            continue
        data.append(
            _scatter(
                x=[pos[i][0] for i in ids],
                y=[pos[i][1] for i in ids],
                mode="markers+text",
                name=verdict,
                marker=dict(color=color, size=11, line=dict(color="white", width=1)),
                text=[_label(by_id[i]) for i in ids],
                textposition="top center",
                textfont=dict(size=10, color="#263238"),
                hovertext=[_hover(by_id[i]) for i in ids],
                hoverinfo="text",
                customdata=[attempt_url.format(id=i) for i in ids],
            )
        )
    # Height follows the widest generation: one line of attempts needs a strip, not 460 px.
    widest = max((sum(1 for d in depth.values() if d == k) for k in set(depth.values())), default=1)
    return _fig(
        data,
        xaxis=dict(visible=False),
        yaxis=dict(visible=False),
        height=min(460, 150 + 45 * widest),
        hovermode="closest",
        title=dict(text="lineage (left to right: generations)", font=dict(size=13)),
    )


def speedup_over_attempts(rows: list[dict[str, Any]], attempt_url: str) -> dict[str, Any]:
    """Speedup vs eager of each correct attempt in the order they were made, one series per
    GPU, with the best so far as a step line."""
    data: list = []
    best, best_x, best_y = 0.0, [], []
    series: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for n, r in enumerate(rows, start=1):
        s = r.get("speedup_vs_eager")
        if r["verdict"] != "correct" or not s:
            continue
        series.setdefault(r.get("hardware") or "unknown GPU", []).append((n, r))
        best = max(best, s)
        best_x.append(n)
        best_y.append(best)
    for hw, pts in series.items():
        data.append(
            _scatter(
                x=[n for n, _ in pts],
                y=[r["speedup_vs_eager"] for _, r in pts],
                mode="markers",
                name=hw,
                text=[_hover(r) for _, r in pts],
                hoverinfo="text",
                customdata=[attempt_url.format(id=r["id"]) for _, r in pts],
            )
        )
    if best_x:
        data.append(
            _scatter(x=best_x, y=best_y, mode="lines", line=dict(shape="hv", color="#263238"), name="best so far")
        )
    # Attempts are counted: ticks at whole numbers only (plotly would print 2.5 on a short series).
    return _fig(
        data,
        xaxis=_axis("attempt (in the order made)", tickformat="d", dtick=max(1, len(rows) // 10)),
        yaxis=_axis("speedup vs eager (x, median device time)", type="log"),
    )


def roofline(rows: list[dict[str, Any]], attempt_url: str) -> dict[str, Any]:
    """Each timed attempt at its arithmetic intensity (FLOPs / bytes moved) and achieved
    TFLOP/s, under the roofs (peak bandwidth and peak rate) of the GPUs it ran on."""
    pts = [r for r in rows if r.get("bytes_moved") and r.get("achieved_tflops") is not None and r.get("flops")]
    data: list = []
    for verdict, color in VERDICT_COLORS.items():
        mine = [r for r in pts if r["verdict"] == verdict]
        if mine:
            data.append(
                _scatter(
                    x=[r["flops"] / r["bytes_moved"] for r in mine],
                    y=[r["achieved_tflops"] for r in mine],
                    mode="markers",
                    name=verdict,
                    marker=dict(color=color, size=8),
                    text=[_hover(r) for r in mine],
                    hoverinfo="text",
                    customdata=[attempt_url.format(id=r["id"]) for r in mine],
                )
            )
    roofs = {
        (r.get("hardware"), r.get("peak_gbps"), r.get("peak_tflops"))
        for r in pts
        if r.get("peak_gbps") and r.get("peak_tflops")
    }
    if pts:
        lo = min(r["flops"] / r["bytes_moved"] for r in pts) / 4
        hi = max(r["flops"] / r["bytes_moved"] for r in pts) * 4
        for hw, gbps, tflops in sorted(roofs, key=str):
            knee = tflops * 1e3 / gbps  # FLOPs per byte where the bandwidth roof meets the compute roof
            xs = sorted({lo, hi, min(max(knee, lo), hi)})
            data.append(
                _scatter(
                    x=xs,
                    y=[min(gbps * x / 1e3, tflops) for x in xs],
                    mode="lines",
                    line=dict(dash="dash", width=1),
                    name=f"roof: {hw}",
                )
            )
    return _fig(
        data, xaxis=_axis("arithmetic intensity (FLOP/byte)", type="log"), yaxis=_axis("achieved TFLOP/s", type="log")
    )


def geomean(values: list[float]) -> float | None:
    """Geometric mean of positive values (None for none)."""
    vals = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else None
