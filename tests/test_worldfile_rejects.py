"""Every world file that would fail at run time is refused before it runs, in one line naming
the file, the line and the key path, by `limbo world check` (exit 1), `limbo run --world` and
`limbo episode --world` (exit 2), never with a traceback and never leaving a run directory.

Each case is the shop example (examples/worlds/shop.toml) with one thing broken, as a user
would break it. Every one passed `limbo world check` before this file's rules (3fac420); run
then, they crashed with a traceback (an empty enum; arguments named class, self,
model_config), ended episodes ``infra_error`` (an intent naming a value the agent's own step
saves: ``KeyError``; a setup step the world refuses; parameters that fill memory) or made the
task unsolvable (min above max, a step value its tool refuses, an intent its step does not
satisfy), ran 0 episodes with exit 0 (no template), or mis-ran quietly: a key never honoured,
a lag that never applies, a read-back its read refuses (a duplicate more under ``verify``), a
default an agent that leaves the argument out would crash the service with. The strict-type
cases (``proxy = "yes"``, ``atomic = 1``) ran as lax parsing guessed, or refused the run as a
proxy world. The rest of the format's rules are in test_worldfile_check.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.hostile import LIMBO

from limbo.cli import main

ROOT = Path(__file__).resolve().parents[1]
SHOP = (ROOT / "examples" / "worlds" / "shop.toml").read_text(encoding="utf-8")
TASKS = SHOP.index("# -- tasks")

SMS_INTENT = 'intent = { match = ["phone"], contains = { text = "Order received: {quantity} x {sku}" } }'
EMAIL_ARGS = 'args.to = { type = "string" }'
LIMIT = 'args.limit = { type = "integer", default = 20, min = 1, max = 100 }'
QUANTITY = 'args.quantity = { type = "integer", min = 1, max = 50 }'
SKU = 'args.sku = { type = "string", enum = ["MUG-01", "TEE-02", "CAP-03", "BAG-04", "PEN-05"] }'
PACK = 'args = { order_id = "{order}", status = "packed", expected_status = "placed" }'
ORDER_STEP = 'args = { customer_id = "{customer}", sku = "{sku}", quantity = "{quantity}" }'
SETUP_ORDER = 'args = { customer_id = "{customer}", sku = "PEN-05", quantity = 1 }'
SAVE = 'save = { order_id = "order_id" }'
PACK_STEP = '[[templates.setup]]\nid = "pack"'
CUSTOMER = 'args.customer_id = { type = "string", description = "the customer, e.g. cus_104" }'
PHONE = 'vars.phone = { format = "+1555010{instance}" }'
BOMB = "".join(f'\nvars.x{i} = {{ format = "' + (f"{{x{i - 1}}}" if i else "ten chars!") * 10 + '" }'
               for i in range(40))  # 10^40 characters by x39: memory, then the machine, ran out
SAVED_AT = 'match = ["phone", "text"] }\n\n[[templates]]\nid = "shop_refund_email"'

# (id, text to find in the shop file, its replacement, text on the line the problem is at,
# the key path the line names, what the message says)
CASES = [
    ("intent matches a value the agent's step saves", SMS_INTENT,
     'intent = { match = ["phone", "text"] }', SAVED_AT,
     "templates[0].steps[1].intent", "which step 'order' saves from the agent's call"),
    ("intent contains a value the agent's step saves", SMS_INTENT,
     'intent = { match = ["phone"], contains = { text = "({order_id})" } }',
     'contains = { text = "({order_id})" }', "templates[0].steps[1].intent",
     "the intent's contains on text uses {order_id}"),
    ("intent matches a field its step does not pass",
     (ORDER_STEP, CUSTOMER), (ORDER_STEP.replace('customer_id = "{customer}", ', ""),
                              CUSTOMER.replace("}", ", required = false }")),
     'intent = { match = ["customer_id", "sku", "quantity"] }',
     "templates[0].steps[0].intent.match", "the intent matches 'customer_id', which the step "
                                           "does not pass"),
    ("default of another type", LIMIT, LIMIT.replace("default = 20", 'default = "x"'),
     'default = "x"', "services.shop.reads.list_orders.args.limit.default",
     "default 'x' is not an integer (min 1, max 100)"),
    ("default out of bounds", LIMIT, LIMIT.replace("default = 20", "default = 500"),
     "default = 500", "services.shop.reads.list_orders.args.limit.default",
     "default 500 is not an integer (min 1, max 100)"),
    ("default not in the enum", SKU, SKU.replace("enum", 'default = "HAT-09", enum'),
     'default = "HAT-09"', "services.shop.writes.create_order.args.sku.default",
     "default 'HAT-09' is not a string, one of the enum"),
    ("enum lists no value", SKU, 'args.sku = { type = "string", enum = [] }', "enum = []",
     "services.shop.writes.create_order.args.sku", "enum lists no value"),
    ("enum of words on an integer", EMAIL_ARGS,
     EMAIL_ARGS + '\nargs.priority = { type = "integer", enum = ["high"], required = false }',
     'enum = ["high"]', "services.notify.writes.send_email.args.priority.enum",
     "enum value 'high' is not an integer: Input should be a valid integer"),
    ("min above max", QUANTITY, QUANTITY.replace("min = 1, max = 50", "min = 50, max = 1"),
     "min = 50, max = 1", "services.shop.writes.create_order.args.quantity",
     "min = 50 is above max = 1"),
    ("min_length above max_length", 'max_length = 320', 'min_length = 400, max_length = 320',
     "min_length = 400", "services.notify.writes.send_sms.args.text",
     "min_length = 400 is above max_length = 320"),
    ('proxy = "yes"', 'description = "Messages to customers"',
     'description = "Messages to customers"\nproxy = "yes"', 'proxy = "yes"',
     "services.notify.proxy", "Input should be a valid boolean: write true or false"),
    ("a required flag in quotes", EMAIL_ARGS,
     EMAIL_ARGS + '\nargs.cc = { type = "string", required = "no" }', 'required = "no"',
     "services.notify.writes.send_email.args.cc.required", "valid boolean"),
    ("atomic as a number", 'batch = { units = "lines", unit = "line" }',
     'batch = { units = "lines", unit = "line", atomic = 1 }', "atomic = 1",
     "services.shop.writes.add_lines.batch.atomic", "valid boolean"),
    ("per_row in quotes", "intent = { per_row = true }", 'intent = { per_row = "yes" }',
     'per_row = "yes"', "templates[3].steps[0].intent.per_row", "valid boolean"),
    ("an argument named class", EMAIL_ARGS,
     EMAIL_ARGS + '\nargs.class = { type = "string", required = false }', "args.class",
     "services.notify.writes.send_email.args.class", "'class' is reserved in Python"),
    ("an argument named self", EMAIL_ARGS,
     EMAIL_ARGS + '\nargs.self = { type = "string", required = false }', "args.self",
     "services.notify.writes.send_email.args.self", "'self' is reserved in Python"),
    ("an argument pydantic would drop", EMAIL_ARGS,
     EMAIL_ARGS + '\nargs._cc = { type = "string", required = false }', "args._cc",
     "services.notify.writes.send_email.args._cc", "starts with _"),
    ("an argument in pydantic's namespace", EMAIL_ARGS,
     EMAIL_ARGS + '\nargs.model_config = { type = "string", required = false }',
     "args.model_config", "services.notify.writes.send_email.args.model_config",
     "starts with model_"),
    ("a setup value of another type", SETUP_ORDER, SETUP_ORDER.replace("quantity = 1",
                                                                       'quantity = "one"'),
     'quantity = "one"', "templates[3].setup[0].args.quantity",
     "argument quantity = 'one' is not a value it accepts"),
    ("a step parameter of another type", ORDER_STEP,
     ORDER_STEP.replace('quantity = "{quantity}"', 'quantity = "{sku}"'), 'quantity = "{sku}"',
     "templates[0].steps[0].args.quantity", "(one of the choice of sku)"),
    ("a step value out of its bounds", 'vars.quantity = { range = [1, 9, 1] }',
     'vars.quantity = { range = [1, 90, 1] }', ORDER_STEP,
     "templates[0].steps[0].args.quantity", "(the highest of quantity)"),
    ("a rows field with nothing to pick", 'fields = { sku = ["MUG-01", "TEE-02", "CAP-03", '
                                          '"BAG-04", "PEN-05"]',
     "fields = { sku = []", "vars.lines = { rows", "templates[3].vars.lines",
     "rows field 'sku' lists no value"),
    ("a variable named as LIMBO's instance", 'vars.phone = { format = "+1555010{instance}" }',
     'vars.phone = { format = "+1555010{instance}" }\nvars.instance = { range = [1, 3, 1] }',
     "vars.instance", "templates[0].vars.instance", "which LIMBO sets itself"),
    ("a save into a field that holds no table", SAVE, 'save = { order_id = "order_id.id" }',
     'save = { order_id = "order_id.id" }', "templates[0].steps[0].save",
     "but order_id holds no table"),
    ("a key honoured for values of another type", 'key = "honoured"',
     'key = { honoured_when = { quantity = ["5"] } }', "honoured_when",
     "services.shop.writes.create_order.key", "which quantity cannot be"),
    ("a lag by an integer keyed by words", "lag_s = 60",
     'lag_s = { by = "page", values = { first = 0 }, default = 60 }\n'
     'args.page = { type = "integer", default = 1 }', 'lag_s = { by = "page"',
     "services.shop.reads.search_orders.lag_s", "but page is an integer"),
    ("two id fields for one record kind", "[services.shop.writes.refund_order]",
     '[services.shop.writes.reorder]\ndescription = "Place an order again."\n'
     'effect = ["customer_id"]\nrecord = "order"\nid_field = "order_ref"\n'
     'args.customer_id = { type = "string" }\n\n[services.shop.writes.refund_order]',
     'id_field = "order_ref"', "services.shop.writes.reorder.id_field",
     "but create_order makes 'order' records with id_field = 'order_id'"),
    ("a read filtering on a field its records lack", 'search = { arg = "query", fields = '
                                                     '["customer_id", "sku"] }',
     'search = { arg = "query", fields = ["customer", "sku"] }', 'fields = ["customer", "sku"]',
     "services.shop.reads.search_orders.search", "search names 'customer', a field the records"),
    ("a change requiring a field its records lack", 'when = { status = "placed" }',
     'when = { state = "placed" }', 'when = { state = "placed" }',
     "services.shop.writes.refund_order.when", "when names 'state', a field the records"),
    ("a read-back argument its read refuses", 'id_prefix = "ord"\n',
     'id_prefix = "ord"\nread_back = { tool = "list_orders", args = { limit = "ten" } }\n',
     'read_back = { tool', "services.shop.writes.create_order.read_back",
     "read_back.args.limit = 'ten' is no value"),
    ("a setup step the world refuses", PACK,
     PACK.replace('expected_status = "placed"', 'expected_status = "shipped"'),
     PACK_STEP, "templates[2].setup[1]",
     "its own plan, followed with no fault, ends infra_error"),
    ("a setup step naming an id by hand", PACK, PACK.replace('"{order}"', '"ord_001"'),
     PACK_STEP, "templates[2].setup[1]", "'no order ord_001'"),
    ("an intent its own step does not satisfy", SMS_INTENT,
     SMS_INTENT.replace("Order received", "Order placed"), "Order placed",
     "templates[0].steps[1].intent", "does not produce the effect of intent sms"),
    ("parameters that grow past memory once drawn", PHONE, PHONE + BOMB, "vars.x4 =",
     "templates[0].vars.x4", "variable 'x4' can reach 1,044,440 characters once its "
                             "parameters are filled; at most 1,000,000"),
    ("a world with no template", SHOP[TASKS:], "", "[world]", "world",
     "the world declares no template"),
]


def _write(tmp_path: Path, old: str | tuple[str, ...],
           new: str | tuple[str, ...]) -> tuple[Path, str]:
    """The shop file with ``old`` replaced by ``new`` (each of several, given as tuples)."""
    text = SHOP
    for was, now in zip(*((old,), (new,)) if isinstance(old, str) else (old, new), strict=True):
        assert text.count(was) == 1, was
        text = text.replace(was, now)
    path = tmp_path / "shop.toml"
    path.write_text(text, encoding="utf-8")
    return path, text


def _line(text: str, marker: str) -> int:
    assert text.count(marker) == 1, marker
    return text.count("\n", 0, text.index(marker)) + 1


def _refused(capsys: pytest.CaptureFixture[str], path: Path, out: Path) -> list[str]:
    """What `world check`, `run --world` and `episode --world` print, each checked to refuse
    without a traceback or a run directory: the check's lines, then run's and episode's."""
    code = main(["world", "check", str(path)])
    checked = capsys.readouterr()
    assert code == 1 and checked.err == "", checked
    said = checked.out.splitlines()
    for argv in (["run", "--world", str(path), "--out", str(out), "--quiet"],
                 ["episode", "--world", str(path), "--template", "shop_ship", "--json"]):
        code = main(argv)
        done = capsys.readouterr()
        assert code == 2 and done.out == "" and "Traceback" not in done.err, done
        said += done.err.splitlines()
    assert not out.exists()
    return said


