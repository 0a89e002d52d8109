"""The public errors, where plugins import them from: ``from limbo.errors import ModelError``.

The definitions live on the ground floor, :mod:`limbo.base.errors`; this module only hands them
on, so that a plugin's import never depends on the package's inner layout.
"""

from limbo.base.errors import InfraError, ModelError, UsageError

__all__ = ["InfraError", "ModelError", "UsageError"]
