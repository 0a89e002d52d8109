"""Hostile input on the command line: every flag, grid file, model spec, price file and output
directory a user can get wrong is refused before anything runs, with exit 2, one line naming
what to fix, no traceback, and no run directory written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.hostile import cli, refused, untouched

SMALL = ["--template", "charge_invoice", "--contract", "native", "--fault", "none", "--model",
         "policy/verify"]


@pytest.mark.parametrize(("args", "needle"), [
    (["--workers", "0"], "--workers must be at least 1"),
    (["--workers", "-3"], "--workers must be at least 1"),
    (["--workers", "two"], "argument --workers: invalid int value: 'two'"),
    (["--concurrency", "0"], "--concurrency must be at least 1"),
    (["--concurrency", "1000000"], "--concurrency 1000000 is more than 10000"),
    (["--concurrency", "1.5"], "argument --concurrency: invalid int value"),
    (["--limit", "-1"], "--limit must be at least 0, got -1"),
    (["--limit", "ten"], "argument --limit: invalid int value"),
    (["--max-cost", "-1"], "--max-cost must be a finite amount of USD >= 0"),
    (["--max-cost", "nan"], "--max-cost must be a finite amount of USD >= 0, got nan"),
    (["--max-cost", "inf"], "--max-cost must be a finite amount of USD >= 0, got inf"),
    (["--max-cost", "cheap"], "argument --max-cost: invalid float value"),
    (["--episode-timeout", "0"], "--episode-timeout must be a finite number of seconds > 0"),
    (["--episode-timeout", "-5"], "--episode-timeout must be a finite number of seconds > 0"),
    (["--episode-timeout", "nan"], "--episode-timeout must be a finite number of seconds > 0"),
    (["--episode-timeout", "inf"], "--episode-timeout must be a finite number of seconds > 0"),
    (["--shard", "0/3"], "--shard 0/3: I must be between 1 and N"),
    (["--shard", "1/0"], "--shard 1/0: N must be at least 1"),
    (["--shard", "1/2/3"], "must look like I/N"),
    (["--shard=-1/2"], "--shard -1/2: I must be between 1 and N"),
    (["--shard", "1/"], "must look like I/N"),
    (["--seed", "0x10"], "argument --seed: invalid int value"),
    (["--instances", "0"], "--instances must be at least 1, got 0"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--out"], "argument --out: expected one argument"),
    (["--model", "verify"], "must look like provider/model"),
    (["--model", "policy/"], "must look like provider/model"),
    (["--model", "/verify"], "must look like provider/model"),
    (["--model", "nosuch/x"], "unknown model 'nosuch'; choose from:"),
    (["--model", "policy/nosuch"], "unknown policy 'nosuch'; choose from: blind"),
    (["--model", "policy/verify?wait=60"], "policy/verify"),
    (["--model", "policy/verify?seed=1&seed=2"], "parameter 'seed' is given 2 times"),
    (["--model", "policy/ver\x01ify"], "must be printable UTF-8 text"),
    (["--model", "policy/ver\udcffify"], "must be printable UTF-8 text"),
    (["-M", "novalue"], "-M 'novalue' must look like key=value"),
    (["--template", "nosuch"], "unknown template 'nosuch' in grid; choose from:"),
    (["--fault", "nosuch"], "unknown fault 'nosuch' in grid; choose from:"),
    (["--condition", "nosuch"], "unknown condition 'nosuch' in grid; choose from:"),
    (["--contract", "nosuch"], "contracts.0: Input should be 'native' or 'keys-everywhere'"),
    (["--harness", "nosuch"], "unknown harness 'nosuch' in grid; choose from:"),
    (["--service", "nosuch"], "unknown service 'nosuch' in grid; choose from:"),
    (["default", "e1"], "--out names one run directory, and 2 grids need one each"),
])
def test_bad_run_flags(capsys, tmp_path: Path, args: list[str], needle: str) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", *args, "--out", str(out)), needle)
    untouched(out)


OPENAI = "openai/m?base_url=http://127.0.0.1:9/v1"


@pytest.mark.parametrize(("param", "needle"), [
    ("temperature=hot", "parameter temperature must be a number between 0 and 2"),
    ("temperature=NaN", "parameter temperature must be a number between 0 and 2 (got nan)"),
    ("temperature=3", "parameter temperature must be at least 0 and at most 2"),
    ("top_p=-0.5", "parameter top_p must be at least 0 and at most 1"),
    ("max_tokens=0", "parameter max_tokens must be a whole number from 1"),
    ("max_tokens=1.5", "parameter max_tokens must be a whole number from 1"),
    ("timeout=0", "parameter timeout must be more than 0"),
    ("timeout=Infinity", "parameter timeout must be a number"),
    ("max_attempts=0", "parameter max_attempts must be a whole number from 1 to 20"),
    ("max_attempts=1000", "parameter max_attempts must be a whole number from 1 to 20"),
    ("stream=yes", "parameter stream must be true or false"),
    ("parallel_tool_calls=1", "parameter parallel_tool_calls must be true or false"),
    ("api=grpc", "parameter api must be one of responses, chat"),
    ("api_key_env=1-BAD", "parameter api_key_env must name an environment variable"),
    ("reasoning_effort=Very%20High", "parameter reasoning_effort must be a word"),
    ("colour=blue", "unknown parameter(s) colour; known:"),
])
def test_bad_model_parameters(capsys, tmp_path: Path, param: str, needle: str) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--model", f"{OPENAI}&{param}", *SMALL, "--out", str(out),
                "--no-cache"), needle)
    untouched(out)


@pytest.mark.parametrize(("url", "needle"), [
    ("ftp://127.0.0.1/v1", "base_url must start with http:// or https:// and name a host"),
    ("http:///v1", "base_url must start with http:// or https:// and name a host"),
    ("127.0.0.1:8000/v1", "base_url must start with http:// or https://"),
    ("http://127.0.0.1:99999/v1", "base_url has a port that is not a number from 1 to 65535"),
    ("http://127.0.0.1:0/v1", "base_url has a port that is not a number from 1 to 65535"),
    ("http://127.0.0.1:http/v1", "base_url has a port that is not a number from 1 to 65535"),
    ("", "base_url must be a URL"),
])
def test_bad_base_urls(capsys, tmp_path: Path, url: str, needle: str) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--model", f"openai/m?api=chat&base_url={url}", *SMALL,
                "--out", str(out), "--no-cache"), needle)
    untouched(out)


@pytest.mark.parametrize(("body", "needle"), [
    ('["openai/m"]\ninput = -1.0\noutput = 1.0\n', "input must be a finite amount of USD >= 0, got -1.0"),
    ('["openai/m"]\ninput = nan\noutput = 1.0\n', "input must be a finite amount of USD >= 0, got nan"),
    ('["openai/m"]\ninput = 1.0\noutput = inf\n', "output must be a finite amount of USD >= 0, got inf"),
    ('["openai/m"]\ninput = "cheap"\noutput = 1.0\n', "input must be a finite amount of USD >= 0"),
    ('["openai/m"]\ninput = true\noutput = 1.0\n', "input must be a finite amount of USD >= 0"),
    ('"openai/m" = 3\n', "entry 'openai/m' is not a table"),
    ('["openai/m"]\ninput = 1.0\noutput = 1.0\nsurcharge = 2.0\n', "bad entry 'openai/m'"),
    ('["openai/m"\n', "cannot read price file"),
    (b'["openai/m"]\ninput = 1.0 # \xff\xfe\noutput = 1.0\n', "cannot read price file"),
])
def test_bad_price_files(capsys, tmp_path: Path, body: str | bytes, needle: str) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_bytes(body if isinstance(body, bytes) else body.encode())
    out = tmp_path / "out"
    refused(cli(capsys, "run", *SMALL, "--prices", str(prices), "--out", str(out)), needle)
    untouched(out)


def test_a_missing_price_file_and_a_directory_as_price_file(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    refused(cli(capsys, "run", *SMALL, "--prices", str(tmp_path / "none.toml"), "--out",
                str(out)), "cannot read price file")
    refused(cli(capsys, "run", *SMALL, "--prices", str(tmp_path), "--out", str(out)),
            "cannot read price file")
    untouched(out)


def test_a_negative_price_cannot_defeat_max_cost(capsys, tmp_path: Path) -> None:
    prices = tmp_path / "free.toml"
    prices.write_text('["openai/gpt-4o"]\ninput = -100.0\noutput = -100.0\n')
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--model", "openai/gpt-4o?base_url=http://127.0.0.1:9/v1",
                *SMALL, "--max-cost", "1", "--prices", str(prices), "--out", str(out),
                "--dry-run"), "must be a finite amount of USD >= 0, got -100.0")
    untouched(out)


# ------------------------------------------------------------------ --out


def _unwritable(tmp_path: Path) -> Path:
    """A directory this process cannot write: a read-only mount when running as root."""
    target = tmp_path / "ro"
    target.mkdir()
    if os.geteuid() != 0:
        target.chmod(0o500)
        return target
    if os.system(f"mount -t tmpfs -o ro,size=64k tmpfs {target} 2>/dev/null") != 0:
        pytest.skip("running as root without permission to mount a read-only file system")
    return target


def test_out_in_a_read_only_directory(capsys, tmp_path: Path) -> None:
    target = _unwritable(tmp_path)
    try:
        refused(cli(capsys, "run", *SMALL, "--out", str(target / "run")), "is not writable")
        assert not (target / "run").exists()
    finally:
        if os.geteuid() == 0:
            os.system(f"umount {target}")


@pytest.mark.parametrize(("make", "needle"), [
    (lambda t: t / "afile", "is a file; name a directory"),
    (lambda t: t / "afile" / "run", "is a file, so nothing can be created inside it"),
    (lambda t: t / ("x" * 300), "bytes long; a file name may have at most 255"),
    (lambda t: t.joinpath(*["d" * 200] * 25), "is too long a path"),
    (lambda t: Path(os.fsdecode(bytes(t) + b"/caf\xe9")), "is not valid UTF-8"),
    (lambda t: t / "dangling" / "run", "is a dangling symbolic link"),
])
def test_bad_out_directories(capsys, tmp_path: Path, make, needle: str) -> None:
    (tmp_path / "afile").write_text("x")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    out = make(tmp_path)
    refused(cli(capsys, "run", *SMALL, "--out", str(out)), needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "dangling"]


def test_bad_cache_dir(capsys, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "out"
    refused(cli(capsys, "run", *SMALL, "--cache-dir", str(tmp_path / "afile"), "--out",
                str(out)), "--cache-dir")
    untouched(out)


# ------------------------------------------------------------------ grid files


@pytest.mark.parametrize(("body", "needle"), [
    (b'models = ["policy/verify"]\ndescription = "caf\xe9"\n', "is not UTF-8 text (byte"),
    (b"models = [\n", "is not valid TOML"),
    (b'name = "../../x"\n', "name: Value error, '../../x' is not a plain name"),
    (b'name = "/abs/path"\n', "is not a plain name"),
    (b'name = "a/b"\n', "is not a plain name"),
    (b'name = ""\n', "is not a plain name"),
    (b'name = ".hidden"\n', "is not a plain name"),
    (b"name = 42\n", "name: Input should be a valid string"),
    (b"instances = 0\n", "instances: Input should be greater than or equal to 1"),
    (b"instances = 10001\n", "instances: Input should be less than or equal to 10000"),
    (b"timing.think_s = nan\n", "timing.think_s: Input should be a finite number"),
    (b"timing.write_s = inf\n", "timing.write_s: Input should be a finite number"),
    (b"timing.read_s = -1.0\n", "timing.read_s: Input should be greater than or equal to 0"),
    (b"limits.model_turns = 0\n", "limits.model_turns: Input should be greater than 0"),
    (b"limits.settle_s = nan\n", "limits.settle_s: Input should be a finite number"),
    (b"models = []\n", "models: Value error, must list at least one level"),
    (b'models = "policy/verify"\n', "models: Input should be a valid list"),
    (b"seed = 1.5\n", "seed: Input should be a valid integer"),
    (b'include = ["nosuch"]\n', "no grid 'nosuch'"),
    (b'include = ["bad.toml"]\n', "includes grids itself"),
    (b'focal_writes = "some"\n', "focal_writes: Input should be 'all' or 'first'"),
    (b'instances = 10000\nfaults = ["all"]\ncontracts = ["all"]\n', "more than the 1,000,000 one run may hold"),
])
def test_bad_grid_files(capsys, tmp_path: Path, monkeypatch, body: bytes, needle: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.toml").write_bytes(body)
    out = tmp_path / "out"
    refused(cli(capsys, "run", "bad.toml", "--out", str(out)), needle)
    untouched(out)


def test_a_grid_file_starting_with_a_bom_is_the_same_grid(tmp_path: Path) -> None:
    """Some editors start a UTF-8 file with a byte-order mark; the grid is the one without."""
    from limbo.experiments.grid import load_grid

    body = 'name = "g"\nmodels = ["policy/verify"]\ntemplates = ["charge_invoice"]\n'
    (tmp_path / "plain.toml").write_text(body, encoding="utf-8")
    (tmp_path / "bom.toml").write_text(body, encoding="utf-8-sig")
    assert (tmp_path / "bom.toml").read_bytes().startswith(b"\xef\xbb\xbf")
    plain, bom = load_grid(str(tmp_path / "plain.toml")), load_grid(str(tmp_path / "bom.toml"))
    assert bom == plain and bom.models == ["policy/verify"]


def test_a_grid_name_that_is_a_path_never_leaves_runs(capsys, tmp_path: Path, monkeypatch) -> None:
    """Without --out the run goes to runs/<name>: a name like ../../x would escape it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.toml").write_text('name = "../../escape"\ntemplates = ["charge_invoice"]\n')
    refused(cli(capsys, "run", "g.toml"), "is not a plain name")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.toml"]
    assert not (tmp_path.parent.parent / "escape").exists()


