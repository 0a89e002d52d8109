"""`limbo world check`: a world file's every problem is one line naming its file and line,
never a traceback; a good file is one summary line; the published JSON Schema is the
format's own.

Each broken file below is the shop example (examples/worlds/shop.toml) with one thing broken,
so the line a problem should be reported at is the line of what was broken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from limbo.cli import main
from limbo.sim.worldfile.format import schema_text
from limbo.sim.worldfile.lines import Lines

ROOT = Path(__file__).resolve().parents[1]
SHOP = ROOT / "examples" / "worlds" / "shop.toml"
TEXT = SHOP.read_text(encoding="utf-8")

# (name, text to find in the shop file, its replacement, the text on the line the problem must
# be reported at (once in the broken file), what the message says)
BROKEN = [
    ("unknown field", 'reversible = false\nrecord = "email"',
     'reversible = false\ncolour = "red"\nrecord = "email"', 'colour = "red"',
     "unknown field 'colour'"),
    ("a read lists a tool that does not exist", 'lists = ["add_lines"]',
     'lists = ["add_line"]', 'lists = ["add_line"]',
     "lists 'add_line', which is not a write of shop; did you mean 'add_lines'?"),
    ("a focal write that is not a step", 'focal = ["ship"]', 'focal = ["order"]',
     'focal = ["order"]', "focal 'order' is not a step of template 'shop_ship'"),
    ("a focal write that is a read", 'focal = ["ship"]', 'focal = ["ship", "look"]',
     'focal = ["ship", "look"]', None),
    ("a template parameter that no instance sets", 'text = "Your order {order} has shipped" }',
     'text = "Your order {order} has shipped to {city}" }', 'has shipped to {city}',
     "uses {city}, which no variable"),
    ("an effect naming a missing argument", 'effect = ["to", "subject", "body"]',
     'effect = ["to", "subject", "message"]', 'effect = ["to", "subject", "message"]',
     "effect names 'message', which is not an argument of notify_send_email"),
    ("not valid TOML", 'id_prefix = "ln"', 'id_prefix = "ln', 'id_prefix = "ln\n',
     "not valid TOML"),
    ("a word where a number was", 'args.quantity = { type = "integer", min = 1, max = 50 }',
     'args.quantity = { type = "integer", min = 1, max = "fifty" }', 'max = "fifty"',
     "max: Input should be a valid number"),
    ("an unknown argument type", 'args.body = { type = "string" }',
     'args.body = { type = "text" }', '{ type = "text" }', "type: Input should be 'string'"),
    ("a lag that is not one", "lag_s = 60", 'lag_s = "a while"', 'lag_s = "a while"',
     "lag_s: Input should be a valid number"),
    ("a service named as a built-in one", "notify", "deploy", "[services.deploy]\n",
     "service 'deploy' is already a LIMBO service"),
    ("a template id used twice", 'id = "shop_add_lines"', 'id = "shop_ship"',
     'id = "shop_ship"\nprompt = "Add', "template id 'shop_ship': another template has this id"),
    ("a template id LIMBO already has", 'id = "shop_add_lines"', 'id = "charge_invoice"',
     'id = "charge_invoice"', "LIMBO already has a template"),
    ("a step calling an unknown tool", 'tool = "notify_send_email"', 'tool = "notify_send_mail"',
     'tool = "notify_send_mail"', "calls unknown tool 'notify_send_mail'"),
    ("a step passing an unknown argument", 'args = { order_id = "{order}" }\nintent',
     'args = { order_id = "{order}", reason = "late" }\nintent', 'reason = "late"',
     "shop_refund_order takes no argument 'reason'"),
    ("a batch step not per row", "intent = { per_row = true }",
     'intent = { match = ["order_id", "lines"] }', 'intent = { match = ["order_id", "lines"] }',
     "per_row must be true for shop_add_lines"),
    ("an update without a target", 'record = "order"\ntarget = "order_id"\nwhen = ',
     'record = "order"\nwhen = ', "[services.shop.writes.refund_order]",
     "shop_refund_order (update) needs target"),
    ("a read_back through a read that does not list the write",
     'id_prefix = "ln"\n', 'id_prefix = "ln"\nread_back = { tool = "list_orders" }\n',
     'read_back = { tool = "list_orders" }', "read_back names 'list_orders', which does not "
                                            "list 'add_lines'"),
    ("a key honoured for a value the argument cannot take", 'key = "honoured"',
     'key = { honoured_when = { sku = ["HAT-09"] } }', "key = { honoured_when",
     "key is honoured_when sku = 'HAT-09', which is not one of its values"),
    ("batch units that are not objects", 'args.lines = { type = "list", items = "object"',
     'args.lines = { type = "list", items = "string"', "batch = {",
     "must be a list argument of shop_add_lines holding objects"),
    ("a lag by an argument the read does not take", "lag_s = 120",
     'lag_s = { by = "folder", values = { inbox = 0 } }', 'lag_s = { by = "folder"',
     "lag_s is by 'folder', which is not an argument of notify_search_sent"),
    ("a read of two kinds of record", 'lists = ["add_lines"]',
     'lists = ["add_lines", "create_order"]', 'lists = ["add_lines", "create_order"]',
     "lists writes of several record kinds"),
    ("a change to records nothing creates", "[services.shop.reads.list_orders]",
     '[services.shop.writes.cancel]\ndescription = "Cancel a parcel."\neffect = ["parcel_id"]'
     '\naction = "delete"\nrecord = "parcel"\ntarget = "parcel_id"\nargs.parcel_id = { type = '
     '"string" }\n\n[services.shop.reads.list_orders]', 'record = "parcel"',
     "shop_cancel changes 'parcel' records, which no create"),
    ("a required argument left out of a step", 'args = { phone = "{phone}", text = "Your order '
     '{order} has shipped" }', 'args = { text = "Your order {order} has shipped" }',
     'args = { text = "Your order {order} has shipped" }',
     "notify_send_sms needs argument 'phone'"),
    ("a date where a string belongs", 'vars.phone = { format = "+1555010{instance}" }',
     'vars.phone = { format = "+1555010{instance}" }\nvars.day = { choice = [2026-12-01] }',
     "vars.day", "dates and times are not values a world can hold"),
    ("a parameter that cannot be drawn", "vars.quantity = { range = [1, 9, 1] }",
     "vars.quantity = { range = [9, 1, 0] }", "vars.quantity", "range [9, 1, 0] must be"),
    ("a batch a billion rows long", "n = [5, 8]", "n = [5, 1000000000]", "vars.lines",
     "rows n = [5, 1000000000] must be"),
    ("an argument named as a result field", "args.phone = { type = \"string\" }",
     "args.phone = { type = \"string\" }\nargs.ok = { type = \"boolean\", required = false }",
     "args.ok =", "'ok' is a field of every result"),
    ("an argument named as the id the write assigns", 'args.to = { type = "string" }',
     'args.to = { type = "string" }\nargs.message_id = { type = "string", required = false }',
     "args.message_id", "'message_id' is the id notify_send_email assigns"),
    ("a save from a field the result does not have", 'save = { order_id = "order_id" }',
     'save = { order_id = "orderid" }', 'save = { order_id = "orderid" }',
     "saves order_id from 'orderid', which the result of shop_create_order does not have; "
     "did you mean 'order_id'?"),
]


def _line_of(text: str, marker: str) -> int:
    """The line on which ``marker`` (found once in ``text``) starts."""
    assert text.count(marker) == 1, marker
    return text.count("\n", 0, text.index(marker)) + 1


def _check(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(["world", "check", str(path)])
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    return code, out.out.splitlines()


def test_the_shop_example_passes(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _check(SHOP, capsys)
    assert code == 0
    assert lines == [f"{SHOP}: ok — world shop: 2 services (6 writes, 4 reads), 4 templates"]


@pytest.mark.parametrize(("name", "old", "new", "marker", "says"), BROKEN,
                         ids=[b[0] for b in BROKEN])
def test_a_broken_world_gives_one_line_at_the_broken_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, old: str, new: str,
        marker: str, says: str | None) -> None:
    assert old in TEXT, f"the case {name!r} changes nothing"
    text = TEXT.replace(old, new)
    path = tmp_path / "world.toml"
    path.write_text(text, encoding="utf-8")
    code, lines = _check(path, capsys)
    assert code == 1
    assert len(lines) == 2 and lines[1] == f"{path}: 1 problem", lines
    assert lines[0].startswith(f"{path}:{_line_of(text, marker)}: "), lines[0]
    if says is not None:
        assert says in lines[0]


def test_there_are_twenty_broken_files_or_more() -> None:
    assert len(BROKEN) >= 20


@pytest.mark.parametrize(("content", "says"), [
    (b"", "the world declares nothing"),
    (b"[world]\nname = \"x\"\n\xff\xfe\n", "not UTF-8 text (byte 19)"),
    (b"[world]\nname = \"Shop!\"\n[services.a.reads.l]\ndescription = \"d\"\nlists = [\"w\"]\n",
     "world.name: String should match pattern"),
    (b"[world]\nname = \"x\"\n[services.a.writes.w]\ndescription = \"d\"\neffect = [\"v\"]\n"
     b"set = { v = nan }\n", "w.toml:6: services.a.writes.w.set.v: nan is not a finite number"),
])
def test_files_that_are_not_worlds_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          content: bytes, says: str) -> None:
    path = tmp_path / "w.toml"
    path.write_bytes(content)
    code, lines = _check(path, capsys)
    assert code == 1 and says in lines[0] and len(lines) == 2, lines


def test_missing_huge_and_empty_directory(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = _check(tmp_path / "nope.toml", capsys)
    assert code == 1 and lines[0] == f"{tmp_path / 'nope.toml'}:1: no such file or directory"
    huge = tmp_path / "huge.toml"
    huge.write_bytes(b"# " + b"x" * 2_100_000 + b"\n")
    code, lines = _check(huge, capsys)
    assert code == 1 and "a world file may have at most 2,000,000" in lines[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, lines = _check(empty, capsys)
    assert code == 1 and "the directory holds no *.toml file" in lines[0]


def test_a_world_split_over_a_directory_places_problems_in_their_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    services, templates = TEXT.split("# -- tasks", 1)
    (tmp_path / "a_services.toml").write_text(services, encoding="utf-8")
    broken = templates.replace('tool = "notify_send_email"', 'tool = "notify_send_mail"')
    (tmp_path / "b_templates.toml").write_text("# -- tasks" + broken, encoding="utf-8")
    code, lines = _check(tmp_path, capsys)
    file = tmp_path / "b_templates.toml"
    line = _line_of("# -- tasks" + broken, 'tool = "notify_send_mail"')
    assert code == 1 and lines[0].startswith(f"{file}:{line}: templates[1].steps[1].tool: step "
                                             f"'email' calls unknown tool")
    (tmp_path / "c_more.toml").write_text('[services.shop]\ndescription = "again"\n',
                                          encoding="utf-8")
    _, lines = _check(tmp_path, capsys)
    assert f"{tmp_path / 'c_more.toml'}:1: service 'shop' is declared in two files" in lines


def test_every_problem_of_a_file_is_listed(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    text = TEXT
    for _name, old, new, _marker, _says in BROKEN[4:6]:
        text = text.replace(old, new)
    path = tmp_path / "w.toml"
    path.write_text(text, encoding="utf-8")
    code, lines = _check(path, capsys)
    assert code == 1 and lines[-1] == f"{path}: 2 problems" and len(lines) == 3


def test_lines_places_tables_arrays_and_elements() -> None:
    text = ('a = 1\n[t]\nb.c = 2\n[[arr]]\nx = 1\n[[arr.sub]]\ny = 2\n[[arr]]\nx = 3\n'
            'list = [\n  { k = 1 },\n  { k = 2 },\n]\ns = """\n[not.a.table]\n"""\nz = 4\n')
    lines = Lines(text)
    assert lines.line(("a",)) == 1 and lines.line(("t", "b", "c")) == 3
    assert lines.line(("arr", 0, "x")) == 5 and lines.line(("arr", 0, "sub", 0, "y")) == 7
    assert lines.line(("arr", 1, "x")) == 9 and lines.line(("arr", 1, "list", 1, "k")) == 12
    assert lines.line(("arr", 1, "z")) == 17 and lines.line(("not", "a", "table")) == 1
    assert lines.line(("arr", 1, "missing")) == 8


def test_the_published_schema_is_the_format() -> None:
    published = (ROOT / "docs" / "world-file.schema.json").read_text(encoding="utf-8")
    assert published == schema_text(), "regenerate: limbo world schema > docs/world-file.schema.json"
    schema = json.loads(published)
    assert schema["title"] == "LIMBO world file"
    assert set(schema["properties"]) == {"world", "services", "templates"}


PROXY = '''
[world]
name = "payments"

[services.pay]
proxy = true

[services.pay.writes.charge]
description = "Charge a card."
effect = ["customer", "amount"]
key = "honoured"
key_scope = "tool"
id_field = "charge_id"
args.customer = { type = "string" }
args.amount = { type = "integer", min = 1 }

[services.pay.writes.refund]
description = "Refund a charge."
effect = ["charge_id"]
key = { honoured_when = { mode = ["async"] } }
args.charge_id = { type = "string" }
args.mode = { type = "string", enum = ["sync", "async"] }

[services.pay.reads.list_charges]
description = "List charges."
lists = ["charge", "refund"]
lag_s = 30

[[templates]]
id = "pay_charge"
prompt = "Charge customer {customer} {amount} cents."
vars.customer = { choice = ["cus_1", "cus_2"] }
vars.amount = { range = [100, 900, 100] }

[[templates.steps]]
id = "charge"
tool = "pay_charge"
args = { customer = "{customer}", amount = "{amount}" }
intent = { match = ["customer", "amount"] }
'''


def test_a_proxy_only_service_is_declared_without_how_to_play_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30's proxy reads this: writes with their effect fields, key support and scope,
    and the reads that list them; no record kinds, no actions."""
    from limbo.sim.worldfile.check import checked

    path = tmp_path / "pay.toml"
    path.write_text(PROXY, encoding="utf-8")
    code, lines = _check(path, capsys)
    assert code == 0 and lines == [f"{path}: ok — world payments: 1 service (2 writes, 1 reads), "
                                   f"1 templates; proxy only: pay"]
    world, _ = checked(path)
    pay = world.services["pay"]
    assert pay.proxy and pay.writes["charge"].key_scope == "tool"
    assert pay.reads["list_charges"].lists == ["charge", "refund"]
    path.write_text(PROXY.replace("proxy = true", "proxy = false"), encoding="utf-8")
    code, lines = _check(path, capsys)
    assert code == 1 and "pay_charge needs record" in lines[0]


