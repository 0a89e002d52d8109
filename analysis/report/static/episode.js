/* One episode: its cell, outcome, the command that re-runs it, both lanes, the ledger, the
   intents, the final report, the harness's own event stream where there is one, and every
   other stored field. The record is read from its bucket file only now. */
"use strict";
(function () {
  const L = window.LIMBO;
  const KNOWN = ["schema", "episode_id", "cell", "header", "outcome", "report", "events", "ledger",
    "usage", "runtime", "_site"];
  const BADGES = [["duplicate", "DUPLICATE", "bad"], ["missing", "MISSING", "bad"],
    ["overclaim", "OVERCLAIM", "bad"], ["exactly_once", "EXACTLY ONCE", "good"],
    ["task_success", "TASK SUCCESS", "good"], ["compensated", "COMPENSATED", "note"]];

  function section(id, title) {
    const rest = Array.prototype.slice.call(arguments, 2);
    return L.el("section", { id: id, "aria-labelledby": id + "-h" },
      L.el("h2", { id: id + "-h", text: title }), rest);
  }

  function dl(obj, linkFor) {
    return L.el("dl", { class: "facts" }, Object.keys(obj || {}).map(function (k) {
      const v = obj[k];
      const text = typeof v === "object" && v !== null ? L.json(v) : String(v);
      const href = linkFor && linkFor(k, v);
      return [L.el("dt", { text: k }), L.el("dd", null, href ? L.el("a", { href: href, text: text }) : text)];
    }));
  }

  function table(head, rows, caption) {
    return L.el("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": caption },
      L.el("table", { class: "data" }, L.el("caption", { text: caption }),
        L.el("thead", null, L.el("tr", null, head.map(function (h) { return L.el("th", { scope: "col", text: h }); }))),
        L.el("tbody", null, rows.map(function (r) {
          return L.el("tr", r.attrs || null, r.cells.map(function (c) { return L.el("td", null, c); }));
        }))));
  }

  function pre(value) { return L.el("pre", { text: typeof value === "string" ? value : JSON.stringify(value, null, 2) }); }

  function outcomeBlock(o) {
    const badges = BADGES.filter(function (b) { return o[b[0]]; }).map(function (b) {
      return L.el("li", { class: "badge " + b[2], "data-outcome": b[0], text: b[1] });
    });
    badges.push(L.el("li", { class: "badge " + (/error/.test(o.termination) ? "bad" : "note"), text: "ended: " + o.termination }));
    if (!o.fault_fired) badges.push(L.el("li", { class: "badge note", text: "fault did not fire" }));
    return [L.el("ul", { class: "badges", "aria-label": "outcome" }, badges),
      L.el("details", null, L.el("summary", { text: "every outcome field" }), dl(o))];
  }

  function rerun(rec) {
    const cmd = rec._site && rec._site.rerun;
    if (!cmd) return null;
    const status = L.el("span", { class: "copied", role: "status" });
    return L.el("div", { class: "rerun" },
      L.el("p", { text: "Re-run this episode exactly:" }),
      L.el("code", { id: "rerun", text: cmd }), " ",
      L.el("button", { type: "button", id: "copy", onclick: async function () {
        status.textContent = (await L.copy(cmd)) ? "copied" : "select the command and copy it";
      } }, "Copy command"), " ", status,
      rec._site.source ? L.el("p", { class: "source", text: "stored at " + rec._site.source }) : null);
  }

  function ledger(rec) {
    const roles = (rec._site && rec._site.ledger_roles) || {};
    const rows = (rec.ledger || []).map(function (e) {
      const role = roles[String(e.seq)];
      const what = role ? (role.copy > 1 ? "DUPLICATE " + role.copy + "/" + role.of + " of " + role.intent : role.intent)
        : (e.reverses ? "undoes " + e.reverses : "SPURIOUS: matches no intent");
      return { attrs: { "data-seq": e.seq, class: role && role.copy > 1 ? "dup" : null },
        cells: ["#" + e.seq, L.t(e.t), e.tool, e.object_id, e.attempt, e.request_id,
          e.key === null || e.key === undefined ? "–" : e.key, what, L.el("details", null, L.el("summary", { text: "args" }), pre(e.args))] };
    });
    if (!rows.length) return L.el("p", { text: "Nothing committed." });
    return table(["seq", "t (s)", "tool", "object", "attempt", "request", "key", "counts for", "args"], rows, "committed effects");
  }

  function intents(rec) {
    const list = (rec.header && rec.header.intents) || [];
    const commits = (rec.outcome && rec.outcome.commits) || {};
    if (!list.length) return L.el("p", { text: "No intents recorded." });
    return table(["intent", "tool", "must match", "must contain", "committed"], list.map(function (i) {
      const n = commits[i.id];
      return { cells: [i.id, i.tool, L.json(i.match || {}), L.json(i.contains || {}),
        n === undefined ? "?" : String(n) + (n === 1 ? "" : n === 0 ? " (MISSING)" : " (DUPLICATE)")] };
    }), "what the task required");
  }

  function finalReport(rec) {
    const r = rec.report;
    if (!r) return L.el("p", { text: "No final report (the agent never called finish)." });
    return [dl({ status: r.status, summary: r.summary }),
      L.el("p", { text: "Uncertain actions: " + ((r.uncertain_actions || []).length ? "" : "none") }),
      (r.uncertain_actions || []).length ? pre(r.uncertain_actions) : null];
  }

  /* A production harness's own stream (runtime.harness): shown as stored, whatever its shape. */
  function harness(rec) {
    const h = rec.runtime && rec.runtime.harness;
    if (!h) return null;
    const facts = {}, texts = [];
    Object.keys(h).forEach(function (k) {
      const v = h[k];
      if (typeof v === "string" && (v.indexOf("\n") >= 0 || v.length > 200)) texts.push(k);
      else if (!Array.isArray(v) && (v === null || typeof v !== "object")) facts[k] = v;
    });
    const lists = Object.keys(h).filter(function (k) { return Array.isArray(h[k]); });
    return section("harness", "Harness event stream", dl(facts), texts.map(function (k) {
      return L.el("details", null, L.el("summary", { text: k }), pre(h[k]));
    }), lists.map(function (k) {
      const items = h[k];
      return L.el("details", { open: k === "events" }, L.el("summary", { text: k + " (" + items.length + ")" }),
        L.el("ol", { class: "stream" }, items.map(function (e) {
          const object = e !== null && typeof e === "object" && !Array.isArray(e);
          const name = object ? ["type", "kind", "event", "method"].find(function (k) { return typeof e[k] === "string"; }) : null;
          return L.el("li", null, name ? L.el("span", { class: "kind", text: e[name] }) : null, " ",
            L.el("span", { text: object ? L.fields(e, [name]) : L.json(e) }));
        })));
    }));
  }

  function usage(rec) {
    const u = rec.usage || [];
    if (!u.length) return null;
    const keys = Object.keys(u[0]);
    return section("usage", "Model usage", table(keys, u.map(function (r) {
      return { cells: keys.map(function (k) { return r[k] === null || r[k] === undefined ? "–" : String(r[k]); }) };
    }), "tokens and cost per model call"));
  }

  function others(rec) {
    const extra = Object.keys(rec).filter(function (k) { return KNOWN.indexOf(k) < 0; });
    return extra.length ? section("other", "Other fields", extra.map(function (k) {
      return L.el("details", null, L.el("summary", { text: k }), pre(rec[k]));
    })) : null;
  }

  function browseLink(k, v) {
    if (k === "seed" || (typeof v !== "string" && typeof v !== "number")) return null;
    return "episodes.html#" + encodeURIComponent(k) + "=" + encodeURIComponent(v);
  }

  function render(rec) {
    const cell = rec.cell || {};
    const rows = L.laneRows(rec);
    document.title = rec.episode_id + " · LIMBO report";
    const header = rec.header || {};
    return [
      L.el("p", { class: "crumbs" }, L.el("a", { href: "episodes.html", text: "← all episodes" })),
      L.el("h1", null, "Episode ", L.el("code", { text: rec.episode_id })),
      rec._site && rec._site.unreadable ? L.el("p", { class: "warn", text: "Only part of this episode could be read: " + rec._site.unreadable }) : null,
      L.el("p", { class: "lede", text: [cell.model, cell.harness, cell.condition, cell.contract, "fault " + cell.fault + " on " + cell.focal_write,
        cell.template + "#" + cell.instance].join(" · ") }),
      section("outcome", "Outcome", outcomeBlock(rec.outcome || {}), rerun(rec)),
      section("timeline", "Timeline",
        L.el("div", { class: "scroll" }, L.strip(rec, rows)),
        L.el("p", { class: "legend", text: "Drawn to scale. Boxes above: tool calls from sending to the result (outlined: a re-issue; dashed: failed). " +
          "Diamonds below: commits (filled dark: late). The shaded bar: the faulted request in flight. Dashed line: the fault. Small squares: other world events." }),
        L.el("div", { class: "scroll lanes-wrap", tabindex: "0", role: "region", "aria-label": "timeline lanes" }, L.lanesTable(rows))),
      section("ledger", "Ledger (committed effects)", ledger(rec)),
      section("intents", "Intents", intents(rec)),
      section("report", "Final report", finalReport(rec)),
      header.task_prompt ? section("task", "Task prompt", L.el("blockquote", { text: header.task_prompt })) : null,
      section("cell", "Cell", dl(cell, browseLink)),
      harness(rec),
      usage(rec),
      others(rec),
      section("raw", "Stored record", L.el("details", null, L.el("summary", { text: "the record as JSON" }), pre(rec))),
    ];
  }

  async function show() {
    const box = document.getElementById("episode");
    const id = decodeURIComponent(location.hash.slice(1));
    if (!id) {
      box.replaceChildren(L.el("p", null, "No episode named. ", L.el("a", { href: "episodes.html", text: "Choose one." })));
      return;
    }
    let rec = null;
    try {
      rec = await L.loadEpisode(id);
    } catch (e) {
      box.replaceChildren(L.el("p", { class: "warn", text: "Could not read the episode data: " + e.message }));
      return;
    }
    if (!rec) {
      box.replaceChildren(L.el("p", { class: "warn" }, "No episode ", L.el("code", { text: id }), " in this report. ",
        L.el("a", { href: "episodes.html", text: "Browse the episodes." })));
      return;
    }
    box.replaceChildren(...render(rec).filter(Boolean));
    document.getElementById("main").focus({ preventScroll: true });
  }

  window.addEventListener("hashchange", show);
  L.live(async function () {
    await L.loadScript("data/meta.js" + L.fresh());
    if (!document.getElementById("lanes")) { L.buckets = {}; show(); }
  });
  show();
})();
