"""Loops whose turns run at once on the cpu's prepared path (``prepared_batched``).

Each kernel runs through the interpreter and the prepared path (``both_ways``: the same
bits, or the same error), and each test says whether the batch ran: a count of the
batches a launch made (``_program_ids`` is called once per batch grid a launcher
meets) tells a batched loop from one that went turn by turn."""

from __future__ import annotations

import threading
from unittest import mock

import numpy as np
import pytest

import qnb
from benchmarks._peers_rows import wide_softmax as online_softmax
from benchmarks.bench_language import layer_norm
from qnb import Tile, Vec, ir
from qnb.backends.cpu import lanes, prepared_batched, prepared_tiles
from tests.backends.test_cpu_prepared import both_ways

pytestmark = pytest.mark.usefixtures("on_cpu")


@pytest.fixture
def on_cpu():
    with qnb.backend("cpu"):
        yield


def _batches(kernel, grid, make_args, **kw) -> int:
    """Run ``kernel`` both ways (see ``both_ways``); how many batches the prepared path made."""
    real = prepared_batched._program_ids
    with mock.patch.object(prepared_batched, "_program_ids", wraps=real) as made:
        both_ways(kernel, grid, make_args, **kw)
    return made.call_count


def _rows(shape=(64, 512), seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 2 + 0.5).astype(dtype)


def test_each_loop_of_a_layer_norm_runs_as_one_batch_with_the_interpreter_bits():
    x = _rows()
    made = _batches(layer_norm, (4,), lambda: (x.copy(), np.full_like(x, np.nan), 1e-5))
    assert made == 3
    want = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    y = np.full_like(x, np.nan)
    layer_norm[4](x, y, 1e-5)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_an_online_softmax_batches_its_loads_and_runs_its_running_max_turn_by_turn():
    """The first loop's tile and its row max are the batch's; the running max and sum
    read the turn before them, so they run after, turn by turn, on the batch's values
    (the tile assigned in the batch is read by them, and after the loop)."""
    x = _rows((64, 256))
    made = _batches(online_softmax, (4,), lambda: (x.copy(), np.full_like(x, np.nan)))
    assert made == 2
    y = np.full_like(x, np.nan)
    online_softmax[4](x, y)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


@qnb.kernel
def overlapping(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2], w: qnb.Array[qnb.f32, 1]):
    p = qnb.program_id(0)
    for k in range(0, 20, 2):  # (4-wide windows two apart: each turn overwrites half the last)
        t = Tile[2, 4].load(x, p * 2, k)
        (t * 2 + k).store(y, p * 2, k)
    for k in range(5):
        w[p] = Tile[2, 4].load(x, p * 2, k).sum() + k  # (one element, every turn)
    w[p + 8] = k


def test_where_turns_store_over_each_other_the_later_turn_s_value_stays():
    x = _rows((8, 24))
    made = _batches(
        overlapping,
        (4,),
        lambda: (x.copy(), np.full_like(x, np.nan), np.full(16, np.nan, np.float32)),
    )
    assert made == 2
    y = np.full_like(x, np.nan)
    w = np.full(16, np.nan, np.float32)
    overlapping[4](x, y, w)
    assert y[0, 2] == np.float32(x[0, 2] * 2 + 2)  # (turn 1's, over turn 0's)
    assert w[1] == np.float32(x[2:4, 4:8].sum(dtype=np.float32) + 4)
    assert w[9] == 4


