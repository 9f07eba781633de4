"""IPython magics for qnb: ``%load_ext qnb`` registers ``%%qkernel``, ``%qcache``,
``%qbackend``, ``%qbench`` and ``%qcompare`` (see :mod:`qnb.magics.magics`)."""

from __future__ import annotations


def load_ipython_extension(ip) -> None:
    """Register qnb's magics with the IPython shell ``ip``."""
    from qnb.magics.magics import QnbMagics

    ip.register_magics(QnbMagics)


__all__ = ["load_ipython_extension"]
