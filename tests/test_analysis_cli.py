"""``limbo tables`` / ``figures`` with bad input: one clear line each, and the other tables are
still produced. And the core without the ``analysis`` extra."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from limbo.cli import main

LIMBO = str(Path(sys.executable).parent / "limbo")
BLOCKED = ("numpy", "pandas", "scipy", "statsmodels", "matplotlib")


def limbo(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, timeout=600, cwd=cwd,
                          env={**os.environ})


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small E1-shaped run (no plain condition, so Table 10 has no pairs)."""
    out = tmp_path_factory.mktemp("cli") / "run"
    done = limbo("run", "e1", "--template", "charge_invoice", "--template", "import_batch",
                 "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    return out


def cli(capsys, *args: str) -> tuple[int, str, str]:
    """``limbo ARGS`` in this process: (exit code, stdout, stderr)."""
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def test_tables_print_markdown_and_say_what_is_absent(run: Path) -> None:
    done = limbo("tables", str(run))
    assert done.returncode == 0, done.stderr
    assert "### Table 3: E1 results by model" in done.stdout
    assert "| policy/verify |" in done.stdout
    table10 = done.stdout.split("### Table 10")[1].split("###")[0]
    assert "No data" in table10 and "`limbo run e6`" in table10
    table13 = done.stdout.split("### Table 13")[1].split("###")[0]
    assert "No data" in table13 and "`limbo run e2`" in table13 and "0.0" not in table13
    table8 = done.stdout.split("### Table 8")[1].split("###")[0]
    # An E1 run holds minimal/vanilla episodes, but they are E1's, not E3's: Table 8 stays
    # empty and names the grid that fills it.
    assert "No data — produced by grid e3" in table8 and "| minimal |" not in table8
    assert done.stderr.startswith("limbo: loaded 735 episodes from 1 run(s): 735 rated, 0 "
                                  "errored") and "warning" not in done.stderr


def test_files_in_every_format(run: Path, tmp_path: Path, capsys) -> None:
    code, _, err = cli(capsys, "tables", str(run), "--out", str(tmp_path), "--table", "3",
                       "--table", "10", "--format", "md,csv,tex")
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "table10.csv", "table10.md", "table10.tex", "table3.csv", "table3.md", "table3.tex"]
    tex = (tmp_path / "table3.tex").read_text()
    assert "\\begin{tabular}" in tex and "policy/verify" in tex
    assert all(ord(ch) < 128 for ch in tex)  # every symbol the tables use is escaped
    header = (tmp_path / "table3.csv").read_text().splitlines()[0]
    assert header == ("table,row,column,shown,unit,value,numerator,denominator,n_eff,lo,hi,"
                      "clusters,deff,boot_lo,boot_hi")


def eos_cell(out: Path) -> dict[str, str]:
    """Table 3's EOS cell over all models, from the CSV written into ``out``."""
    with (out / "table3.csv").open() as fh:
        return next(r for r in csv.DictReader(fh)
                    if r["row"] == "all models" and r["column"] == "EOS: all faults")


def test_weights_are_a_parameter(run: Path, tmp_path: Path, capsys) -> None:
    def n_eff(weights: str) -> tuple[float, int]:
        out = tmp_path / weights
        assert cli(capsys, "tables", str(run), "--table", "3", "--weights", weights,
                   "--cluster", "none", "--format", "csv", "--out", str(out))[0] == 0
        cell = eos_cell(out)
        return float(cell["n_eff"]), int(float(cell["denominator"]))

    unweighted, n = n_eff("none")
    assert unweighted == n
    assert n_eff("template")[0] < n  # two templates of unequal size