@pytest.mark.parametrize(("name", "old", "new", "marker", "key", "says"), CASES,
                         ids=[c[0] for c in CASES])
def test_a_world_that_would_fail_at_run_time_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, old: str | tuple[str, ...],
        new: str | tuple[str, ...], marker: str, key: str, says: str) -> None:
    path, text = _write(tmp_path, old, new)
    problem, summary, run, episode = _refused(capsys, path, tmp_path / "run")
    assert problem.startswith(f"{path}:{_line(text, marker)}: {key}: "), problem
    assert says in problem and summary == f"{path}: 1 problem"
    assert run == episode == f"limbo: error: {problem}"


def test_there_are_thirty_such_worlds_or_more() -> None:
    assert len(CASES) >= 30


def _nested(depth: int, open_: str, close: str) -> str:
    return f'[world]\nname = "deep"\nvalue = {open_ * depth}1{close * depth}\n'


@pytest.mark.parametrize(("text", "key"), [
    (_nested(50_000, "[", "]"), "world.value"),
    (_nested(5_000, "{ a = ", " }"), "world.value"),
    ('[world]\nname = "deep"\n[' + ".".join(["t"] * 5_000) + "]\nx = 1\n", "t.t.t.t.t.t.…"),
    (_nested(40, "[", "]"), "world.value.0.0.0.0.…"),
], ids=["a 50,000-deep array", "5,000 nested tables", "a 5,000-part table name",
        "an array 40 deep"])
