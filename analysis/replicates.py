"""How many cluster-bootstrap replicates each command draws when ``--bootstrap`` is not given.

Kept apart from the statistics (no numpy here): the command-line parsers read it, and they are
built for every command, ``limbo run`` included, where the ``analysis`` extra may be missing.

* ``tables``: none. A rate's interval is the clustered Wilson interval and needs no
  bootstrap (``--bootstrap B`` adds one as a check); Table 4's shares, whose only interval is a
  bootstrap, are refitted in every replicate, which would take the default ``limbo tables``
  from seconds to most of a minute on the paper's grid.
* ``figures`` and ``compare``: 1,000. The error bars of Figures 3–5 and the interval of every
  paired difference exist only by bootstrap, and are sums over worlds: a matrix product each,
  a fraction of a second in all. ``limbo report`` draws its figures as ``limbo figures`` does.
"""

from __future__ import annotations

REPLICATES = {"tables": 0, "figures": 1000, "compare": 1000}
