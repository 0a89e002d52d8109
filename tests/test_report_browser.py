"""The HTML report in a real browser (headless Debian Chromium through Playwright).

The walk a researcher takes — overview, a duplicate-rate entry of Table 3, its episodes, one
late-commit episode under policy/verify — from ``file://`` with the browser offline, recording
every request the pages make; keyboard use, focus, narrow windows; hostile record content; and
``limbo view`` following a run that is still being written. Screenshots go to
``test-artefacts/report/``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import browser
from support.report_runs import HOSTILE, add_hostile, records, run_slice

from limbo.analysis.report.index import bucket_of
from limbo.cli import main


@pytest.fixture(scope="module")
def chromium():
    browser.require()
    with browser.launch() as b:
        yield b


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("report")
    run = run_slice(root / "run")
    hostile, broken = add_hostile(run)
    out = root / "site"
    assert main(["report", str(run), "--out", str(out)]) == 0
    return {"run": run, "out": out, "hostile": hostile, "broken": broken}


def _page(chromium, **context):
    ctx = chromium.new_context(**context)
    page = ctx.new_page()
    page.seen = {"requests": [], "errors": [], "dialogs": []}
    page.on("request", lambda r: page.seen["requests"].append(r.url))
    page.on("pageerror", lambda e: page.seen["errors"].append(str(e)))
    page.on("console", lambda m: m.type == "error" and page.seen["errors"].append(m.text))
    page.on("dialog", lambda d: (page.seen["dialogs"].append(d.message), d.dismiss()))
    return page


def _entry_link(page, table: int, row: str, column: str):
    section = page.locator(f"#table-{table}")
    header = section.locator("thead th").all_inner_texts()
    tr = section.locator("tbody tr").filter(has=page.locator("th", has_text=row)).first
    return tr.locator("th, td").nth(header.index(column)).locator("a")


def _land_on_entry_episodes(page) -> None:
    """Overview → Table 3's duplicate rate for policy/verify under late commits → its episodes."""
    link = _entry_link(page, 3, "policy/verify", "dup: late commit")
    shown = link.inner_text()
    link.click()
    page.wait_for_selector("#list tbody tr")
    banner = page.locator("#cell-banner").inner_text()
    assert "Table 3" in banner and "policy/verify" in banner and "dup: late commit" in banner
    total = int(re.match(r"([\d,]+) of", page.locator("#summary").inner_text()).group(1))
    assert f"/{total}" in shown  # the entry's denominator is the episode count we landed on
    assert page.locator("#list tbody tr").count() == total
    models = set(page.locator("#list tbody td:nth-child(2)").all_inner_texts())
    faults = set(page.locator("#list tbody td:nth-child(5)").all_inner_texts())
    assert models == {"policy/verify"} and faults <= {"timeout_late", "timeout_late_tail"}


def _late_commit_after_reissue(page) -> None:
    """Both lanes: the fault, then the agent's re-issue, then the late commit; also to scale."""
    reissue = page.locator('#lanes tr[data-lane="agent"][data-tags~="reissue"]').first
    late = page.locator('#lanes tr[data-lane="world"][data-tags~="late"]').first
    fault = page.locator('#lanes tr[data-lane="world"][data-type="fault"]').first
    assert "RE-ISSUE" in reissue.inner_text() and "LATE COMMIT" in late.inner_text()
    assert "timeout_late" in fault.inner_text()
    assert float(fault.get_attribute("data-t")) < float(reissue.get_attribute("data-t")) \
        < float(late.get_attribute("data-t"))
    for row in (reissue, late, fault):  # each in its own lane's cell, the other lane empty
        lane = row.get_attribute("data-lane")
        assert row.locator(f"td.lane.{lane} .item").is_visible()
    strip_reissue = page.locator('svg.strip a[data-tags~="reissue"]').first.bounding_box()
    strip_late = page.locator('svg.strip a[data-tags~="late"]').first.bounding_box()
    assert strip_late["x"] > strip_reissue["x"] + strip_reissue["width"]  # to scale, later