def test_depth_past_the_limit_is_one_line_not_a_recursion_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, key: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(text, encoding="utf-8")
    problem, summary, run, episode = _refused(capsys, path, tmp_path / "run")
    assert problem == (f"{path}:3: {key}: nested deeper than 32 levels of tables and "
                       f"arrays; a world file needs far fewer: write the values flat")
    assert run == episode == f"limbo: error: {problem}"


def test_a_world_of_more_bytes_than_the_limit_in_a_directory_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory's files count together: 200 files of 1.9 MB each are not one world."""
    (tmp_path / "a.toml").write_text(SHOP[:TASKS], encoding="utf-8")
    (tmp_path / "b.toml").write_text("#" * 1_998_000 + "\n", encoding="utf-8")
    problem, *_ = _refused(capsys, tmp_path, tmp_path / "run")
    assert problem == f"{tmp_path / 'b.toml'}:1: the file is 1,998,001 bytes; a world may " \
                      f"have at most 2,000,000"


def test_a_byte_order_mark_is_accepted(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "shop.toml"
    path.write_bytes(b"\xef\xbb\xbf" + SHOP.encode())
    assert main(["world", "check", str(path)]) == 0
    assert capsys.readouterr().out == (f"{path}: ok — world shop: 2 services (6 writes, 4 "
                                       f"reads), 4 templates\n")
    broken = SHOP.replace(SMS_INTENT, 'intent = { match = ["phone", "text"] }')
    path.write_bytes(b"\xef\xbb\xbf" + broken.encode())  # lines are counted as without it
    line = _line(broken, SAVED_AT)
    assert main(["world", "check", str(path)]) == 1
    assert capsys.readouterr().out.startswith(f"{path}:{line}: templates[0].steps[1].intent: ")


@pytest.mark.parametrize(("old", "new"), [CASES[0][1:3], CASES[-1][1:3], CASES[14][1:3]],
                         ids=["saved-value intent", "no template", "argument named class"])
def test_the_real_command_line_refuses_them_too(tmp_path: Path, old: str, new: str) -> None:
    """Through the installed `limbo`, as a user types it: the same one line, exit 1 or 2."""
    path, _ = _write(tmp_path, old, new)
    lines = []
    for argv, code in ((["world", "check", str(path)], 1),
                       (["run", "--world", str(path), "--out", str(tmp_path / "r")], 2),
                       (["episode", "--world", str(path), "--template", "shop_ship"], 2)):
        done = subprocess.run([LIMBO, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == code and "Traceback" not in done.stdout + done.stderr, done
        lines.append((done.stdout if code == 1 else done.stderr).splitlines()[0])
    assert lines[1] == lines[2] == f"limbo: error: {lines[0]}"
    assert not (tmp_path / "r").exists()