def test_a_grid_path_that_is_a_directory(capsys, tmp_path: Path) -> None:
    refused(cli(capsys, "run", str(tmp_path), "--out", str(tmp_path / "out")),
            "not a file, and not a built-in grid")
    untouched(tmp_path / "out")


def test_the_dry_run_of_a_huge_grid_is_refused_before_expanding(capsys, tmp_path: Path) -> None:
    refused(cli(capsys, "run", "default", "--instances", "10000", "--dry-run"),
            "grid default expands to 38,500,000 cells, more than the 1,000,000")


# ------------------------------------------------------------------ other commands


@pytest.mark.parametrize(("args", "needle"), [
    (["show", "/nonexistent/run", "ep-x"], "no run directory /nonexistent/run"),
    (["status", "/nonexistent/run"], "no run directory /nonexistent/run"),
    (["list", "everything"], "argument what: invalid choice: 'everything'"),
    (["episode", "--template", "nosuch"], "unknown template 'nosuch'; choose from:"),
    (["episode", "--focal-write", "mail_send"], "--focal-write 'mail_send' is not a write of"),
    (["episode", "--instance", "-1", "--no-cache"], "--instance: Input should be greater than"),
    (["episode", "--fault", "partial_batch", "--no-cache"], "cannot act on billing_create_charge"),
    (["episode", "--model", "policy/verify?wait=1", "--no-cache"], "policy/verify"),
    (["nosuch"], "argument command: invalid choice: 'nosuch'"),
    ([], "the following arguments are required: command"),
])
def test_bad_input_to_other_commands(capsys, args: list[str], needle: str) -> None:
    refused(cli(capsys, *args), needle)