def test_from_a_table_entry_to_the_late_commit_offline(chromium, site) -> None:
    from playwright.sync_api import expect

    page = _page(chromium, offline=True, viewport={"width": 1280, "height": 900})
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto((site["out"] / "index.html").as_uri())
    browser.shot(page, "1-overview", full_page=True)
    _land_on_entry_episodes(page)
    browser.shot(page, "2-entry-episodes", full_page=True)
    page.select_option("#f-fault", "timeout_late")
    page.select_option("#f-duplicate", "yes")
    assert "fault=timeout_late" in page.url
    first = page.locator("#list tbody tr").filter(has_not_text="hostile").first.locator("a")
    episode_id = first.inner_text()
    first.click()
    page.wait_for_selector("#lanes")
    assert page.locator("h1").inner_text().endswith(episode_id)
    lede = page.locator(".lede").inner_text()
    assert "policy/verify" in lede and "timeout_late" in lede
    _late_commit_after_reissue(page)
    for heading in ("Ledger (committed effects)", "Intents", "Final report"):
        assert page.get_by_role("heading", name=heading).is_visible()
    assert page.locator("#ledger tr.dup").count() >= 1
    command = page.locator("#rerun").inner_text()
    assert command == f"limbo episode --from {site['run']} {episode_id}"
    page.locator("#copy").click()
    expect(page.locator(".copied")).to_have_text("copied")
    assert page.evaluate("navigator.clipboard.readText()") == command
    browser.shot(page, "3-episode-late-commit", full_page=True)
    outside = [u for u in page.seen["requests"] if not u.startswith(site["out"].as_uri() + "/")]
    assert page.seen["requests"] and not outside, outside
    assert not page.seen["errors"], page.seen["errors"]
    page.context.close()


def test_keyboard_focus_and_narrow_windows(chromium, site) -> None:
    page = _page(chromium, offline=True, viewport={"width": 1000, "height": 800})
    page.goto((site["out"] / "episodes.html").as_uri())
    page.keyboard.press("Tab")
    skip = page.locator(":focus")
    assert skip.inner_text() == "Skip to content"
    style = skip.evaluate("e => [getComputedStyle(e).outlineStyle, getComputedStyle(e).outlineWidth]")
    assert style[0] != "none" and float(style[1].rstrip("px")) >= 2
    page.locator('button.sort[data-column="agent_time_s"]').focus()
    page.keyboard.press("Enter")
    header = page.locator("th", has=page.locator('button[data-column="agent_time_s"]'))
    assert header.get_attribute("aria-sort") == "ascending"
    times = [float(t.replace(",", "")) for t in page.locator(
        "#list tbody td:nth-child(14)").all_inner_texts()]
    assert times == sorted(times) and len(set(times)) > 1
    page.keyboard.press("Enter")
    assert header.get_attribute("aria-sort") == "descending"
    page.locator("#f-termination").focus()
    page.keyboard.press("ArrowDown")  # keyboard alone picks a filter
    assert "termination=" in page.url

    page.set_viewport_size({"width": 360, "height": 740})
    an_id = records(site["run"])[0]["episode_id"]
    for name, url in (("overview", "index.html"), ("episodes", "episodes.html"),
                      ("episode", f"episode.html#{an_id}")):
        file, _, fragment = url.partition("#")
        page.goto((site["out"] / file).as_uri() + (f"#{fragment}" if fragment else ""))
        if name == "episode":
            page.wait_for_selector("#lanes")
            labels = page.locator("#lanes td.lane.agent .item").first.evaluate(
                "e => getComputedStyle(e.parentElement, '::before').content")
            assert "agent" in labels  # stacked lanes still say which lane, in words
        width = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], f"{name} scrolls sideways at 360 px: {width}"
        browser.shot(page, f"4-narrow-{name}", full_page=True)
    assert not page.seen["errors"], page.seen["errors"]
    page.context.close()


def test_record_content_is_shown_as_text_never_run(chromium, site) -> None:
    page = _page(chromium, offline=True)
    page.goto((site["out"] / "index.html").as_uri())
    assert HOSTILE in page.locator("#errors").inner_text()
    page.goto((site["out"] / "episodes.html").as_uri() + "#q=hostile")
    assert page.locator("#list tbody tr").count() == 2
    page.locator("#list tbody a", has_text="onerror").click()
    page.wait_for_selector("#lanes")
    assert HOSTILE in page.locator("#lanes").inner_text()
    assert HOSTILE in page.locator("#report").inner_text()
    unknown = page.locator('#lanes tr[data-type="later_kind"][data-lane="world"]')
    assert HOSTILE in unknown.inner_text()  # a type this page does not know, shown as stored
    stream = page.locator("#harness")
    assert "CodexHarness" in stream.inner_text() and "thread.started" in stream.inner_text()
    assert HOSTILE in stream.locator("ol.stream").inner_text()
    browser.shot(page, "6-hostile-and-harness-stream", full_page=True)
    page.wait_for_timeout(300)
    assert not page.seen["dialogs"], page.seen["dialogs"]
    assert all(u.startswith(site["out"].as_uri()) for u in page.seen["requests"])
    page.context.close()


