"""Only the user's own Ctrl-C stops a run. A plugin that raises ``KeyboardInterrupt`` (or
``SystemExit``) itself ends its own episode as ``infra_error`` with the reason; the other
models' cells complete, and the exit status says the run had errors. Each case runs the real
``limbo`` process, whose SIGINT handler counts the signals it receives."""

from __future__ import annotations

import pytest
from support.hostile import records, spawn, write_plugin

RAISES = '''
from limbo.episode.models import model_adapter
from limbo.harnesses.policies import PolicyAdapter


@model_adapter("{name}")
class Raises(PolicyAdapter):
    """Plays policy/verify, and raises {exc} once it has written."""

    def __init__(self, model, **params):
        super().__init__("verify", **params)

    async def generate(self, messages, tools, ctx):
        if len(messages) > 3:
            raise {exc}
        return await super().generate(messages, tools, ctx)
'''


@pytest.mark.parametrize("exc", ["KeyboardInterrupt", "SystemExit(0)"])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_an_adapter_raising_keyboardinterrupt_is_its_own_infra_error(tmp_path, exc: str,
                                                                     workers: str) -> None:
    """Must-show 4."""
    plugin = write_plugin(tmp_path, "raises", RAISES.replace("{name}", "raises")
                          .replace("{exc}", exc))
    out = tmp_path / "out"
    args = ["run", "--model", "raises/x", "--model", "policy/verify", "--plugin", str(plugin),
            "--template", "charge_invoice", "--out", str(out), "--quiet", "--workers", workers]
    first = spawn(*args)
    assert first.returncode == 1, first.stderr  # the run went on, and had errors
    assert "interrupted" not in first.stderr
    got = records(out)
    mine = [r for r in got if r["cell"]["model"] == "raises/x"]
    others = [r for r in got if r["cell"]["model"] == "policy/verify"]
    assert len(mine) == len(others) == 48
    assert {r["outcome"]["termination"] for r in mine} == {"infra_error"}
    name = exc.split("(")[0]
    assert all(f"adapter raises/x raised {name}" in r["outcome"]["termination_reason"]
               for r in mine)
    assert "infra_error" not in {r["outcome"]["termination"] for r in others}
    assert f"48 × infra_error: adapter raises/x raised {name}" in first.stdout
    again = spawn(*args)  # a re-run does not stop the same way either
    assert again.returncode == 1 and "ran 0 episodes, 96 already done" in again.stdout


def test_a_plugin_raising_keyboardinterrupt_at_import_is_one_line(tmp_path) -> None:
    plugin = write_plugin(tmp_path, "kbi", "raise KeyboardInterrupt\n")
    result = spawn("list", "models", "--plugin", str(plugin))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"limbo: error: plugin {plugin} failed to load: KeyboardInterrupt"]
    assert "re-run" not in result.stderr
