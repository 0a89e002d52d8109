"""Issue 15: ``limbo run --executor ray`` on a real Ray cluster on 127.0.0.1 — a head and one
extra node, each its own ``ray start`` process group (tests/support/ray_cluster.py).

The records of a Ray run equal a local run's; losing the extra node mid-run (SIGKILL of its
whole process group) loses and duplicates nothing; a model-shaped run against a loopback
endpoint goes through the cluster's one shared call limiter. Nothing here times anything.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.hostile import LIMBO, records
from support.ray_cluster import Cluster

pytest.importorskip("ray")

GRID = ["run", "default"]  # 3,850 reference-policy episodes


def limbo(*args: str, cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env=ENV)


ENV = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}


def lines(run_dir: Path) -> int:
    return sum(p.read_bytes().count(b"\n") for p in run_dir.glob("episodes*.jsonl"))


@pytest.fixture(scope="module")
def cluster():
    with Cluster(cpus=1, extra=1) as c:
        yield c


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("local")
    done = limbo(*GRID, "--out", str(out), "--quiet", "--workers", "2")
    assert done.returncode == 0, done.stderr
    return records(out)


def test_a_grid_on_the_cluster_equals_the_local_run(tmp_path: Path, cluster: Cluster,
                                                    reference: list[dict]) -> None:
    assert len(reference) >= 2000
    done = limbo(*GRID, "--executor", "ray", "--ray-address", cluster.address,
                 "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    got = records(tmp_path)
    assert len({r["episode_id"] for r in got}) == len(got) == len(reference)
    assert got == reference
    # the plain progress line shows the cluster: its nodes and the cells out on it
    progress = [line for line in done.stdout.splitlines() if line.startswith("[limbo] ")]
    assert progress and all(re.search(r"ray 2 nodes, \d+ cells in flight", p) for p in progress)
    assert progress[-1].startswith(f"[limbo] {len(reference)}/{len(reference)} episodes")
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["ran"] == len(reference)
    # a second pass into the same directory is a resume: nothing left, nothing written twice
    again = limbo(*GRID, "--executor", "ray", "--ray-address", cluster.address,
                  "--out", str(tmp_path), "--quiet")
    assert again.returncode == 0, again.stderr
    assert f"ran 0 episodes, {len(reference):,} already done" in again.stdout
    assert lines(tmp_path) == len(reference)


def test_a_ray_run_resumes_a_local_one_exactly(tmp_path: Path, cluster: Cluster,
                                               reference: list[dict]) -> None:
    first = limbo(*GRID, "--out", str(tmp_path), "--quiet", "--limit", "700")
    assert first.returncode == 0, first.stderr
    done = limbo(*GRID, "--executor", "ray", "--ray-address", cluster.address,
                 "--out", str(tmp_path), "--quiet")
    assert done.returncode == 0, done.stderr
    assert f"ran {len(reference) - 700:,} episodes, 700 already done" in done.stdout
    assert records(tmp_path) == reference


def _until_recorded(proc: subprocess.Popen[str], run_dir: Path, n: int) -> None:
    """Wait until ``run_dir`` holds ``n`` records, the run still going (five minutes at most)."""
    deadline = time.monotonic() + 300
    while lines(run_dir) < n:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)


def test_ctrl_c_of_a_ray_run_is_one_line_and_the_resume_is_exact(
        tmp_path: Path, cluster: Cluster, reference: list[dict]) -> None:
    argv = [LIMBO, *GRID, "--executor", "ray", "--ray-address", cluster.address,
            "--out", str(tmp_path), "--quiet"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=ENV)
    _until_recorded(proc, tmp_path, 600)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 130
    assert err == "limbo: interrupted; re-run the same command to resume\n"
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["ran"] == lines(tmp_path) < 3850
    done = limbo(*argv[1:])
    assert done.returncode == 0, done.stderr
    assert records(tmp_path) == reference


def test_a_model_run_on_the_cluster_shares_one_call_limiter(tmp_path: Path,
                                                            cluster: Cluster) -> None:
    """512 real-model-shaped episodes (two calls each, 0.5 s latency, through the OpenAI SDK)
    on both nodes; the progress line reads the cluster's one limiter actor, which counts the
    calls of both nodes' episodes: more than one task's worth in flight at once."""
    from support.paced import Pace, serve_in_thread

    with serve_in_thread(Pace(latency_s=0.5)) as server:
        spec = f"openai/paced?api=chat&base_url={server.url}/v1"
        done = limbo("run", "default", "--model", spec, "--instances", "4", "--limit", "512",
                     "--concurrency", "16", "--executor", "ray", "--ray-address",
                     cluster.address, "--out", str(tmp_path / "run"), "--no-cache")
        answered, refused = server.counts.answered, server.counts.refused
    assert done.returncode == 0, done.stderr
    got = records(tmp_path / "run")
    assert len({r["episode_id"] for r in got}) == len(got) == 512
    assert {r["outcome"]["termination"] for r in got} == {"finished"}
    assert (answered, refused) == (1024, 0)
    shared = [int(m) for m in re.findall(r"model calls (\d+) in flight / limit \d+ \(shared\)",
                                         done.stdout)]
    assert shared and max(shared) > 16, done.stdout


def test_losing_the_extra_node_mid_run_loses_and_duplicates_nothing(
        tmp_path: Path, cluster: Cluster, reference: list[dict]) -> None:
    """SIGKILL of the extra node's whole process group (raylet, agents, workers) while both
    nodes run batches: Ray reports the node's worker dead, its batches run again on the head,
    and the run goes on to complete every cell exactly once. (Last of the cluster's tests:
    the cluster has one node after it.)"""
    (node,) = cluster.nodes
    proc = subprocess.Popen([LIMBO, *GRID, "--executor", "ray", "--ray-address",
                             cluster.address, "--out", str(tmp_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _until_recorded(proc, tmp_path, 600)
    node.kill(signal.SIGKILL)
    at_kill = lines(tmp_path)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err  # the run went on without the node
    assert at_kill < len(reference)  # the node died mid-run, with cells still to run
    progress = [line for line in out.splitlines() if line.startswith("[limbo] ")]
    # Its batches ran again on the head. The node count is Ray's own view, which marks a
    # killed node dead only after its health checks time out: a run that ends sooner still
    # counts two nodes.
    assert re.search(r"ray [12] nodes?, 0 cells in flight, [1-9]\d* lost batch(es)? run again",
                     progress[-1]), progress
    got = records(tmp_path)
    assert len({r["episode_id"] for r in got}) == len(got) == len(reference)
    assert got == reference
    status = subprocess.run([LIMBO, "status", str(tmp_path)], capture_output=True, text=True)
    assert "verdict: OK — every cell of the grid is recorded exactly once" in status.stdout


# ------------------------------------------------------------------ errors, without a cluster

def test_a_world_grid_on_the_cluster_equals_the_local_run(tmp_path: Path,
                                                          cluster: Cluster) -> None:
    """Each worker loads the run's world file (issue 29): a world's records on the cluster are
    the local run's, byte for byte apart from runtime."""
    shop = str(Path(__file__).resolve().parents[1] / "examples" / "worlds" / "shop.toml")
    grid = ["run", "e1", "--world", shop, "--template", "shop_add_lines", "--quiet"]
    local = limbo(*grid, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr
    done = limbo(*grid, "--executor", "ray", "--ray-address", cluster.address,
                 "--out", str(tmp_path / "ray"))
    assert done.returncode == 0, done.stderr
    assert records(tmp_path / "ray") == records(tmp_path / "local")
    assert len(records(tmp_path / "local")) == 195


HIDE_RAY = "import sys; sys.modules['ray'] = None; from limbo.cli import main; "


def test_without_ray_the_executor_names_the_extra_in_one_line(tmp_path: Path) -> None:
    code = HIDE_RAY + "raise SystemExit(main(['run', 'e1', '--executor', 'ray', '--out', 'x']))"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert "pip install 'limbo-bench[ray]'" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "x").exists()
    local = HIDE_RAY + ("raise SystemExit(main(['run', 'e1', '--template', 'charge_invoice', "
                        "'--limit', '3', '--out', 'y', '--quiet']))")
    assert subprocess.run([sys.executable, "-c", local], cwd=tmp_path, capture_output=True,
                          timeout=120).returncode == 0  # the local executor needs no Ray


