"""Extensions: every kind registers through its one decorator, plugins exactly like built-ins.

The demo distribution (tests/fixtures/limbo_ext_demo) is pip-installed into a scratch folder
and reached only through its entry points: its service (with a task template), fault,
condition (with a prompt file), policy, harnesses and model provider are listed, a grid over
them runs and grades, and no core file names any of them. Then, in this process, what a broken
plugin gets: one line naming what to fix.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from limbo.base import registry
from limbo.base.errors import UsageError
from limbo.base.hashing import digest
from limbo.base.registry import entries, load_plugin
from limbo.commands.listing import listing
from limbo.experiments.grid import Grid, expand
from limbo.sim.tasks import templates
from limbo.sim.tools import toolset

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "tests" / "fixtures" / "limbo_ext_demo"
LIMBO = str(Path(sys.executable).parent / "limbo")
CORE = ("limbo", "services", "faults", "harnesses", "experiments", "analysis")
NAMES = {"services": "demoshop_place_order", "templates": "demoshop_restock",
         "faults": "demo_lost_ack", "conditions": "demo-checklist", "models": "demo-patient",
         "harnesses": "demo-inline"}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo distribution, installed by pip (no index, no build isolation) into a folder
    that only the subprocesses below put on their path."""
    root = tmp_path_factory.mktemp("demo")
    source = root / "src"
    shutil.copytree(DEMO, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                "__pycache__"))
    target = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "--target", str(target), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)
    return target