def test_cluster_is_a_parameter(run: Path, tmp_path: Path, capsys) -> None:
    """The same cell under each unit: n and the rate stay, the clusters are the worlds (two
    templates × three instances), the templates, or the episodes; the effective n and the
    interval follow. Clustering never narrows an interval (ρ is clipped at 0); the reference
    policies behave alike in these worlds, so here it hardly widens it."""
    found = {}
    for cluster in ("world", "template", "none"):
        out = tmp_path / cluster
        assert cli(capsys, "tables", str(run), "--table", "3", "--cluster", cluster,
                   "--format", "csv", "--out", str(out))[0] == 0
        found[cluster] = eos_cell(out)
    n = int(float(found["none"]["denominator"]))
    assert {c: int(float(cell["clusters"])) for c, cell in found.items()} == {
        "world": 6, "template": 2, "none": n}
    assert len({cell["value"] for cell in found.values()}) == 1
    assert float(found["none"]["deff"]) == pytest.approx(n / float(found["none"]["n_eff"]))
    width = {c: float(cell["hi"]) - float(cell["lo"]) for c, cell in found.items()}
    assert width["none"] <= width["world"] and width["none"] <= width["template"]
    assert float(found["world"]["n_eff"]) <= float(found["none"]["n_eff"])
    assert found["world"]["boot_lo"] == ""  # no bootstrap unless asked for


def test_a_gee_on_too_few_clusters_says_why_and_the_rest_stands(tmp_path: Path,
                                                                capsys) -> None:
    """Two templates (one with an eventual read path, so H1 has both kinds of write) are two
    clusters under --cluster template: H1's GEE refuses to fit (fewer than 5) and says so in
    its row, and the rest of the row and table stand. By world (six) it fits and prints G and
    df."""
    run = tmp_path / "run"
    done = limbo("run", "e1", "--template", "announce_linkedin", "--template", "charge_invoice",
                 "--out", str(run), "--quiet")
    assert done.returncode == 0, done.stderr

    def h1(*options: str) -> str:
        code, out, err = cli(capsys, "tables", str(run), "--table", "12", *options)
        assert code == 0 and "| H5 |" in out, err
        return next(line for line in out.splitlines() if line.startswith("| H1 |"))

    refused = h1("--cluster", "template")
    assert "GEE (G=2) not estimable (G=2 cluster(s): a clustered GEE needs at least 5)" in refused
    assert "mixed-effects OR" in refused and refused.startswith("| H1 | ") and "dup " in refused
    assert "GEE (G=6, df=4) OR" in h1()


def test_bootstrap_adds_an_interval_to_every_rate(run: Path, tmp_path: Path, capsys) -> None:
    """--bootstrap B: every rate also carries its cluster-bootstrap interval, the same from the
    same logs; the Markdown's rows stay as they were, its notes say where the intervals are."""
    texts = []
    for name in ("a", "b"):
        out = tmp_path / name
        assert cli(capsys, "tables", str(run), "--table", "3", "--bootstrap", "200",
                   "--format", "csv,md", "--out", str(out))[0] == 0
        texts.append((out / "table3.csv").read_text())
        cell = eos_cell(out)
        assert float(cell["boot_lo"]) < float(cell["value"]) < float(cell["boot_hi"])
    assert texts[0] == texts[1]
    assert cli(capsys, "tables", str(run), "--table", "3", "--format", "md", "--out",
               str(tmp_path / "c"))[0] == 0
    with_boot, without = ((tmp_path / name / "table3.md").read_text() for name in ("a", "c"))
    assert [r for r in with_boot.splitlines() if r.startswith("|")] == [
        r for r in without.splitlines() if r.startswith("|")]
    assert "B = 200" in with_boot and "boot_lo" in with_boot and "B = " not in without


def _on_a_terminal(*args: str) -> tuple[subprocess.CompletedProcess, bytes]:
    """``limbo ARGS`` with stderr on a pseudo-terminal: the run, and what it drew there."""
    import pty

    leader, follower = pty.openpty()
    seen: list[bytes] = []

    def read() -> None:  # drained while the command runs: a full terminal would block it
        with open(leader, "rb", buffering=0) as terminal, contextlib.suppress(OSError):
            while chunk := terminal.read(65536):  # OSError once the command's end closes
                seen.append(chunk)

    reader = threading.Thread(target=read)
    reader.start()
    done = subprocess.run([LIMBO, *args], stdout=subprocess.PIPE, stderr=follower, timeout=600,
                          env={**os.environ, "COLUMNS": "120"})
    os.close(follower)
    reader.join(timeout=60)
    return done, b"".join(seen)


