"""Import rliable 1.2.0's ``library`` module under pandas 3 -- shared by tests/test_stats.py and
bench/bench_stats.py (test and benchmark support only; rlaudit itself never imports rliable)."""

from __future__ import annotations

import functools
import sys


@functools.cache
def import_rliable_library():
    """Import ``rliable.library`` under pandas 3.

    rliable 1.2.0's ``library`` imports ``arch``; arch 7.2 calls pandas' private ``deprecate_kwarg`` with
    the pre-pandas-3 signature and fails at import (arch 8.0 imports but rejects rliable's
    ``random_state`` keyword). The decorator only renames a plotting keyword of arch's GARCH results, so
    for the import we hand arch a wrapper that supplies pandas 3's new first argument (the warning class).
    rliable's bootstrap draws from NumPy's global RNG, so the test seeds it and restores it.
    """
    try:
        from rliable import library
        return library
    except TypeError:
        pass
    import pandas.util._decorators as pd_dec

    original = pd_dec.deprecate_kwarg

    def compat(*args, **kwargs):
        if args and isinstance(args[0], str):
            return original(FutureWarning, *args, **kwargs)
        return original(*args, **kwargs)

    for name in [m for m in sys.modules if m == "arch" or m.startswith("arch.") or m.startswith("rliable.library")]:
        del sys.modules[name]
    pd_dec.deprecate_kwarg = compat
    try:
        from rliable import library
    finally:
        pd_dec.deprecate_kwarg = original
    return library
