"""IPython magics for qnb: ``%load_ext qnb`` registers ``%%qkernel``, ``%qcache``,
``%qbackend``, ``%qbench`` and ``%qcompare`` (see :mod:`qnb.magics.magics`), and
``%qcheck`` (:mod:`qnb.magics.check`)."""

from __future__ import annotations


def load_ipython_extension(ip) -> None:
    """Register qnb's magics with the IPython shell ``ip``."""
    from qnb.magics.check import CheckMagics
    from qnb.magics.magics import QnbMagics

    ip.register_magics(QnbMagics)
    ip.register_magics(CheckMagics)
    _start_devices()


def _start_devices() -> None:
    """Start the wgpu device while the user writes the next cell (see
    ``qnb.backends.wgpu.start_device_in_background``); ``QNB_EARLY_DEVICE=0`` opts out."""
    from qnb.backends import wgpu

    wgpu.start_device_in_background()


__all__ = ["load_ipython_extension"]
