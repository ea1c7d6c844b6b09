"""Layout of a lineage as a picture: the chain in a row, dependents in layers below.

Plain data for a server-rendered SVG (no script, no library): every node and edge has
coordinates; the template only draws them.
"""

from dataclasses import dataclass
from typing import Any

from contextops.text import value_text

from .selectors.lineage import Lineage

NODE_W, NODE_H = 150, 44
GAP_X, GAP_Y = 36, 70
MARGIN = 16
MAX_CHAIN_SHOWN = 12
MAX_PER_LAYER = 12


@dataclass
class Node:
    key: str
    label: str
    x: int
    y: int
    kind: str  # version | head | dependent
    needs_review: bool
    is_valid: bool

    @property
    def cx(self) -> int:
        return self.x + NODE_W // 2

    @property
    def text_y(self) -> int:
        return self.y + 18

    @property
    def sub_y(self) -> int:
        return self.y + 34


@dataclass
class Edge:
    x1: int
    y1: int
    x2: int
    y2: int
    kind: str  # supersedes | depends


@dataclass
class Graph:
    width: int
    height: int
    nodes: list[Node]
    edges: list[Edge]
    omitted_versions: int
    omitted_dependents: int
    node_w: int = NODE_W
    node_h: int = NODE_H


def _label(value: Any, limit: int = 20) -> str:
    text = value_text(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def lineage_graph(lineage: Lineage) -> Graph:
    """Nodes and edges of ``lineage``: at most the last 12 versions and 12 dependents a layer."""
    chain = lineage.chain[-MAX_CHAIN_SHOWN:]
    omitted_versions = len(lineage.chain) - len(chain)
    nodes: dict[int, Node] = {}
    edges: list[Edge] = []
    for i, fact in enumerate(chain):
        nodes[fact.pk] = Node(
            key=fact.key,
            label=_label(fact.value),
            x=MARGIN + i * (NODE_W + GAP_X),
            y=MARGIN,
            kind="head" if fact.is_valid else "version",
            needs_review=fact.needs_review,
            is_valid=fact.is_valid,
        )
        if i:
            prev = nodes[chain[i - 1].pk]
            edges.append(
                Edge(
                    prev.x + NODE_W,
                    prev.y + NODE_H // 2,
                    nodes[fact.pk].x,
                    prev.y + NODE_H // 2,
                    "supersedes",
                )
            )

    # Layer every dependent by its distance from the chain.
    depends: dict[int, set[int]] = {}
    for fact_id, up_id in lineage.edges:
        depends.setdefault(fact_id, set()).add(up_id)
    chain_ids = {f.pk for f in lineage.chain}
    layer_of: dict[int, int] = {}
    frontier = chain_ids
    level = 0
    remaining = {d.pk for d in lineage.dependents}
    while remaining and frontier:
        level += 1
        reached = {d for d in remaining if depends.get(d, set()) & frontier}
        for d in reached:
            layer_of[d] = level
        remaining -= reached
        frontier = reached
    by_id = {d.pk: d for d in lineage.dependents}
    omitted_dependents = 0
    layers: dict[int, list[int]] = {}
    for d_id, lvl in sorted(
        layer_of.items(), key=lambda item: (item[1], by_id[item[0]].created_at, item[0])
    ):
        layers.setdefault(lvl, []).append(d_id)
    for lvl, ids in layers.items():
        omitted_dependents += max(0, len(ids) - MAX_PER_LAYER)
        for j, d_id in enumerate(ids[:MAX_PER_LAYER]):
            fact = by_id[d_id]
            nodes[d_id] = Node(
                key=fact.key,
                label=_label(fact.value),
                x=MARGIN + j * (NODE_W + GAP_X),
                y=MARGIN + lvl * (NODE_H + GAP_Y),
                kind="dependent",
                needs_review=fact.needs_review,
                is_valid=fact.is_valid,
            )
    for fact_id, up_id in lineage.edges:
        if fact_id in nodes and up_id in nodes:
            child, parent = nodes[fact_id], nodes[up_id]
            edges.append(Edge(child.cx, child.y, parent.cx, parent.y + NODE_H, "depends"))
    columns = max([len(chain)] + [min(len(ids), MAX_PER_LAYER) for ids in layers.values()])
    width = MARGIN * 2 + columns * NODE_W + max(0, columns - 1) * GAP_X
    height = MARGIN * 2 + NODE_H + (max(layers) if layers else 0) * (NODE_H + GAP_Y)
    return Graph(width, height, list(nodes.values()), edges, omitted_versions, omitted_dependents)
