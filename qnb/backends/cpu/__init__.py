"""The "cpu" backend: NumPy executes the IR. It is qnb's oracle, and its rooms show its design.

- ``semantics``: what a window, a mask, a bounds error, a cast, a reduction, a scan and the
  op tables (``_BINARY``, ``_UNARY``, ``_REDUCE``) mean on NumPy lanes, and the Cholesky
  and triangular-solve kernels: the meaning both executors call.
- ``lanes``: values on program lanes (``CpuArray``, chunks of programs, grid tiles,
  lane-last moves).
- the interpreter: ``interpreter`` (``run`` and the driver ``_Executor``) and its rooms
  ``interpreter_statements``, ``interpreter_memory``, ``interpreter_expressions``.
- the prepared compiler (the launch path): ``prepared`` (``prepare`` and the driver
  ``_Compiler``), ``prepared_base`` (its state, binder, block grids, the walk of facts),
  the generic per-node forms ``prepared_statements``, ``prepared_windows``,
  ``prepared_elements``, ``prepared_scalars``, ``prepared_tiles``, ``prepared_linalg``,
  and its strategies ``prepared_blocks`` (block grids), ``prepared_strided`` (strided
  windows), ``prepared_gemm`` (the K-loop GEMM).
- ``observer`` (what an executor reports), ``trace`` (the trace recorder), ``hazards``,
  ``skeleton`` and ``stores`` (the hazard observers), ``atomics`` (atomic updates),
  ``backend`` (``CpuBackend`` and the trace entry point).
"""
