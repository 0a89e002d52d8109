"""A key the server echoes back base64-encoded, percent-encoded or JSON-escaped is masked like
the key itself: in the records, the manifest, what the run and ``limbo status`` print, and the
report."""

from __future__ import annotations

import base64
import gzip
import json
import re
from pathlib import Path
from urllib.parse import quote, unquote

import pytest
from support.bad_server import BadServer, Reply
from support.hostile import cli

from limbo.base.secrets import scrubber

KEY = "sk-LIMBOTESTSECRET123+/xy"
MARK = "LIMBOTESTSECRET"


def forms(key: str) -> dict[str, str]:
    raw = key.encode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "basic auth": "Basic " + base64.b64encode(b"user:" + raw).decode(),
        "base64, offset 2": base64.b64encode(b"ab" + raw + b"!").decode(),
        "url-safe base64": base64.urlsafe_b64encode(b"a" + raw).decode(),
        "percent-encoded": quote(key, safe=""),
        "json-escaped": json.dumps(json.dumps({"key": key}))[1:-1],
    }


def _leaks(text: str, key: str) -> list[str]:
    """The readings of ``text`` that still show the key: as it is, percent-decoded,
    JSON-unescaped, and every base64-looking run of it decoded at each of its alignments, in
    both alphabets (independent of how the masking finds them)."""
    readings = [text, unquote(text), text.replace("\\\\", "\\").replace('\\"', '"')]
    for token in re.findall(r"[A-Za-z0-9+/_-]{12,}", text):
        for shift in range(4):
            chunk = token[shift:][:(len(token) - shift) // 4 * 4]
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    readings.append(decode(chunk).decode("latin-1"))
                except ValueError:
                    continue
    return [r[:80] for r in readings if key[3:18] in r]


@pytest.mark.parametrize("label", list(forms(KEY)))
def test_every_form_of_a_key_is_masked(monkeypatch, label: str) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    text = f"the server said: {forms(KEY)[label]} (end)"
    masked = scrubber()(text)
    assert _leaks(masked, KEY) == [] and "***" in masked
    assert masked.startswith("the server said: ") and masked.endswith(" (end)")


def _report_text(report: Path) -> str:
    """Every file of the report, the gzip-compressed episode payloads decoded."""
    parts = []
    for path in report.rglob("*"):
        if not path.is_file() or path.suffix == ".png":
            continue
        text = path.read_text(errors="replace")
        parts.append(text)
        for payload in re.findall(r"[A-Za-z0-9+/]{200,}={0,2}", text):
            try:
                parts.append(gzip.decompress(base64.b64decode(payload)).decode())
            except (OSError, ValueError):
                continue
    return "\n".join(parts)


def test_a_key_echoed_in_base64_reaches_no_file_and_no_output(capsys, tmp_path,
                                                               monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    echo = forms(KEY)["basic auth"]
    body = json.dumps({"error": {"message": f"rejected header Authorization: {echo}"}}).encode()
    out = tmp_path / "run"
    with BadServer(Reply(400, body)) as server:
        run = cli(capsys, "run", "--model", f"openai/m?api=chat&base_url={server.url}",
                  "--template", "charge_invoice", "--fault", "none", "--contract", "native",
                  "--no-cache", "--quiet", "--out", str(out))
    assert run.code == 1  # every cell ended in model_error (HTTP 400)
    records = (out / "episodes.jsonl").read_text()
    assert "rejected header Authorization: Basic " in records  # the reason is kept...
    status = cli(capsys, "status", str(out))
    report = cli(capsys, "report", str(out), "--out", str(tmp_path / "report"))
    assert report.code == 0, report.err
    everything = [run.out, run.err, records, (out / "manifest.json").read_text(), status.out,
                  _report_text(tmp_path / "report")]
    assert "Basic " in everything[-1]  # the report really holds the reasons
    for text in everything:  # ... without the key in any form
        assert MARK not in text and _leaks(text, KEY) == [], text[:300]
