"""Model providers beyond the reference policies: OpenAI and Anthropic through their official
SDKs, replay of recorded episodes, and scripted turns from a JSON file. Each registers when its
module is imported — :mod:`adapters` imports them all, and the registry imports that the first
time it is asked for models — and no vendor SDK is imported until an adapter is created.
Importing this package alone imports none of them, so a command that only reads the shared
options (:mod:`options`) starts without them.

Also here: the wire formats both the adapters and the model gateway speak
(:mod:`responses_api`, :mod:`chat_api`, :mod:`messages_api`), our retry policy
(:mod:`retry`), prices (:mod:`pricing`), the response cache (:mod:`cache`), the SDK clients a
run's episodes share (:mod:`clients`) and the call limiter they share (:mod:`limiter`). The
paced loopback endpoint that measures them is test scaffolding: ``tests/support/paced.py``.
"""