def test_bootstrap_progress_only_on_a_terminal(run: Path) -> None:
    """A progress bar on stderr when it is a terminal (a pseudo-terminal here); into a pipe,
    only the usual load line."""
    piped = limbo("tables", str(run), "--table", "4", "--bootstrap", "300")
    assert piped.returncode == 0 and "bootstrap" not in piped.stderr
    assert piped.stderr.count("\n") == 1
    done, drawn = _on_a_terminal("tables", str(run), "--table", "4", "--bootstrap", "300")
    assert done.returncode == 0
    assert b"bootstrap table 4: Shapley shares, E1 pooled" in drawn and b"300/300" in drawn
    assert done.stdout.decode() == piped.stdout


def test_tables_bootstrapped_on_a_terminal_beside_a_helper_are_the_piped_ones(run: Path) -> None:
    """Several tables with a bar on a real pseudo-terminal: built beside a forked helper that
    inherited the bar (the bar runs no thread), they are the tables a pipe gets, and the
    bar shows Table 4's bootstrap whichever process took it."""
    args = ("tables", str(run), "--table", "3", "--table", "4", "--table", "5", "--bootstrap",
            "200")
    piped = limbo(*args)
    assert piped.returncode == 0, piped.stderr
    done, drawn = _on_a_terminal(*args)
    assert done.returncode == 0
    assert done.stdout.decode() == piped.stdout
    assert b"bootstrap table 4: Shapley shares, E1 pooled" in drawn and b"200/200" in drawn
    assert b"Traceback" not in drawn


@pytest.mark.parametrize("args,message", [
    (["--table", "11"], "no table 11; choose from 0, 3, 4, 5"),
    (["--format", "xls"], "--format 'xls': choose from md, csv, tex"),
    (["--out", __file__], "is a file; name a directory"),
    (["--cluster", "instance"], "invalid choice: 'instance'"),
    (["--bootstrap", "-1"], "-1: choose 0 (none) to 100,000"),
    (["--bootstrap", "lots"], "'lots' is not a whole number"),
    (["--bootstrap", "1e9"], "'1e9' is not a whole number"),
])
def test_bad_flags_are_one_line(run: Path, args: list[str], message: str, capsys) -> None:
    code, _, err = cli(capsys, "tables", str(run), *args)
    assert code == 2 and message in err
    assert len(err.strip().splitlines()) == 1


def test_empty_directory(run: Path, tmp_path: Path, capsys) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = cli(capsys, "tables", str(empty))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no episode records could be loaded" in err
    code, out, err = cli(capsys, "tables", str(empty), str(run), "--table", "3")
    assert code == 0 and "### Table 3" in out
    assert err.count("\n") == 2 and "no records" in err and "limbo: loaded 735 episodes" in err
    code, _, err = cli(capsys, "figures", str(empty), "--out", str(tmp_path / "figures"))
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_corrupt_future_and_duplicated_records(run: Path, tmp_path: Path, capsys) -> None:
    good = lines(run / "episodes.jsonl")
    future = good[1].replace('"limbo.episode/1"', '"limbo.episode/9"', 1)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "episodes.jsonl").write_text("".join([good[0], "{\"schema\": broken\n", future,
                                                 *good[2:]]))
    copy = tmp_path / "copy" / "episodes.jsonl"
    copy.parent.mkdir()
    copy.write_text(good[5])
    code, out, err = cli(capsys, "tables", str(bad), str(copy.parent), "--table", "3")
    assert code == 0, err
    warnings = [line for line in err.strip().splitlines() if "warning" in line]
    assert len(warnings) == 4
    # Neither directory has a manifest: both are read as this LIMBO's built-in grids, said once.
    assert any("2 no design" in w and "built-in grids" in w for w in warnings)
    assert any("1 unparseable" in w and "episodes.jsonl:2" in w for w in warnings)
    assert any("1 unknown schema" in w and "limbo.episode/9" in w for w in warnings)
    assert any("1 duplicate" in w for w in warnings)
    episodes = int(out.split("| all models |")[1].split("|")[-2])
    clean = cli(capsys, "tables", str(run), "--table", "3")[1]
    assert episodes == int(clean.split("| all models |")[1].split("|")[-2]) - 1


