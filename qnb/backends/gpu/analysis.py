"""What the GPU walker reads off the IR before it renders: which ops are elementwise, and
where a store needs a storage barrier before or after it (program order)."""

from __future__ import annotations

from qnb import ir
from qnb.dtypes import DType

LOADS = (ir.ArrayLoad, ir.LoadWindow, ir.VecLoad)


STORES = (ir.ArrayStore, ir.StoreWindow, ir.VecStore, ir.Atomic)


# Tile/vec ops whose element e needs only element e of their operands (and scalars):
# rendered inside one slot loop. Every other tile/vec op exchanges elements (``tile_*``).
ELEMENTWISE = (
    ir.Var,
    ir.Unary,
    ir.Binary,
    ir.Select,
    ir.Cast,
    ir.TileFill,
    ir.LoadWindow,
    ir.VecLoad,
    ir.TileSet,
    ir.Reshape,
)


def _post_order(node):
    """``node``'s IR below it, then ``node``: a store comes after the loads of its value."""
    for child in ir.children(node):
        yield from _post_order(child)
    yield node


def store_barriers(kernel: ir.KernelIR) -> dict[int, tuple[bool, bool]]:
    """Per store (by ``id``): whether a load or store of memory it may touch comes before
    it, and whether a load comes after it, in program order. Two array parameters of one
    dtype may be one array, so memory is told apart by dtype alone."""
    order = [n for stmt in kernel.body for n in _post_order(stmt) if isinstance(n, LOADS + STORES)]
    loads_after: dict[DType, int] = {}
    for node in order:
        if isinstance(node, LOADS):
            loads_after[node.view.type.dtype] = loads_after.get(node.view.type.dtype, 0) + 1
    touched: set[DType] = set()
    barriers = {}
    for node in order:
        dtype = node.view.type.dtype
        if isinstance(node, LOADS):
            loads_after[dtype] -= 1
        else:
            barriers[id(node)] = (dtype in touched, loads_after.get(dtype, 0) > 0)
        touched.add(dtype)
    return barriers


def node_dtypes(node):
    t = getattr(node, "type", None)
    if isinstance(t, ir.Type):
        yield t.dtype
    if isinstance(node, ir.ArrayView):
        yield node.type.dtype
