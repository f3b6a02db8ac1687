"""python -m uvmrt.torch --version | --help | --check"""

import argparse
import sys


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m uvmrt.torch",
                                 description="uvmrt.torch: train a torch.nn.Module beyond GPU memory "
                                             "(see help(uvmrt.torch))")
    ap.add_argument("--version", action="store_true", help="print the package, libuvmrt and torch versions")
    ap.add_argument("--check", action="store_true",
                    help="load libuvmrt, check its version and structs, and say which backend it finds")
    a = ap.parse_args(argv)
    from . import _version_text
    from .. import _lib as L
    if a.version or not a.check:
        print(_version_text())
        return 0
    try:
        L.lib()
    except L.LibraryError as e:
        print(e, file=sys.stderr)
        return 1
    from .._context import Context
    ctx = Context(log_level="error")
    print(f"{_version_text()}; backend {ctx.backend}; CPU AdamW {L.lib().uvmrt_adamw_isa().decode()}")
    ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