@qnb.kernel
def copy_columns(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 4
    for col in range(0, 32, 8):
        (Tile[4, 8].load(x, row, col) + 1).store(y, row, col)


def test_two_parameters_of_one_array_run_turn_by_turn():
    """The turns read what earlier turns store where ``y`` is ``x`` moved by a column."""
    base = _rows((1, 8 * 32 + 1)).reshape(-1)

    def shifted():
        b = base.copy()
        return b[:256].reshape(8, 32), b[1:257].reshape(8, 32)

    assert _batches(copy_columns, (2,), shifted) == 0
    made = _batches(
        copy_columns,
        (2,),
        lambda: (base[:256].reshape(8, 32).copy(), np.zeros((8, 32), np.float32)),
    )
    assert made == 1


def test_a_two_dimensional_grid_and_a_loop_of_one_turn_run_turn_by_turn():
    x = _rows((16, 32))
    assert _batches(copy_columns, (2, 2), lambda: (x.copy(), np.zeros_like(x))) == 0

    @qnb.kernel
    def one_turn(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
        for col in range(0, 8, 8):
            (Tile[4, 8].load(x, qnb.program_id(0) * 4, col) + 1).store(
                y, qnb.program_id(0) * 4, col
            )

    assert _batches(one_turn, (4,), lambda: (x.copy(), np.zeros_like(x))) == 0


def test_a_batch_larger_than_a_chunk_and_than_what_it_loads_runs_turn_by_turn(monkeypatch):
    """A batch holds every turn's values at once: up to a chunk's worth, or as much as
    the array it loads (what NumPy's temporaries over it hold); past both, turn by turn."""
    x = _rows((16, 32))
    monkeypatch.setattr(lanes, "CHUNK_ELEMENTS", 256 * 7)  # (chunks of 7 programs)
    assert _batches(copy_columns, (4,), lambda: (x.copy(), np.zeros_like(x))) == 0
    wide = _rows((16, 2048))  # (values of 4 × 4 programs × 256 elements: less than x)
    assert _batches(copy_columns, (4,), lambda: (wide.copy(), np.zeros_like(wide))) == 1


@qnb.kernel
def late_error(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2], w: qnb.Array[qnb.f32, 1]):
    p = qnb.program_id(0)
    for k in range(0, 6):
        t = Tile[2, 4].load(x, p * 2, k * 4)
        w[p + k * 3] = t.sum()  # (out of range from turn 3 on, for the last programs)
        t.store(y, p * 2, k * 4)


def test_an_error_in_a_later_turn_is_the_interpreter_s_error():
    """The batch raises before it stores anything, and the loop runs again turn by turn,
    which raises where the interpreter does (the same message, naming the same
    program) and leaves the arrays as the interpreter leaves them."""
    x = _rows((8, 24))
    made = _batches(
        late_error, (4,), lambda: (x.copy(), np.zeros_like(x), np.zeros(12, np.float32))
    )
    assert made == 1  # (the batch was made, and raised)
    with pytest.raises(qnb.QnbIndexError, match=r"in program \(3, 0, 0\)"):
        late_error[4](x, np.zeros_like(x), np.zeros(12, np.float32))


@qnb.kernel
def masked_loop(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    p = qnb.program_id(0)
    if p % 2 == 0:
        for col in range(0, 32, 8):
            (Tile[4, 8].load(x, p * 4, col) * 3).store(y, p * 4, col)


def test_a_loop_under_a_per_program_branch_runs_turn_by_turn():
    x = _rows((16, 32))
    assert _batches(masked_loop, (4,), lambda: (x.copy(), np.zeros_like(x))) == 0


@qnb.kernel
def sums_of_squares(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    t = Tile[16, 128].load(x, row, 0)
    ((t * t).sum(axis=1, keepdims=True) + t).store(out, row, 0)


def test_a_row_reduction_of_a_chain_reuses_its_buffer_and_threads_do_not_share_it():
    """From ``IN_PLACE_MIN`` elements the chain under a row reduction computes into a
    buffer the closure keeps; launches from threads at once each get their own."""
    x = _rows((4096, 128))
    want = (x * x).sum(axis=1, keepdims=True) + x
    both_ways(sums_of_squares, (256,), lambda: (x.copy(), np.zeros_like(x)), exact=False, tol=1e-5)
    inputs = [_rows((4096, 128), seed) for seed in range(6)]
    outputs = [np.zeros_like(a) for a in inputs]
    errors = []

    def run(i):
        try:
            for _ in range(3):
                sums_of_squares[256](inputs[i], outputs[i])
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for a, out in zip(inputs, outputs):
        np.testing.assert_allclose(out, (a * a).sum(axis=1, keepdims=True) + a, rtol=1e-5)
    np.testing.assert_allclose(outputs[0], want, rtol=1e-5)
    assert prepared_tiles.SPARE_MAX >= 4096 * 128


@qnb.kernel
def shared_rows(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    p = qnb.program_id(0)
    acc = Tile[4, 8].zeros(qnb.f32)
    for c in range(0, 32, 8):
        t = Tile[4, 8].load(x, 0, c)  # (the same tiles in every program)
        acc = acc * 0.5 + t
    (acc + p).store(y, p * 4, 0)


def test_tiles_the_same_in_every_program_reach_each_turn_as_one_tile():
    x = _rows((16, 32))
    assert _batches(shared_rows, (4,), lambda: (x.copy(), np.zeros_like(x))) == 1


@qnb.kernel
def centred_views(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    first = Tile[16, 128].zeros(qnb.f32)
    for o in range(2):
        for col in range(0, x.shape[1], 128):
            centred = Tile[16, 128].load(x, row, col) - o * 1.0
            kept = centred  # (a view of it, read after the loop)
        if o == 0:
            first = kept  # (which the second turn's batch must not write over)
    (first * 2.0 + kept).store(out, row, 0)


def test_a_tile_dead_after_the_batch_is_computed_into_a_kept_buffer_and_views_stop_it():
    """``centred`` in a layer norm's second loop is read by nothing after the batch: it
    is computed into a buffer the batch keeps between launches (launch after launch the
    same bits). A variable that holds it (``kept``) keeps it alive: no buffer then."""
    x = _rows((512, 512))

    def args():
        return x.copy(), np.full_like(x, np.nan)

    assert _batches(layer_norm, (32,), lambda: (x.copy(), np.full_like(x, np.nan), 1e-5)) == 3
    assert _batches(centred_views, (32,), args) == 1  # (made once, run twice)
    first = np.full_like(x, np.nan)
    layer_norm[32](x, first, 1e-5)
    for _ in range(3):
        again = np.full_like(x, np.nan)
        layer_norm[32](x + 0, again, 1e-5)
        np.testing.assert_array_equal(again, first)


@qnb.kernel
def from_around(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], other: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 16
    first = Tile[16, 16].load(x, row, 0)
    mean = first.sum(axis=1, keepdims=True) / 16.0  # (16, 1): broadcast along the rows
    top = first.max(axis=0, keepdims=True) * 0.5  # (1, 16): broadcast down the columns
    square = first * 0.25 + 1.0  # (16, 16): as it is
    for col in range(16, x.shape[1], 16):
        t = Tile[16, 16].load(x, row, col)
        ((t - mean) * square + top + (t * square).sum(axis=1, keepdims=True)).store(out, row, col)
        (t @ square.T + mean).store(other, row, col)  # (through ops that gather)


@qnb.kernel
def broadcast_blocks(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    i = qnb.program_id(0) * 16
    column = Tile[16, 1].load(x, i, 0)  # (a block grid's tiles, one column wide)
    (Tile[16, 16].load(x, i, 0) * column - column).store(y, i, 0)


def test_a_tile_from_around_the_loop_reaches_each_turn_as_a_view_of_its_blocks():
    """A tile per program assigned before the loop is the same in every turn: the batch
    holds it as blocks one turn long (a view of the tile, not a copy per turn), which
    broadcast as views, and ops that gather their operands (``@``, ``.T``) gather it."""
    x = _rows((256, 128))
    real = prepared_batched._repeated
    held = []

    def repeated(value, count):
        got = real(value, count)
        if type(value) is np.ndarray and value.ndim == 3 and value.shape[0] > 1:
            held.append((got, value))
        return got

    with mock.patch.object(prepared_batched, "_repeated", repeated):
        made = _batches(from_around, (16,), lambda: (x.copy(), _nan(x.shape), _nan(x.shape)))
    assert made == 1
    assert sorted(value.shape for _, value in held) == [(16, 1, 16), (16, 16, 1)]  # (top, mean;
    # square, of the blocks ``first`` was loaded as, stays blocks)
    assert all(
        type(got) is lanes._Blocks and np.shares_memory(got.a4, value) for got, value in held
    )
    assert {got.a4.shape[2] for got, _ in held} == {1}  # (one turn long)
    both_ways(broadcast_blocks, (16,), lambda: (x.copy(), np.full_like(x, np.nan)))


@qnb.kernel
def dead_tile_reads(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2], kind: qnb.Template):
    row = qnb.program_id(0) * 16
    acc = Tile[16, 1].zeros(qnb.f32)
    for col in range(0, x.shape[1], 128):
        t = Tile[16, 128].load(x, row, col)
        centred = t * 0.5 - 1.0  # (a tile nothing reads after the loop: its buffer kept)
        if kind == "right":  # its one read the right operand of the op computed first
            acc = acc + (t - centred).sum(axis=1, keepdims=True)
        elif kind == "twice":  # two reductions of it in one statement
            acc = (
                acc
                + (centred * centred).sum(axis=1, keepdims=True)
                + (centred * 3.0).sum(axis=1, keepdims=True)
            )
        elif kind == "later":  # a later statement reads it too
            acc = acc + (centred * centred).sum(axis=1, keepdims=True)
            (centred + 2.0).store(out, row, col)
        else:  # read again by a later op of the chain
            acc = acc + (centred * centred + centred.sum(axis=1, keepdims=True)).sum(
                axis=1, keepdims=True
            )
    acc.store(out, row, 0)


@pytest.mark.parametrize(
    "kind, overwritten", [("right", 1), ("twice", 0), ("later", 0), ("again", 0)]
)
def test_a_row_reduction_computes_over_a_dead_tile_only_where_nothing_reads_it_after(
    kind, overwritten
):
    """A layer norm's ``(centred * centred).sum(axis=1)`` computes the squares over
    ``centred``'s own buffer (its last read, and nothing reads it after the batch): no
    buffer of the reduction's own. Where anything else reads the tile after the op that
    writes first, the reduction takes its own buffer."""
    x = _rows((256, 512))  # (a batch of 2**17 elements: past IN_PLACE_MIN)

    def own_buffers(kernel, *args):
        real = prepared_tiles.spare_buffer
        with mock.patch.object(prepared_tiles, "spare_buffer", wraps=real) as made:
            kernel[16](*args)
        return made.call_count

    assert _batches(dead_tile_reads, (16,), lambda: (x.copy(), np.full_like(x, np.nan), kind)) == 1
    assert own_buffers(layer_norm, x, np.full_like(x, np.nan), 1e-5) == 0
    made = own_buffers(dead_tile_reads, x, np.full_like(x, np.nan), kind)
    assert (made == 0) if overwritten else (made > 0)


# ---- what an outside attack found (each once a different answer from the interpreter)


@qnb.kernel
def turn_reads_an_alias(
    x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]
):
    off = 0
    acc = Tile[1, 4].zeros(qnb.f32)
    for c in range(0, 16, 4):
        (Tile[1, 4].load(out, 0, c) + 1.0).store(y, 0, c)
        off = off + 4
        acc = acc + Tile[1, 4].load(x, 0, off)  # (a turn's load: x is y)
    acc.store(out, 1, 0)


@qnb.kernel
def reassigned_after_a_turn_reads_it(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    acc = Tile[1, 4].zeros(qnb.f32)
    for c in range(0, 16, 4):
        a = Tile[1, 4].load(x, 0, c)
        acc = qnb.maximum(acc, a)  # (the first a)
        a = a * 2.0
    acc.store(y, 0, 0)


@qnb.kernel
def a_column_out_of_range(
    x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2], w: qnb.Array[qnb.f32, 1]
):
    acc = Vec[4].zeros(qnb.f32)
    for k in range(0, 6):
        t = Tile[4, 4].load(x, 0, k * 4)
        t.store(y, 0, k * 4)
        acc = acc + t.col(k)  # (out of range from turn 4)
    acc.store(w, 0)


@qnb.kernel
def dependent_found_late(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    s = Tile[1, 4].zeros(qnb.f32)
    a = Tile[1, 4].zeros(qnb.f32)
    b = Tile[1, 4].zeros(qnb.f32)
    for c in range(0, 16, 4):
        a = Tile[1, 4].load(x, 0, c)
        b = a + 1.0  # (a turn's: `a` is assigned from a running value below)
        (b * 1.0).store(y, 0, c)
        s = s + a
        a = s


@qnb.kernel
def column_from_the_second_axis(x: qnb.Array[qnb.f32, 2], y: qnb.Array[qnb.f32, 2]):
    col = qnb.program_id(1) * 4  # (outside the loop: a value, not the turn)
    for c in range(0, 16, 4):
        Tile[1, 4].load(x, 0, col).store(y, 0, c)


@qnb.kernel
def one_node_twice(x: qnb.Array[qnb.f32, 2], out: qnb.Array[qnb.f32, 2]):
    row = qnb.program_id(0) * 4
    r1 = Tile[4, 1].zeros(qnb.f32)
    for c in range(0, 64, 8):  # (argmax lowers to a tree that shares a node)
        r1 = r1 + (Tile[4, 8].load(x, row, c) - r1).argmax(axis=1)[:, None].astype(qnb.f32)
    r1.store(out, row, 0)


def _nan(shape):
    return np.full(shape, np.nan, np.float32)


@pytest.mark.parametrize(
    "kernel,grid,make_args",
    [
        (turn_reads_an_alias, (1,), lambda: (lambda b: (b, b, _rows((2, 16), 1)))(_rows((1, 20)))),
        (reassigned_after_a_turn_reads_it, (1,), lambda: (_rows((1, 16)), _nan((1, 4)))),
        (a_column_out_of_range, (1,), lambda: (_rows((4, 24)), _nan((4, 24)), _nan((4,)))),
        (dependent_found_late, (1,), lambda: (_rows((1, 16)), _nan((1, 16)))),
        (column_from_the_second_axis, (1,), lambda: (_rows((1, 16)), _nan((1, 16)))),
        (column_from_the_second_axis, (4,), lambda: (_rows((1, 16)), _nan((1, 16)))),
        (one_node_twice, (5,), lambda: (_rows((20, 80)), _nan((20, 1)))),
    ],
    ids=["alias", "reassigned", "column", "late", "axis1", "axis1-grid4", "shared-node"],
)
def test_what_an_outside_attack_found_agrees(kernel, grid, make_args):
    """Two parameters of one buffer read by a turn; a tile the batch reassigns after a
    turn read it; a column index out of range after a store; a statement that depends
    on a running value only through one assigned later in the body; a variable of
    ``program_id(1)`` from outside the loop (the batch's axis 1 is its turns); a node
    the IR shares between two parents."""
    both_ways(kernel, grid, make_args)


def test_every_node_the_walk_built_a_closure_for_lives_as_long_as_the_walk():
    """The walk's tables are keyed by node ids; a batched loop makes new nodes (its
    turns' statements, the hoisted parts). Were they freed during the walk, a node made
    later could take a freed id and be handed another node's closure (an outside run
    saw a layer norm's second loop compute its first loop's sum, once in a few dozen
    prepares)."""
    from qnb.backends.cpu.prepared import _Compiler

    x = _rows((64, 512))
    for kernel, args in (
        (layer_norm, (x, x, 1e-5)),
        (online_softmax, (x, x)),
        (dependent_found_late, (x, x)),
    ):
        kernel_ir, _ = kernel._lower_for(args)
        compiler = _Compiler(kernel_ir)
        compiler.launcher()
        alive = {id(node) for node in ir.walk_body(kernel_ir.body)}
        for plan in compiler.made:
            alive |= {id(node) for node in ir.walk_body(plan.batched + plan.turns)}
        assert compiler.made
        assert set(compiler.built) <= alive