def test_a_failing_table_does_not_stop_the_others(run: Path, capsys, monkeypatch) -> None:
    from limbo.analysis import tables

    def broken(data):
        raise ValueError("odd data")

    monkeypatch.setitem(tables.TABLES, 5, broken)
    assert main(["tables", str(run), "--table", "3", "--table", "5", "--table", "6"]) == 1
    out, err = capsys.readouterr()
    assert "### Table 3" in out and "### Table 6" in out
    assert "could not be computed: ValueError: odd data" in out
    assert err.strip().splitlines()[-1] == ("limbo: error: table 5 could not be computed: "
                                            "ValueError: odd data")


def without_extra(code: str, *args: str, blocked: tuple[str, ...] = BLOCKED):
    """Run ``code`` in a fresh interpreter in which ``blocked`` modules cannot be imported."""
    block = "; ".join(f"sys.modules[{name!r}] = None" for name in blocked)
    return subprocess.run([sys.executable, "-c", f"import sys; {block}; {code}", *args],
                          capture_output=True, text=True, timeout=600)


def test_without_the_analysis_extra(run: Path, tmp_path: Path) -> None:
    entry = "from limbo.cli import main; sys.exit(main(sys.argv[1:]))"
    only_pandas = without_extra(entry, "tables", str(run), blocked=("pandas",))
    assert only_pandas.returncode == 2
    assert only_pandas.stderr.strip().splitlines() == [
        "limbo: error: limbo tables needs the 'analysis' extra (pandas is not importable): "
        "pip install 'limbo-bench[analysis]'"]
    for command in ("tables", "figures", "compare"):
        done = without_extra(entry, command, str(run))
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.strip().splitlines() == [
            f"limbo: error: limbo {command} needs the 'analysis' extra (numpy is not "
            f"importable): pip install 'limbo-bench[analysis]'"]
    core = without_extra(entry, "run", "default", "--template", "charge_invoice", "--out",
                         str(tmp_path / "core"), "--quiet")
    assert core.returncode == 0, core.stderr
    assert json.loads((tmp_path / "core" / "episodes.jsonl").read_text().splitlines()[0])
    assert without_extra("import limbo, limbo.cli; print('ok')").stdout.strip() == "ok"


def test_errored_episodes_are_counted_not_rated(run: Path, tmp_path: Path, capsys) -> None:
    records = [json.loads(line) for line in lines(run / "episodes.jsonl")]
    first = next(r for r in records if r["cell"]["fault"] == "timeout_post")
    first["outcome"]["termination"] = "infra_error"
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, err = cli(capsys, "tables", str(tmp_path), "--table", "3")
    assert code == 0, err
    assert f"{len(records)} episodes; excluded from rates: 1 errored (infra_error" in out
    assert int(out.split("| all models |")[1].split("|")[-2]) == len(records) - 1


def test_a_second_harness_adds_its_rows_and_the_e3_block(run: Path, tmp_path: Path,
                                                         capsys) -> None:
    """No production harness runs here yet, so copies of the run relabelled as an E3 run —
    ``minimal`` and ``codex`` (a harness that behaves exactly like the minimal one), each under
    vanilla and guard — exercise the multi-harness paths. The copies have no manifest, so they
    are read as this LIMBO's built-in E3 grid (instance 0)."""
    records = [json.loads(line) for line in lines(run / "episodes.jsonl")]
    copies = []
    for harness in ("minimal", "codex"):
        for condition in ("vanilla", "guard"):
            for r in records:
                copy = json.loads(json.dumps(r))
                copy["cell"].update(harness=harness, condition=condition)
                copy["episode_id"] += f"-{harness}-{condition}"
                copies.append(copy)
    (tmp_path / "episodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in copies))
    code, out, err = cli(capsys, "tables", str(run), str(tmp_path), "--table", "4",
                         "--table", "8")
    assert code == 0, err
    table4, table8 = out.split("### Table 8")
    assert "| E3 | harness share (%) | 0 |" in table4  # identical behaviour explains nothing
    assert "| E3 | episodes |" in table4 and "E3 block omitted" not in table4
    assert "| codex | policy/verify |" in table8 and "| minimal | policy/verify |" in table8
    assert "No episodes for copilot, claude-code, hermes" in table8
