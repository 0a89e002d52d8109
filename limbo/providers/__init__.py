"""Model providers beyond the reference policies: OpenAI and Anthropic through their official
SDKs, replay of recorded episodes, and scripted turns from a JSON file. Importing this package
registers them; no vendor SDK is imported until an adapter is created.

Also here: the wire formats both the adapters and the model gateway speak
(:mod:`responses_api`, :mod:`chat_api`, :mod:`messages_api`), our retry policy
(:mod:`retry`), prices (:mod:`pricing`), the response cache (:mod:`cache`), the SDK clients a
run's episodes share (:mod:`clients`) and the call limiter they share (:mod:`limiter`). The
paced loopback endpoint that measures them is test scaffolding: ``tests/support/paced.py``.
"""

from limbo.providers import anthropic, openai, replay, scripted  # noqa: F401 - registers the providers
