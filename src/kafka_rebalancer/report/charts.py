"""The run report's plotly figures, each rendered as an HTML fragment without plotly.js: the page inlines
plotly.js once, so every chart opens offline and the page does not carry the library once per chart. A chart is
drawn when it scrolls near the window (static/charts.js), so a report with dozens of charts opens at once."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.subplots import make_subplots

from kafka_rebalancer.model.units import human_bytes

# A small template of our own: plotly's named templates add several KB of JSON to every chart.
_TEMPLATE = go.layout.Template(layout={
    "font": {"family": "system-ui, sans-serif", "size": 12}, "paper_bgcolor": "white", "plot_bgcolor": "white",
    "margin": {"l": 60, "r": 30, "t": 40, "b": 50}, "hovermode": "closest",
    "xaxis": {"gridcolor": "#eee", "linecolor": "#999", "automargin": True},
    "yaxis": {"gridcolor": "#eee", "linecolor": "#999", "zerolinecolor": "#ccc", "automargin": True},
    "legend": {"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 1, "xanchor": "right"},
})
_CONFIG = {"displaylogo": False, "responsive": True}
BEFORE_IN, BEFORE_OUT = "#9ecae1", "#fdae6b"
AFTER_IN, AFTER_OUT = "#3182bd", "#d94801"
BAND = "#2ca02c"
BAND_BEFORE = "#7f7f7f"
_MARKER_SYMBOLS = {"start": "triangle-right", "finish": "square", "throttle": "diamond", "skip": "x",
                   "cancel": "octagon", "wait": "hourglass", "problem": "star", "estimate": "circle-open",
                   "log dir": "triangle-up"}


@dataclass(frozen=True)
class BrokerUsage:
    """One broker's usage of one resource, before and after the plan (a fraction of capacity, or a count)."""

    broker_id: int
    before: float
    after: float
    out_before: bool  # outside the band (and counted: an eligible broker of a balanced resource)
    out_after: bool


@dataclass(frozen=True)
class Flow:
    """Replicas copied from one broker to another: their bytes and how many."""

    source: int | None  # None: other brokers, summed
    target: int | None
    bytes: int
    moves: int


@dataclass(frozen=True)
class ProgressPoint:
    ts: str  # ISO time of the execution log entry
    moves_done: int
    bytes_done: int


@dataclass(frozen=True)
class LogMarker:
    ts: str
    moves_done: int  # where on the progress line it sits
    group: str  # one of _MARKER_SYMBOLS
    label: str


def figure_html(fig: go.Figure, div_id: str, height: int) -> str:
    """The chart's place (its height kept, so the page does not jump) and its figure as JSON, drawn by static/charts.js;
    a fixed id keeps the page the same for the same run."""
    fig.update_layout(template=_TEMPLATE, height=height)
    # "</" inside a script element would end it early; JSON allows the escaped form.
    figure = pio.to_json(fig, validate=False).replace("</", "<\\/")
    return (f'<div id="{div_id}" class="chart" style="height:{height}px;width:100%"></div>'
            f'<script type="application/json" id="{div_id}-figure">{figure}</script>')


# What the page script draws the charts with (static/charts.js reads it as PLOTLY_CONFIG).
PLOTLY_CONFIG_JSON = json.dumps(_CONFIG)


def usage_bars(title: str, brokers: Sequence[BrokerUsage], lower: float | None, upper: float | None,
               is_count: bool, before: tuple[float | None, float | None] | None = None) -> go.Figure:
    """Before and after per broker as grouped bars, the plan's band drawn across them, out-of-band bars in orange
    and labelled "out". `before`: the band of the current placement, which the bars before are judged against,
    drawn dotted where it differs from the plan's (forced moves shift the pool's mean)."""
    labels = [str(b.broker_id) for b in brokers]
    fig = go.Figure()
    for name, values, outside, colours in (
            ("before", [b.before for b in brokers], [b.out_before for b in brokers], (BEFORE_IN, BEFORE_OUT)),
            ("after", [b.after for b in brokers], [b.out_after for b in brokers], (AFTER_IN, AFTER_OUT))):
        fig.add_trace(go.Bar(
            name=name, x=labels, y=values, marker={"color": [colours[o] for o in outside]},
            text=["out" if o else "" for o in outside], textposition="outside", cliponaxis=False,
            hovertext=[f"broker {b} {name}: {_usage(v, is_count)}" + (" (outside the band)" if o else "")
                       for b, v, o in zip(labels, values, outside, strict=True)], hoverinfo="text"))
    # Shapes in the layout, not add_hline/add_hrect: those re-process every shape per call, seconds for a page.
    shapes: list[dict[str, Any]] = []
    annotations: list[dict[str, Any]] = []
    edges: list[tuple[str, str, str, float | None, float | None]] = [("band", BAND, "dash", lower, upper)]
    if before is not None and before != (lower, upper):
        edges.append(("band before", BAND_BEFORE, "dot", *before))
    for name, colour, dash, low, high in edges:
        for edge, value in (("lower", low), ("upper", high)):
            if value is None:
                continue
            shapes.append({"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": value,
                           "y1": value, "line": {"color": colour, "dash": dash, "width": 1.5}})
            annotations.append({"xref": "paper", "x": 0 if name == "band before" else 1, "yref": "y", "y": value,
                                "xanchor": "left" if name == "band before" else "right", "yanchor": "bottom",
                                "showarrow": False, "font": {"color": colour},
                                "text": f"{name} {edge} {_usage(value, is_count)}"})
    if lower is not None and upper is not None:
        shapes.append({"type": "rect", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": lower, "y1": upper,
                       "fillcolor": BAND, "opacity": 0.08, "line": {"width": 0}, "layer": "below"})
    fig.update_layout(shapes=shapes, annotations=annotations)
    fig.update_layout(title=title, barmode="group", bargap=0.2)
    fig.update_xaxes(title="broker", type="category")
    fig.update_yaxes(title="count" if is_count else "usage of capacity", tickformat="" if is_count else ".0%",
                     rangemode="tozero")
    return fig