def test_an_address_where_no_cluster_listens_is_one_line(tmp_path: Path) -> None:
    from support.ray_cluster import free_port

    for argv, says in (
            (["--executor", "ray", "--ray-address", f"127.0.0.1:{free_port()}"],
             "no Ray head node answers there"),
            (["--executor", "ray", "--ray-address", "nonsense"], "must look like HOST:PORT"),
            (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --executor ray")):
        done = limbo("run", "e1", "--out", "x", *argv, cwd=tmp_path, timeout=120)
        assert done.returncode == 2, (argv, done.stderr)
        assert says in done.stderr and done.stderr.strip().count("\n") == 0, done.stderr
        assert not (tmp_path / "x").exists()


def test_ray_is_an_extra_with_a_range_the_tests_run() -> None:
    import tomllib
    from importlib.metadata import version

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())[
        "project"]
    assert not any(dep.startswith("ray") for dep in project["dependencies"])
    (spec,) = project["optional-dependencies"]["ray"]
    bounds = re.fullmatch(r"ray\[default\]>=([\d.]+),<([\d.]+)", spec)
    assert bounds is not None, spec
    low, high = bounds.groups()
    release = tuple(int(p) for p in version("ray").split(".")[:2])
    assert tuple(int(p) for p in low.split(".")) <= release < tuple(int(p) for p in high.split("."))
    assert "ray" in project["optional-dependencies"]["all"][0].split("[")[1]  # `make test` has it
