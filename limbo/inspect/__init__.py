"""LIMBO as Inspect AI tasks (the ``inspect`` extra).

One sample is one LIMBO cell; the episode runs in LIMBO's own harness, world, boundary and
tool layer exactly as in a grid, with the eval's model answering each turn through
:class:`~limbo.inspect.model.InspectAdapter`. The scorer reads the graded outcome; the whole
episode record rides in the sample's metadata, which is how ``limbo tables``, ``limbo compare``
and ``limbo check`` read Inspect logs (:mod:`limbo.log.inspect_logs`).

Nothing here imports ``inspect_ai`` at package import time: the core runs without it.
"""
