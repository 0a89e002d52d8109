"""Issue 28 part C on a real two-node Ray cluster on 127.0.0.1 (tests/support/ray_cluster.py):
``--max-cost`` is one budget for every worker of the cluster (an actor), and a ``429`` storm
reaches the cluster's one call limiter from both nodes. Nothing here times anything.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from support.hostile import LIMBO, records
from support.ray_cluster import Cluster
from test_shared_run import PRICED, one_budget_then_resume

pytest.importorskip("ray")

ENV = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
# A Ray worker has none of the driver's variables in os.environ: the driver sends those its
# episodes need (LIMBO_*), bound around them; a plugin reads them with limbo.base.environ.
BILLED = PRICED.replace("os.environ[", "getenv(").replace('"LIMBO_TEST_STARTS"]',
                                                          '"LIMBO_TEST_STARTS")').replace(
    "import os\n", "import os\n\nfrom limbo.base.environ import getenv\n", 1)


@pytest.fixture(scope="module")
def cluster():
    with Cluster(cpus=1, extra=1) as c:
        yield c


def limbo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600,
                          env={**ENV, **(env or {})})


def test_max_cost_on_the_cluster_is_one_budget_and_resumes(tmp_path: Path,
                                                           cluster: Cluster) -> None:
    plugin, starts, out = tmp_path / "billed.py", tmp_path / "starts", tmp_path / "run"
    plugin.write_text(BILLED)
    env = {"LIMBO_TEST_STARTS": str(starts)}
    argv = ["run", "--model", "billed/x", "--plugin", str(plugin), "--fault", "none", "--out",
            str(out), "--quiet", "--executor", "ray", "--ray-address", cluster.address]
    one_budget_then_resume(limbo, argv, env, out, starts)


def test_a_429_storm_on_the_cluster_reaches_its_one_limiter(tmp_path: Path,
                                                             cluster: Cluster) -> None:
    from support.paced import Pace, serve_in_thread

    out = tmp_path / "run"
    with serve_in_thread(Pace(latency_s=0.05, max_in_flight=3, retry_after_s=0.1)) as server:
        spec = f"openai/paced?api=chat&base_url={server.url}/v1"
        done = limbo("run", "default", "--model", spec, "--limit", "48", "--concurrency", "8",
                     "--executor", "ray", "--ray-address", cluster.address, "--out", str(out),
                     "--no-cache", "--quiet")
        answered, refused = server.counts.answered, server.counts.refused
    assert done.returncode == 0, done.stderr
    got = records(out)
    assert [r["outcome"]["termination"] for r in got] == ["finished"] * 48
    assert answered == 96 and refused > 0
    (limits,) = json.loads((out / "manifest.json").read_text())["limiter"].values()
    assert limits["workers"] == 2 and limits["refused"] == refused
    assert limits["lowest"] <= 3  # down from 128 to what the endpoint takes


def test_ray_workers_price_and_cache_with_the_flags(tmp_path: Path, cluster: Cluster) -> None:
    """The cluster's workers price with ``--prices`` and write to ``--cache-dir`` (the run's
    settings, bound around their episodes): a second run into another directory is answered
    from that cache alone, at the same cost."""
    from support.paced import Pace, serve_in_thread

    prices = tmp_path / "prices.toml"
    prices.write_text('["openai/paced"]\ninput = 3\noutput = 0\n')
    with serve_in_thread(Pace(latency_s=0.01)) as server:
        spec = f"openai/paced?api=chat&base_url={server.url}/v1"
        answered = []
        for out in ("first", "second"):
            done = limbo("run", "default", "--model", spec, "--limit", "8", "--executor", "ray",
                         "--ray-address", cluster.address, "--prices", str(prices),
                         "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / out),
                         "--quiet", env={"OPENAI_API_KEY": "sk-test-not-a-real-key"})
            assert done.returncode == 0, done.stderr
            answered.append(server.counts.answered)
    assert answered[0] == answered[1] > 0  # the second run made no call
    for out in ("first", "second"):
        got = records(tmp_path / out)
        assert len(got) == 8 and {r["outcome"]["cost_usd"] for r in got} == {0.006}
