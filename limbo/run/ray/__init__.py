"""A grid on a Ray cluster: the driver (:mod:`cluster`), the worker actors (:mod:`worker`) and
the call slots they lease from one limiter (:mod:`leases`)."""
