"""Every provider adapter of this package, registered by importing this module (the registry
does, the first time it is asked for models); :mod:`limbo.providers` itself imports none."""

from limbo.providers import anthropic, openai, replay, scripted  # noqa: F401 - registers the providers