def test_status_of_a_directory_that_is_no_run(capsys, tmp_path: Path) -> None:
    refused(cli(capsys, "status", str(tmp_path)), "is not a run directory")
    (tmp_path / "afile").write_text("x")
    refused(cli(capsys, "status", str(tmp_path / "afile")), "no run directory")


# ------------------------------------------------------------------ what runs, and says so


def test_limit_zero_runs_nothing_and_says_so(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli(capsys, "run", *SMALL, "--out", str(out), "--limit", "0")
    assert result.code == 0 and result.err == ""
    assert "--limit 0, so nothing ran; 2 of 2 episodes are left to run" in result.out
    untouched(out)


def test_limit_counts_are_reported_right(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = cli(capsys, "run", "--template", "charge_invoice", "--out", str(out), "--limit", "5",
                "--quiet")
    assert "ran 5 episodes, 0 already done, 235 left to run" in first.out
    again = cli(capsys, "run", "--template", "charge_invoice", "--out", str(out), "--limit",
                "7", "--quiet")
    assert "ran 7 episodes, 5 already done, 228 left to run" in again.out
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["already_done"], manifest["to_run"], manifest["ran"]) == (5, 7, 7)


def test_repeated_levels_run_once_with_a_notice(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli(capsys, "run", "--model", "policy/verify", "--model", "policy/verify", *SMALL,
                 "--fault", "none", "--out", str(out), "--quiet")
    assert result.code == 0, result.err
    assert "note: --model policy/verify is given 3 times; it runs once" in result.out
    assert "note: --fault none is given 2 times; it runs once" in result.out
    from support.hostile import records

    assert len(records(out)) == 2


def test_repeated_levels_in_a_grid_file_run_once(capsys, tmp_path: Path) -> None:
    grid = tmp_path / "twice.toml"
    grid.write_text('models = ["policy/verify", "policy/keyed", "policy/verify"]\n'
                    'templates = ["charge_invoice"]\ncontracts = ["native"]\nfaults = ["none"]\n')
    out = tmp_path / "out"
    result = cli(capsys, "run", str(grid), "--out", str(out), "--quiet")
    assert result.code == 0, result.err
    assert "models lists 'policy/verify' 2 times; it runs once" in result.out
    from support.hostile import records

    assert len(records(out)) == 4


def test_workers_are_capped_with_a_notice(capsys, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli(capsys, "run", *SMALL, "--out", str(out), "--workers", "1000", "--quiet")
    assert result.code == 0, result.err
    cap = 4 * (os.cpu_count() or 1)
    assert f"--workers 1000 capped at {cap} (four per core on this machine)" in result.out
    assert f"--workers {cap} capped at 2 (the cells to run)" in result.out
    from support.hostile import records

    assert len(records(out)) == 2


def _peak_rss_kb(*args: str) -> int:
    import subprocess

    from support.hostile import LIMBO

    proc = subprocess.Popen([LIMBO, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_maxrss


def test_the_dry_run_counts_in_bounded_memory() -> None:
    """Ten times the cells, about the same memory: the dry run never holds the cells."""
    base = ["run", "default", "--model", "policy/verify", "--dry-run"]
    small = _peak_rss_kb(*base, "--instances", "6")   # 4,620 cells
    large = _peak_rss_kb(*base, "--instances", "60")  # 46,200 cells
    assert large <= 1.3 * small, (small, large)
