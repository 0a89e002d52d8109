"""Hostile plugins: a plugin file or module that is missing, not Python, broken, exits at
import, registers a bad name or a class that is not an adapter, or an adapter that cannot work
— each is one line naming it, exit 2, before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.hostile import cli, refused, untouched, write_plugin

ADAPTER = '''
from limbo.episode.models import ModelAdapter, ModelTurn, model_adapter


@model_adapter("{name}")
class Adapter(ModelAdapter):
{body}
'''


def adapter(name: str, body: str) -> str:
    return ADAPTER.replace("{name}", name).replace("{body}", body)


FILES = [
    ("syntax error", "def broken(:\n", "failed to load: SyntaxError"),
    ("raises at import", "raise RuntimeError('no config')\n", "failed to load: RuntimeError: no config"),
    ("exits at import", "import sys\nsys.exit(3)\n", "failed to load: SystemExit: 3"),
    ("generator exit", "raise GeneratorExit()\n", "failed to load: GeneratorExit"),
    ("imports nothing there", "import limbo_no_such_module\n", "failed to load: ModuleNotFoundError"),
    ("a bad registered name", "from limbo.episode.models import ModelAdapter, model_adapter\n"
     "@model_adapter('a/b')\nclass X(ModelAdapter): pass\n", "model name 'a/b' must match"),
    ("an empty registered name", "from limbo.sim.fault import Fault, fault\n"
     "@fault('')\nclass F(Fault): pass\n", "fault name '' must match"),
    ("a name already taken", "from limbo.episode.models import ModelAdapter, model_adapter\n"
     "@model_adapter('policy')\nclass P(ModelAdapter): pass\n", "model 'policy' is registered twice"),
    ("not an adapter", "from limbo.episode.models import model_adapter\n@model_adapter('notadapter')\n"
     "class P: pass\n", "must subclass limbo.episode.models.ModelAdapter"),
]


@pytest.mark.parametrize(("label", "source", "needle"), FILES, ids=[f[0] for f in FILES])
def test_a_broken_plugin_file_is_one_line(capsys, tmp_path: Path, label, source, needle) -> None:
    plugin = write_plugin(tmp_path, "plugin", source)
    out = tmp_path / "out"
    refused(cli(capsys, "run", "--plugin", str(plugin), "--out", str(out)), needle)
    untouched(out)


def test_a_plugin_that_is_not_utf8_python(capsys, tmp_path: Path) -> None:
    plugin = tmp_path / "latin.py"
    plugin.write_bytes(b"NAME = '\xe9t\xe9'\n")
    refused(cli(capsys, "run", "--plugin", str(plugin), "--out", str(tmp_path / "out")),
            "failed to load: SyntaxError")


@pytest.mark.parametrize(("make", "needle"), [
    (lambda t: t / "missing.py", "plugin file '{}' does not exist"),
    (lambda t: t, "plugin file '{}' is not a file"),
    (lambda t: t / "notes.txt", "must be a Python file ending in .py"),
    (lambda t: t / "sub" / "missing", "does not exist"),
])
def test_a_plugin_path_that_is_not_a_python_file(capsys, tmp_path: Path, make, needle) -> None:
    (tmp_path / "notes.txt").write_text("print('hi')\n")
    path = make(tmp_path)
    refused(cli(capsys, "run", "--plugin", str(path), "--out", str(tmp_path / "out")),
            needle.replace("{}", str(path)))
    refused(cli(capsys, "list", "models", "--plugin", str(path)), needle.replace("{}", str(path)))


@pytest.mark.parametrize(("name", "needle"), [
    ("limbo_no_such_plugin", "cannot import plugin 'limbo_no_such_plugin'"),
    ("a..b", "is neither a .py file nor a dotted module name"),
    ("", "plugin file '' is not a file"),
    ("-rf", "is neither a .py file nor a dotted module name"),
])
def test_a_plugin_module_that_cannot_be_imported(capsys, tmp_path: Path, name, needle) -> None:
    refused(cli(capsys, "run", f"--plugin={name}", "--out", str(tmp_path / "out")), needle)
    untouched(tmp_path / "out")


def test_a_plugin_module_that_raises_at_import(capsys, tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "limbo_raising_plugin.py").write_text("raise ValueError('bad setting')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    refused(cli(capsys, "run", "--plugin", "limbo_raising_plugin", "--out", str(tmp_path / "o")),
            "plugin limbo_raising_plugin failed to load: ValueError: bad setting")


ADAPTERS = [
    ("no generate", "    pass\n", "must define `async def generate(self, messages, tools, ctx)`"),
    ("sync generate", "    def generate(self, messages, tools, ctx):\n"
     "        return ModelTurn(text='x')\n", "must define `async def generate"),
    ("constructor raises", "    def __init__(self, model, **params):\n"
     "        raise OSError('no GPU')\n", "the adapter failed before the run: OSError: no GPU"),
    ("constructor exits", "    def __init__(self, model, **params):\n"
     "        raise SystemExit(1)\n", "the adapter failed before the run: SystemExit: 1"),
    ("preflight raises", "    async def generate(self, messages, tools, ctx):\n"
     "        return ModelTurn(text='x')\n    def preflight(self):\n"
     "        raise ConnectionError('down')\n", "failed before the run: ConnectionError: down"),
]


@pytest.mark.parametrize(("label", "body", "needle"), ADAPTERS, ids=[a[0] for a in ADAPTERS])
def test_an_adapter_that_cannot_work_is_refused_before_the_run(capsys, tmp_path: Path, label,
                                                               body, needle) -> None:
    name = "a" + label.replace(" ", "")
    plugin = write_plugin(tmp_path, name, adapter(name, body))
    out = tmp_path / "out"
    line = refused(cli(capsys, "run", "--model", f"{name}/x", "--plugin", str(plugin), "--out",
                       str(out)), needle)
    assert line.startswith(f"limbo: error: model {name}/x: ")
    untouched(out)


def test_an_adapter_whose_price_raises_under_a_budget(capsys, tmp_path: Path) -> None:
    body = ("    async def generate(self, messages, tools, ctx):\n"
            "        return ModelTurn(text='x')\n    @classmethod\n"
            "    def price_per_mtok(cls, model, params):\n        raise KeyError(model)\n")
    plugin = write_plugin(tmp_path, "pricy", adapter("pricy", body))
    refused(cli(capsys, "run", "--model", "pricy/x", "--plugin", str(plugin), "--max-cost", "1",
                "--out", str(tmp_path / "out")), "model pricy/x: price_per_mtok raised KeyError")
    untouched(tmp_path / "out")


def test_a_plugin_under_a_path_that_is_not_utf8_still_loads(capsys, tmp_path: Path) -> None:
    import os

    folder = Path(os.fsdecode(bytes(tmp_path) + b"/d\xe9j\xe0"))
    folder.mkdir()
    plugin = write_plugin(folder, "odd", adapter("oddpath", "    async def generate(self, m, t, c):\n"
                                                 "        return ModelTurn(text='done')\n"))
    result = cli(capsys, "list", "models", "--plugin", str(plugin))
    assert result.code == 0 and "oddpath/…" in result.out, result.err