def limbo(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([LIMBO, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=600)


@pytest.mark.parametrize("what", sorted(NAMES))
def test_the_installed_plugin_is_listed_with_the_built_ins(site: Path, what: str) -> None:
    listed = limbo(site, "list", what)
    assert listed.returncode == 0, listed.stderr
    assert NAMES[what] in listed.stdout
    builtin = {"services": "billing_create_charge", "templates": "charge_invoice",
               "faults": "timeout_pre", "conditions": "vanilla", "models": "policy/verify",
               "harnesses": "minimal"}[what]
    assert builtin in listed.stdout
    if what == "harnesses":
        assert "demo-absent" in listed.stdout and "not on PATH" in listed.stdout


GRID = """
models = ["policy/demo-patient", "demo-ext/verify", "policy/blind"]
harnesses = ["demo-inline", "demo-absent"]
conditions = ["demo-checklist"]
contracts = ["all"]
faults = ["none", "demo_lost_ack"]
services = ["demoshop"]
"""


def _records(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "episodes.jsonl").read_text().splitlines()]


def test_every_kind_is_found_from_one_read_of_the_installed_metadata(site: Path) -> None:
    """Each read of the entry points opens every installed distribution's metadata: a process
    reads them once for every kind, and finds the plugin's fault, condition and harness in it."""
    code = ("from limbo.base import registry\n"
            "calls = []\n"
            "real = registry.entry_points\n"
            "registry.entry_points = lambda *a, **k: calls.append(k) or real(*a, **k)\n"
            "found = {kind: sorted(registry.entries(kind)) for kind in registry.KINDS}\n"
            "print(len(calls), found['fault'], found['condition'], found['harness'])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("1 [")
    assert all(NAMES[kind] in done.stdout for kind in ("faults", "conditions", "harnesses"))


def test_a_grid_over_the_plugin_runs_and_grades(site: Path, tmp_path: Path) -> None:
    (tmp_path / "demo.toml").write_text(GRID)
    ran = limbo(site, "run", "demo.toml", "--out", "out", "--quiet", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    # 3 models x 2 contracts x 2 faults x 2 focal writes, once per harness; demo-absent dropped
    assert "dropped 24 cells: harness demo-absent is not available here: " \
           "limbo-demo-absent-agent is not on PATH" in ran.stdout + ran.stderr
    records = _records(tmp_path / "out")
    assert len(records) == 24
    assert {r["cell"]["harness"] for r in records} == {"demo-inline"}
    prompt = (DEMO / "limbo_ext_demo" / "prompts" / "demo_checklist.txt").read_text()
    for r in records:
        out = r["outcome"]
        assert out["termination"] == "finished" and out["fault_fired"], out
        assert r["header"]["prompts"]["demo_checklist"] == digest(prompt)
        assert [i["tool"] for i in r["header"]["intents"]] == ["demoshop_place_order",
                                                              "mail_send"]
        if r["cell"]["fault"] == "none":
            assert out["exactly_once"], r["cell"]
    lost = [r for r in records if r["cell"]["fault"] == "demo_lost_ack"
            and r["cell"]["focal_write"] == "demoshop_place_order"]
    by_model = {(r["cell"]["model"], r["cell"]["contract"]): r["outcome"] for r in lost}
    for contract in ("native", "keys-everywhere"):
        # the order list is strong: verifying policies see the order and do not repeat it
        assert by_model[("demo-ext/verify", contract)]["exactly_once"]
        assert by_model[("policy/demo-patient", contract)]["exactly_once"]
        assert by_model[("policy/blind", contract)]["commits"]["order"] == 2  # never reads
        assert by_model[("policy/blind", contract)]["duplicate"]


def test_the_plugin_harness_sends_the_prompt_before_the_task(site: Path) -> None:
    probe = ("from limbo.episode.models import make_adapter\n"
             "from limbo.sim.cell import Cell\n"
             "from limbo.episode.briefing import context\n"
             "from limbo.base.registry import lookup\n"
             "from limbo.sim.world import World\n"
             "cell = Cell(harness='demo-inline', condition='demo-checklist', service='demoshop',"
             " template='demoshop_restock', focal_write='demoshop_place_order')\n"
             "world = World.of(cell)\n"
             "h = lookup('harness', 'demo-inline')(world, make_adapter('policy/verify'),"
             " lookup('condition', 'demo-checklist')(), context(world))\n"
             "[m] = h.opening()\n"
             "print(m.role, 'tick this checklist' in m.content, m.content.endswith(world.prompt()))\n")
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.split() == ["user", "True", "True"]


def test_no_core_file_names_anything_the_plugin_adds() -> None:
    names = ["demoshop", "demo_lost_ack", "demo-checklist", "demo_checklist", "demo-patient",
             "demo-inline", "demo-absent", "demo-ext", "limbo_ext_demo"]
    for folder in CORE:
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                text = path.read_bytes().decode(errors="replace")
                assert not [n for n in names if n in text], path


def test_a_broken_installed_plugin_is_one_line_naming_it(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "broken_ext-1.0.dist-info").mkdir(parents=True)
    (site / "broken_ext-1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-ext\nVersion: 1.0\n")
    (site / "broken_ext-1.0.dist-info" / "entry_points.txt").write_text(
        "[limbo.faults]\nbroken = broken_ext\n")
    (site / "broken_ext.py").write_text("raise RuntimeError('half-written plugin')\n")
    listed = limbo(site, "list", "faults")
    assert listed.returncode == 2
    assert listed.stderr.count("\n") == 1 and "Traceback" not in listed.stderr
    assert "broken-ext" in listed.stderr and "half-written plugin" in listed.stderr


# -- registering, in this process -------------------------------------------------------------


@pytest.fixture
def scratch() -> Iterator[Path]:
    """Restore the registry and forget loaded plugin files afterwards."""
    for kind in registry.KINDS:
        entries(kind)  # loaded before the snapshot, so restoring never unloads a built-in
    saved = {kind: dict(table) for kind, table in registry._REGISTRY.items()}
    before = set(sys.modules)
    yield Path()
    registry._REGISTRY.clear()
    registry._REGISTRY.update(saved)
    for name in set(sys.modules) - before:
        if name.startswith("limbo_plugin_"):
            del sys.modules[name]


def _plugin(tmp_path: Path, source: str, name: str = "plug.py") -> Path:
    path = tmp_path / name
    path.write_text(source)
    return path


SHOP = '''
from limbo.sim.results import ok
from limbo.sim.service import OpContext, ReadBack, Service, VersionedTable, View, read, service, write


@service("{name}")
class Shop(Service):
    def __init__(self, seed):
        super().__init__(seed)
        self.rows = VersionedTable()

    @write(readback=lambda a: ReadBack("lookup", {{}}, {{"sku": a["sku"]}}))
    def order(self, ctx: OpContext, sku: str):
        """Order one item."""
        oid = self.mint("o")
        self.rows.put(oid, {{"sku": sku}}, ctx.now)
        ctx.commit({{"sku": sku}}, oid)
        return ok(order_id=oid)

    @read()
    def lookup(self, view: View):
        """Every order."""
        return ok(items=[r for _, r in self.rows.scan(view)])
'''
def _template(name: str) -> list[dict[str, Any]]:
    return [{"id": f"{name}_task", "service": name, "prompt": "Order {sku}, then mail it.",
             "vars": {"sku": {"choice": ["A", "B"]}},
             "steps": [{"id": "order", "tool": f"{name}_order", "args": {"sku": "{sku}"},
                        "intent": {"match": ["sku"]}},
                       {"id": "mail", "tool": "mail_send",
                        "args": {"to": "a@example.com", "subject": "ordered {sku}", "body": "x"},
                        "intent": {"match": ["to", "subject"]}}]}]


def _shop(tmp_path: Path, name: str, template: Any = None) -> Path:
    (tmp_path / "templates").mkdir(exist_ok=True)
    body = template if isinstance(template, str) else json.dumps(template or _template(name))
    (tmp_path / "templates" / f"{name}.json").write_text(body)
    return _plugin(tmp_path, SHOP.format(name=name), f"{name}.py")


def test_a_plugin_file_adds_a_service_with_its_templates(tmp_path: Path, scratch: Path) -> None:
    from limbo.episode.run_one import run_episode

    load_plugin(str(_shop(tmp_path, "zshop")))
    load_plugin(str(_shop(tmp_path, "ashop")))
    tools = [t for t in toolset("native") if t.endswith(("_order", "_lookup"))]
    assert tools == ["ashop_order", "ashop_lookup", "zshop_order", "zshop_lookup"]
    assert list(entries("service")) == sorted(entries("service"))  # never registration order
    assert templates()["zshop_task"].service == "zshop"
    cells = expand(Grid(models=["policy/verify"], services=["zshop"],
                        faults=["none", "timeout_post"])).cells
    assert {c.focal_write for c in cells} == {"zshop_order", "mail_send"}
    for cell in cells:
        out = run_episode(cell)["outcome"]
        if cell.fault == "none" or cell.focal_write == "zshop_order":  # a strong read-back
            assert out["exactly_once"], cell
        else:  # mail's search lags: an immediate read-back misses the lost mail
            assert out["duplicate"] and out["fault_fired"], cell


def test_listing_services_with_a_plugin_service_does_not_crash(tmp_path: Path) -> None:
    path = _shop(tmp_path, "qshop")
    listed = subprocess.run([LIMBO, "list", "services", "--plugin", str(path)],
                            capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert "qshop_order" in listed.stdout and "billing_create_charge" in listed.stdout


@pytest.mark.parametrize(("template", "message"), [
    ("not json {", "is not valid UTF-8 JSON"),
    ({"id": "x"}, "must hold a JSON list"),
    ([{"id": "bad_svc", "service": "billing", "prompt": "p", "steps": []}],
     "says service 'billing', but the file is shipped by service 'bshop'"),
    ([{"id": "bad_tool", "service": "bshop", "prompt": "p",
       "steps": [{"id": "s", "tool": "bshop_nosuch", "args": {}}]}],
     "calls unknown tool 'bshop_nosuch'"),
    ([{"id": "bad_row", "service": "bshop", "prompt": "p",
       "steps": [{"id": "s", "tool": "bshop_order", "args": {"sku": "a"},
                  "intent": {"per_row": True}}]}], "per_row must be false"),
    ([{"id": "Bad Id", "service": "bshop", "prompt": "p", "steps": []}], "template 0: id"),
    ([{"id": "charge_invoice", "service": "bshop", "prompt": "p", "steps": []}],
     "template 'charge_invoice' is defined twice"),
])
def test_a_broken_template_file_is_one_usage_error_naming_it(
        tmp_path: Path, scratch: Path, template: Any, message: str) -> None:
    load_plugin(str(_shop(tmp_path, "bshop", template)))
    with pytest.raises(UsageError, match=message) as err:
        templates()
    assert "bshop.json" in str(err.value)


KIND_BASES = [
    ("from limbo.sim.service import service as deco", "limbo.sim.service.Service"),
    ("from limbo.sim.fault import fault as deco", "limbo.sim.fault.Fault"),
    ("from limbo.episode.condition import condition\n"
     "deco = lambda n: condition(n, 'summary')", "limbo.episode.condition.Condition"),
    ("from limbo.harnesses.policies import policy as deco", "limbo.harnesses.policies.Policy"),
    ("from limbo.episode.models import model_adapter as deco", "limbo.episode.models.ModelAdapter"),
]


@pytest.mark.parametrize(("imports", "base"), KIND_BASES)
def test_a_class_of_the_wrong_base_is_refused_naming_the_base(
        tmp_path: Path, scratch: Path, imports: str, base: str) -> None:
    path = _plugin(tmp_path, f"{imports}\n\n@deco('wrong')\nclass Wrong(dict):\n    pass\n")
    with pytest.raises(UsageError, match=f"must subclass {base} \\(it is based on dict\\)"):
        load_plugin(str(path))


def test_a_function_is_not_a_harness(tmp_path: Path, scratch: Path) -> None:
    path = _plugin(tmp_path, "from limbo.episode.harness import harness\n\n@harness('loop')\n"
                             "def loop():\n    pass\n")
    with pytest.raises(UsageError, match="harness 'loop': .*loop must be a class, not a function"):
        load_plugin(str(path))


def test_a_harness_without_the_protocol_is_refused_naming_what_is_missing(
        tmp_path: Path, scratch: Path) -> None:
    path = _plugin(tmp_path, "from limbo.episode.harness import harness\n\n@harness('half')\n"
                             "class Half:\n    async def run(self):\n        pass\n")
    with pytest.raises(UsageError, match="does not implement limbo.episode.harness.Harness "
                                         r"\(missing: start, stop, availability\)"):
        load_plugin(str(path))
    assert "half" not in entries("harness")


@pytest.mark.parametrize(("body", "message"), [
    ("@fault('x1')\nclass X(Fault):\n    name = 'x1'\n", "sets 'name' itself"),
    ("@fault('timeout_pre')\nclass X(Fault):\n    pass\n", "registered twice"),
    ("@fault('x2')\n@fault('x3')\nclass X(Fault):\n    pass\n", "already registered as 'x3'"),
    ("@fault('Has Space')\nclass X(Fault):\n    pass\n", "fault name 'Has Space' must match"),
    ("@fault('x4')\nclass X(Fault):\n    family = 'lost'\n", "family 'lost' is not one of"),
    ("@fault('x5')\nclass X(Fault):\n    family = 'phantom'\n", "must be one of its families"),
    ("@fault('x6')\nclass X(Fault):\n    group = 'oops'\n", "group 'oops' is not one of"),
])
def test_a_name_is_written_once_and_metadata_is_checked(
        tmp_path: Path, scratch: Path, body: str, message: str) -> None:
    path = _plugin(tmp_path, f"from limbo.sim.fault import Fault, fault\n\n{body}")
    with pytest.raises(UsageError, match=message):
        load_plugin(str(path))


@pytest.mark.parametrize(("prompts", "files", "message"), [
    (("vanilla", "mine"), {}, "no prompt file mine.txt"),
    (("../vanilla",), {}, "must match"),
    (("mine",), {"mine.txt": b"\xff\xfe not utf-8"}, "is not UTF-8 text"),
])
def test_a_condition_names_prompt_files_it_ships(tmp_path: Path, scratch: Path, prompts: Any,
                                                 files: dict[str, bytes], message: str) -> None:
    (tmp_path / "prompts").mkdir()
    for name, data in files.items():
        (tmp_path / "prompts" / name).write_bytes(data)
    path = _plugin(tmp_path, "from limbo.harnesses.conditions import Condition, condition\n\n"
                             f"@condition('mine', 'a summary', {prompts!r})\n"
                             "class Mine(Condition):\n    pass\n")
    with pytest.raises(UsageError, match=message):
        load_plugin(str(path))
    assert "mine" not in entries("condition")


def test_a_plugin_condition_extends_vanilla_with_its_own_file(tmp_path: Path,
                                                              scratch: Path) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "mine.txt").write_text("Count to three before every write.\n")
    load_plugin(str(_plugin(tmp_path, "from limbo.harnesses.conditions import Condition, "
                                      "condition\n\n@condition('mine', 's', ('vanilla', 'mine'))\n"
                                      "class Mine(Condition):\n    pass\n")))
    mine, vanilla = entries("condition")["mine"](), entries("condition")["vanilla"]()
    assert mine.kind == "prompt" and mine.summary == "s"
    assert mine.system_prompt() == vanilla.system_prompt() + "\nCount to three before every " \
                                                             "write.\n"
    assert mine.prompt_hashes() == {**vanilla.prompt_hashes(),
                                    "mine": digest("Count to three before every write.\n")}


def test_a_condition_defined_outside_any_file_uses_the_built_in_prompts(scratch: Path) -> None:
    namespace: dict[str, Any] = {"__name__": "not_a_module"}
    exec("from limbo.harnesses.conditions import Condition, condition\n"
         "@condition('inline', 'made in a session', ('vanilla', 'rules'))\n"
         "class Inline(Condition):\n    pass\n", namespace)
    inline, rules = entries("condition")["inline"](), entries("condition")["rules"]()
    assert inline.system_prompt() == rules.system_prompt()


def _harness(tmp_path: Path, name: str, answer: str) -> None:
    """Load a plugin harness (the minimal loop) whose availability() runs ``answer``."""
    load_plugin(str(_plugin(tmp_path, "from limbo.episode.harness import harness\n"
                                      "from limbo.harnesses.minimal import MinimalHarness\n\n"
                                      f"@harness({name!r})\nclass H(MinimalHarness):\n"
                                      f"    @classmethod\n    def availability(cls):\n"
                                      f"        {answer}\n", f"{name}.py")))


def test_an_unavailable_harness_is_dropped_with_its_reason_counted(tmp_path: Path,
                                                                   scratch: Path) -> None:
    _harness(tmp_path, "elsewhere", "return False, 'needs the elsewhere CLI\\n(see docs)'")
    exp = expand(Grid(harnesses=["minimal", "elsewhere"], templates=["charge_invoice"]))
    assert {c.harness for c in exp.cells} == {"minimal"}
    assert exp.dropped == {"harness elsewhere is not available here: needs the elsewhere CLI "
                           "(see docs)": len(exp.cells)}
    with pytest.raises(UsageError, match="unknown harness 'nowhere'"):
        expand(Grid(harnesses=["nowhere"]))


def test_a_harness_whose_answer_is_malformed_is_a_usage_error(tmp_path: Path,
                                                               scratch: Path) -> None:
    _harness(tmp_path, "vague", "return 'maybe'")
    with pytest.raises(UsageError, match=r"harness vague: availability\(\) must return "
                                         r"\(bool, str\), not 'maybe'"):
        expand(Grid(harnesses=["vague"], templates=["charge_invoice"]))
    listed = "\n".join(listing("harnesses"))
    assert "vague" in listed and "must return (bool, str)" in listed  # listed, not a crash
    assert "minimal" in listed and "(available: built in)" in listed


def test_a_harness_whose_check_fails_is_a_usage_error(tmp_path: Path, scratch: Path) -> None:
    _harness(tmp_path, "flaky", "raise OSError('no PATH')")
    with pytest.raises(UsageError, match="harness flaky: checking whether it can run failed: "
                                         "OSError: no PATH"):
        expand(Grid(harnesses=["flaky"], templates=["charge_invoice"]))


def test_the_policy_example_of_docs_plugins_runs_from_the_command_line(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "plugins.md").read_text().split("## A reference policy in a file")[1]
    (tmp_path / "slow_verify.py").write_text(text.split("```python\n")[1].split("```")[0])
    base = ["run", "--plugin", "slow_verify.py", "--template", "charge_invoice", "--fault",
            "timeout_post", "--out", "out", "--quiet"]
    ran = limbo(tmp_path, *base, "--model", "policy/slow-verify?wait=90", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    records = _records(tmp_path / "out")
    assert records and all(r["outcome"]["exactly_once"] for r in records)
    waits = [e for r in records for e in r["events"] if e["type"] == "clock"
             and e["reason"] == "wait"]
    assert waits and {e["seconds"] for e in waits} == {90.0}
    bad = limbo(tmp_path, *base, "--model", "policy/slow-verify?wait=-1", cwd=tmp_path)
    assert bad.returncode == 2
    assert "policy/slow-verify: wait must be a number of seconds in [0, 3600]" in bad.stderr