def test_the_page_finds_the_bucket_python_wrote(chromium, site) -> None:
    page = _page(chromium)
    page.goto((site["out"] / "index.html").as_uri())
    ids = ["ep-0b450940d92810b4b3f3", "", "épisode-ü", "ep-😀-x", HOSTILE]
    assert page.evaluate("ids => ids.map(i => LIMBO.bucketOf(i, 421))", ids) == \
        [bucket_of(i, 421) for i in ids]
    page.context.close()


def _serve(run: Path) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-c", "from limbo.cli import main; main()", "view",
                             str(run)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    line = proc.stdout.readline()
    match = re.search(r"http://127\.0\.0\.1:\d+/", line)
    assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
    return proc, match.group(0)


def test_view_shows_new_episodes_of_a_run_being_written(chromium, site, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    lines = (site["run"] / "episodes.jsonl").read_bytes().splitlines(keepends=True)
    run = tmp_path / "growing"
    run.mkdir()
    (run / "episodes.jsonl").write_bytes(b"".join(lines[:3]))
    proc, url = _serve(run)
    try:
        page = _page(chromium)
        page.goto(url + "episodes.html")
        page.wait_for_selector("#list tbody tr")
        assert page.locator("#summary").inner_text().startswith("3 of 3")
        page.evaluate("window.stillTheSamePage = true")
        overview = page.context.new_page()
        overview.goto(url)
        assert "3 episodes;" in overview.locator("#status").inner_text()
        with (run / "episodes.jsonl").open("ab") as fh:  # the writer, mid-line
            fh.write(lines[3][:40])
            fh.flush()
            time.sleep(2.5)
            assert page.locator("#summary").inner_text().startswith("3 of 3")
            fh.write(lines[3][40:] + b"".join(lines[4:9]))
        expect(page.locator("#summary")).to_contain_text("9 of 9 episodes", timeout=20000)
        assert page.evaluate("window.stillTheSamePage") is True  # updated in place
        assert "6 new episodes" in page.locator("#live").inner_text()
        expect(overview.locator("#status")).to_contain_text("9 episodes;", timeout=20000)
        browser.shot(page, "5-view-live")
        page.locator("#list tbody a").last.click()
        page.wait_for_selector("#lanes")
        assert not page.seen["errors"], page.seen["errors"]
        outside = [u for u in page.seen["requests"] if not u.startswith(url)]
        assert not outside, outside
        page.context.close()
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def summary_site(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The report of the README's `limbo run` (the default grid) and a `limbo mcp` episode:
    runs no paper table holds."""
    from support.summary_runs import mcp_episode

    root = tmp_path_factory.mktemp("summary-report")
    done = subprocess.run([str(Path(sys.executable).parent / "limbo"), "run", "default",
                           "--out", str(root / "default"), "--workers", "2", "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    mcp_episode(root / "mcp", "http500_post")
    out = root / "site"
    assert main(["report", str(root / "default"), str(root / "mcp"), "--out", str(out)]) == 0
    return {"out": out}


def test_the_overview_opens_on_the_summary_of_every_run(chromium, summary_site) -> None:
    """The first section under the heading is the summary: Table 0 with a row for the mcp
    client beside the reference policies, Figure 0 loaded; an entry leads to its episodes."""
    page = _page(chromium, offline=True, viewport={"width": 1280, "height": 900})
    page.goto((summary_site["out"] / "index.html").as_uri())
    first = page.evaluate("document.querySelector('h1').parentElement"
                          ".querySelector('section').id")
    assert first == "summary"
    section = page.locator("#summary")
    assert section.locator("h3").first.inner_text().startswith("Table 0: Summary")
    heads = section.locator("thead th").all_inner_texts()
    assert heads[:4] == ["arm", "contract", "world", "fault family"]
    arms = set(section.locator("tbody th:first-child").all_inner_texts())
    assert "external/mcp-client · mcp" in arms and "policy/blind" in arms
    image = section.locator("figure#figure-0 img")
    assert page.evaluate("(img) => img.complete && img.naturalWidth > 0", image.element_handle())
    browser.shot(page, "6-summary-first", full_page=False)
    row = section.locator("tbody tr").filter(has=page.locator("th", has_text="mcp")).first
    link = row.locator("td a").nth(heads.index("dup") - 4)
    shown = link.inner_text()
    link.click()
    page.wait_for_selector("#list tbody tr")
    banner = page.locator("#cell-banner").inner_text()
    assert "Table 0" in banner and "external/mcp-client · mcp" in banner
    assert f"/{page.locator('#list tbody tr').count()}" in shown
    assert not page.seen["errors"], page.seen["errors"]
    page.context.close()
