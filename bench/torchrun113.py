#!/usr/bin/python3
"""torchrun for Debian's python3-torch 1.13 on Python 3.11.

torch 1.13's ``Std.from_str`` maps a digit to a ``Std`` member by iterating
``for s in Std``.  Since Python 3.11, iterating an IntFlag yields only the
canonical single-bit members (OUT, ERR), so "0" (NONE) and "3" (ALL) map to
``None`` and torchrun crashes in ``to_map`` ("'NoneType' object has no
attribute 'get'") -- even with the default ``--redirects 0``.  See
docs/torchrun-compat.md section 10.5.

This wrapper replaces ``Std.from_str`` with an equivalent that converts via
``Std(int(v))`` (same regexes, same error message) and then runs
``torch.distributed.run.main()`` exactly like the ``torchrun`` console script.

Usage: /usr/bin/python3 bench/torchrun113.py [torchrun 1.13 args...]
"""
import re
import sys

from torch.distributed.elastic.multiprocessing import api as _mp_api

_Std = _mp_api.Std


def _from_str(cls, vm):
    if re.match(_mp_api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(_mp_api._MAPPING_REGEX, vm):
        d = {}
        for m in vm.split(","):
            i, v = m.split(":")
            d[int(i)] = cls(int(v))
        return d
    raise ValueError(
        f"{vm} does not match: <{_mp_api._VALUE_REGEX}> or <{_mp_api._MAPPING_REGEX}>"
    )


_Std.from_str = classmethod(_from_str)

from torch.distributed.run import main  # noqa: E402  (import after the patch)

if __name__ == "__main__":
    sys.argv[0] = "torchrun"
    sys.exit(main())
