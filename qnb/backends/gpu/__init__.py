"""The one walker over the IR shared by the GPU renderers (WGSL and CUDA C++).

A GPU target is a subclass of :class:`GpuRenderer` that fills in a *table of
spellings* (type names, operator templates, math functions, the barrier) and
overrides a few hooks where the languages differ in shape rather than in words
(declarations, bindings, the entry point, the uniform broadcast).

Program model (see docs/ARCHITECTURE.md): one program is one workgroup/block of P
threads (``Layout.threads``: :func:`choose_threads` picks a power of two from the tile
shapes, or the ``threads=`` option sets it), except in a kernel that holds no tile or vec
("solo" below). A tile or vec of S elements is held in *fragments*: flat (row-major)
element ``e`` by thread ``e % P`` in slot ``e // P`` of a private array of
``max(1, S // P)`` slots; a value smaller than the program is replicated (thread ``t``
holds element ``t % S``; only threads ``t < S`` write it to memory or scratch). Scalars
are held, equal, by every thread. A statement's elementwise tree is rendered as one loop
over the slots (``q_s`` the slot, ``q_e`` the flat index); its scalar operands, and its
operands that exchange elements, are evaluated before the loop (:meth:`prepare`). Ops
that need other threads' elements write the operand to a scratch array in
workgroup/shared memory between barriers (``tile_*`` methods; ``@`` in chunks of K);
scalars read from memory or from tiles are written by one thread to a
broadcast slot and read back with :meth:`GpuRenderer.uniform_load`, so every
scalar a branch or loop tests is provably uniform (WGSL's uniformity analysis
then accepts the barriers inside). A tile or vec past :data:`MAX_ELEMENTS`, or scratch
past the target's ``shared_limit``, is a BackendError at compile time.

A kernel whose every value is a scalar has nothing for 256 threads to share: it
is rendered *solo*, one thread per program and ``solo_programs`` programs per
workgroup/block (``Layout.programs_per_group``), with no barriers, no broadcast
and no ``q_lid``/``q_t``; a thread past the grid's last program returns.

Memory ordering: scalar array reads and writes are done by thread 0 only (so a
scalar read sees the program's own earlier scalar write). A program's accesses to
one array happen in program order, as on the cpu backend, although different
threads make them: a store is preceded by a storage barrier when anything else in
the kernel (or the store itself, in a loop) may touch the same memory, so every
thread's earlier loads and stores come first; and a store that a load of the same
memory may follow (later in the program, or in a loop) is followed by one, so that
load sees it. Memory is the same for two
array parameters of one dtype, since one array may be passed for both.

Generated names: ``v_*`` locals, ``a_*`` array bindings, ``p_*`` scalar
parameters, ``n_*`` array dims, ``q*`` renderer temporaries, ``qs_*`` scratch.

Rooms: ``target`` (the spellings and hooks), ``layout`` (threads, fragments, the binding
layout), ``analysis`` (what is read off the IR first), ``walker`` (the driver),
``statements``, ``expressions``, ``exchanges``, ``linalg``, ``pysemantics``,
``probe_steps``.
"""

from qnb.backends.gpu.analysis import node_dtypes
from qnb.backends.gpu.layout import (
    MAX_ELEMENTS,
    MAX_THREADS,
    THREADS,
    Layout,
    Rendered,
    choose_threads,
)
from qnb.backends.gpu.walker import GpuRenderer

__all__ = [
    "GpuRenderer",
    "Layout",
    "Rendered",
    "choose_threads",
    "MAX_ELEMENTS",
    "MAX_THREADS",
    "THREADS",
    "node_dtypes",
]
