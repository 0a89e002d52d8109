"""A Ray worker streams a batch's records back as its episodes end (limbo/run/ray/worker.py), so the
driver writes each record at once instead of when the batch's last episode ends: a driver
stopped mid-run has lost only the episodes in flight. On a real one-node Ray cluster on
127.0.0.1, against a paced loopback model endpoint; nothing here is timed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.bad_server import CHAT_OK, BadServer, Reply
from support.cells import cell_for
from support.ray_cluster import Cluster

ray = pytest.importorskip("ray")

from support.paced import Pace, serve_in_thread  # noqa: E402

from limbo.run.context import Settings  # noqa: E402
from limbo.run.ray.worker import EpisodeWorker, Setup  # noqa: E402


@pytest.fixture(scope="module")
def connected() -> Iterator[None]:
    with Cluster(cpus=1, extra=0) as c:
        ray.init(address=c.address, namespace="limbo-test", log_to_driver=False,
                 logging_level="ERROR")
        try:
            yield
        finally:
            ray.shutdown()


def test_a_batch_answers_each_episode_as_it_ends_not_when_the_batch_ends(connected: None):
    """One episode at a time, three cells of two 0.5 s model calls each: three answers, the
    first with the first episode's record alone, sent while the other two had still to run
    (the endpoint had answered two calls, not six, when the driver got it)."""
    worker = ray.remote(EpisodeWorker).options(num_cpus=1).remote("w0")
    with serve_in_thread(Pace(latency_s=0.5)) as server:
        model = f"openai/paced?api=chat&base_url={server.url}/v1"
        cells = [cell_for("charge_invoice", model=model, seed=seed) for seed in range(3)]
        setup = Setup(run="streamed", settings=Settings(episode_timeout=None))
        answers = worker.run_batch.options(num_returns="streaming").remote(cells, setup)
        got = []
        for ref in answers:
            batch = ray.get(ref)
            assert batch.usage is None and batch.crash is None, batch.crash or batch.usage
            got.append(([item[0] for item in batch.items], server.counts.answered))
    assert [ids for ids, _ in got] == [[cell.episode_id] for cell in cells]
    assert got[0][1] < 6  # the first record came back before the batch's last call
    assert server.counts.answered == 6


def test_a_batch_stopped_by_a_rejected_key_answers_what_ended_and_then_why(connected: None):
    """The endpoint answers the first call, then rejects the key (HTTP 401): the first
    episode's record comes back, then an answer that stops the run, saying why in ``usage``,
    with no record of the episodes it stopped."""
    worker = ray.remote(EpisodeWorker).options(num_cpus=1).remote("w1")
    with BadServer(Reply(status=401, body=b'{"error": {"message": "bad key"}}')) as server:
        server.script.append(Reply(body=CHAT_OK))
        cells = [cell_for("charge_invoice", model=f"openai/m?api=chat&base_url={server.url}",
                          seed=seed) for seed in range(3)]
        answers = worker.run_batch.options(num_returns="streaming").remote(
            cells, Setup(run="rejected", settings=Settings(episode_timeout=None)))
        batches = [ray.get(ref) for ref in answers]
    assert [[item[0] for item in b.items] for b in batches] == [[cells[0].episode_id], []]
    assert batches[0].usage is None
    assert "the provider rejected the API key (HTTP 401)" in str(batches[1].usage)