def moves_sankey(title: str, flows: Sequence[Flow]) -> go.Figure:
    """Source brokers on the left, target brokers on the right (a broker can be both), links sized by bytes."""
    sources = sorted({f.source for f in flows}, key=_others_last)
    targets = sorted({f.target for f in flows}, key=_others_last)
    # A broker that gives and receives gets a node on each side: links always run left to right.
    source_node = {b: i for i, b in enumerate(sources)}
    target_node = {b: len(sources) + i for i, b in enumerate(targets)}
    fig = go.Figure(go.Sankey(
        arrangement="snap",
        node={"label": [f"from {_broker(b)}" for b in sources] + [f"to {_broker(b)}" for b in targets],
              "pad": 6, "thickness": 14},
        link={"source": [source_node[f.source] for f in flows], "target": [target_node[f.target] for f in flows],
              "value": [max(f.bytes, 1) for f in flows],  # a leadership-only or empty move still shows
              "customdata": [f"{_broker(f.source)} → {_broker(f.target)}: {human_bytes(f.bytes)} in "
                             f"{f.moves} replica(s)" for f in flows],
              "hovertemplate": "%{customdata}<extra></extra>"}))
    fig.update_layout(title=title)
    return fig


def execution_timeline(title: str, points: Sequence[ProgressPoint], markers: Sequence[LogMarker]) -> go.Figure:
    """Moves done (left axis) and bytes done (right axis) over time, the log's events as markers on the line."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    times = [p.ts for p in points]
    fig.add_trace(go.Scatter(name="moves done", x=times, y=[p.moves_done for p in points], mode="lines",
                             line={"shape": "hv", "color": AFTER_IN}), secondary_y=False)
    fig.add_trace(go.Scatter(name="bytes done", x=times, y=[p.bytes_done for p in points], mode="lines",
                             line={"shape": "hv", "color": "#756bb1", "dash": "dot"},
                             hovertext=[human_bytes(p.bytes_done) for p in points], hoverinfo="x+text"),
                  secondary_y=True)
    for group, symbol in _MARKER_SYMBOLS.items():
        shown = [m for m in markers if m.group == group]
        if shown:
            fig.add_trace(go.Scatter(name=group, x=[m.ts for m in shown], y=[m.moves_done for m in shown],
                                     mode="markers", marker={"symbol": symbol, "size": 10},
                                     hovertext=[m.label for m in shown], hoverinfo="x+text"), secondary_y=False)
    fig.update_layout(title=title)
    fig.update_xaxes(title="time (UTC)")
    fig.update_yaxes(title="moves done", rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title="bytes done", rangemode="tozero", showgrid=False, secondary_y=True)
    return fig


def _broker(broker_id: int | None) -> str:
    return "others" if broker_id is None else f"broker {broker_id}"


def _others_last(broker_id: int | None) -> tuple[bool, int]:
    return broker_id is None, broker_id or 0


def _usage(value: float, is_count: bool) -> str:
    return f"{value:,.0f}" if is_count else f"{value:.1%}"


@dataclass(frozen=True)
class ProjectedUse:
    """One broker's disk use now and projected, each a share of its capacity (days -> share; 0 days: now)."""

    broker_id: int
    shares: dict[int, float]


_PROJECTED_COLOURS = ("#3182bd", "#6baed6", "#fd8d3c", "#d94801")


def projected_use_bars(title: str, brokers: Sequence[ProjectedUse], threshold: float) -> go.Figure:
    """Disk use per broker now and at each projected day as grouped bars, the threshold drawn across them."""
    labels = [str(b.broker_id) for b in brokers]
    days = sorted({d for b in brokers for d in b.shares})
    fig = go.Figure()
    for colour, day in zip(_PROJECTED_COLOURS * 2, days, strict=False):
        name = "now" if day == 0 else f"+{day} d"
        values = [b.shares.get(day, 0.0) for b in brokers]
        fig.add_trace(go.Bar(name=name, x=labels, y=values, marker={"color": colour},
                             hovertext=[f"broker {b} {name}: {v:.1%}" for b, v in zip(labels, values, strict=True)],
                             hoverinfo="text"))
    fig.update_layout(
        title=title, barmode="group", bargap=0.2,
        shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": threshold, "y1": threshold,
                 "line": {"color": AFTER_OUT, "dash": "dash", "width": 1.5}}],
        annotations=[{"xref": "paper", "x": 1, "yref": "y", "y": threshold, "xanchor": "right", "yanchor": "bottom",
                      "showarrow": False, "font": {"color": AFTER_OUT}, "text": f"threshold {threshold:.0%}"}])
    fig.update_xaxes(title="broker", type="category")
    fig.update_yaxes(title="disk use of capacity", tickformat=".0%", rangemode="tozero")
    return fig