def test_a_write_may_give_the_shape_of_its_success_for_the_proxy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: ``result`` is what a success of a write answers (the proxy's phantom
    acknowledgement); its placeholders name the write's arguments, or ``id``."""
    from limbo.sim.worldfile.check import checked

    shape = 'result = { charge_id = "{id}", customer = "{customer}", amount = "{amount}" }\n'
    path = tmp_path / "pay.toml"
    path.write_text(PROXY.replace('id_field = "charge_id"\n', f'id_field = "charge_id"\n{shape}'),
                    encoding="utf-8")
    code, _ = _check(path, capsys)
    world, _ = checked(path)
    assert code == 0 and world.services["pay"].writes["charge"].result == {
        "charge_id": "{id}", "customer": "{customer}", "amount": "{amount}"}
    path.write_text(PROXY.replace('id_field = "charge_id"\n',
                                  f'id_field = "charge_id"\n{shape.replace("{amount}", "{amt}")}'),
                    encoding="utf-8")
    code, lines = _check(path, capsys)
    assert code == 1 and lines[1:] == [f"{path}: 1 problem"]
    assert lines[0].startswith(f"{path}:14: services.pay.writes.charge.result: result names "
                               f"'amt', which is not an argument of pay_charge; did you mean "
                               f"'amount'?")
