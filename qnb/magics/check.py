"""``%qcheck``: run ``qnb.check`` on a launch expression ``k[grid](args)``.

Registered by ``%load_ext qnb`` beside the magics of :mod:`qnb.magics.magics`, a thin
shell over the public API as they are: it prints the check's one-line summary and
shows ``qnb.viz.HazardView`` when the launch has a hazard.
"""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

import qnb
from qnb.magics.compare import split_launch
from qnb.magics.magics import _shown, _split_options

CHECK_FILENAME = "<qcheck>"


@magics_class
class CheckMagics(Magics):
    @magic_arguments()
    @argument("-o", "--output", action="store_true", help="return the qnb.Hazards")
    @argument("expr", nargs="*", help="the launch expression, e.g. k[4](x, h)")
    @line_magic
    def qcheck(self, line):
        """Find races between the programs of a launch: ``%qcheck [-o] [--] EXPR``.

        Runs ``qnb.check`` on EXPR (``k[grid](args)``, on copies of the arguments),
        prints one line (no hazard, or which kinds on which arrays), and shows
        ``HazardView`` when there is a hazard. ``-o`` returns the ``qnb.Hazards``.
        """
        options, expr = _split_options(self.qcheck, line)
        if options is None:
            print(self.qcheck.parser.format_help())
            return None
        args = parse_argstring(self.qcheck, options)
        if not expr.strip():
            raise UsageError("%qcheck needs a launch expression, e.g. %qcheck k[4](x, h)")
        try:
            launch, values = split_launch(expr, self.shell.user_ns)
            hazards = qnb.check(launch, *values)
        except qnb.QnbError as err:
            raise _shown(err, CHECK_FILENAME) from None
        except SyntaxError as exc:
            raise UsageError(f"%qcheck cannot parse {expr.strip()!r}: {exc.msg}") from None
        except ValueError as exc:
            raise UsageError(f"%qcheck: {exc}") from None
        print(hazards.summary())
        if not hazards.ok:
            from qnb.viz import HazardView

            display(HazardView(hazards))
        return hazards if args.output else None
