"""qnb benchmarks: each ``benchmarks/bench_*.py`` exposes ``main()`` that prints a table.

Run them all with ``make bench`` or ``python -m benchmarks`` (``--list``, or name some:
``python -m benchmarks matmul``).
"""
