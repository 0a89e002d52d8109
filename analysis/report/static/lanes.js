/* The two lanes of an episode on its sim-time axis: the agent lane (model turns, tool calls and
   the results as the agent saw them) and the world lane (the fault, commits, requests in flight
   and when they land, redelivered copies, key replays, stale reads, scaffold and guard
   decisions). The same event log as `limbo show`, read into rows that say in words what each
   event means; colour only repeats what the words say. */
"use strict";
(function () {
  const L = window.LIMBO;
  const AGENT = { turn: 1, call: 1, result: 1, finish: 1 };

  function context(rec) {
    const ev = rec.events || [];
    const ctx = { fault: null, faultCall: null, faultResult: null, sent: {}, results: {},
      roles: (rec._site && rec._site.ledger_roles) || {}, reissue: {} };
    const seen = {};
    let lastCall = null;
    ev.forEach(function (e, i) {
      if (e.type === "call") {
        lastCall = e;
        const k = e.tool + " " + JSON.stringify(e.args);
        if (k in seen) ctx.reissue[i] = seen[k];
        else seen[k] = e.id;
      } else if (e.type === "result") {
        ctx.results[e.id] = e;
      } else if (e.type === "fault" && !ctx.fault) {
        ctx.fault = e;
        ctx.faultCall = lastCall;
      }
      if (e.request_id && !(e.request_id in ctx.sent)) ctx.sent[e.request_id] = e.t;
    });
    if (ctx.fault) ctx.sent[ctx.fault.request_id] = ctx.fault.t;
    if (ctx.faultCall) ctx.faultResult = ctx.results[ctx.faultCall.id] || null;
    return ctx;
  }

  function tag(name, text) { return { tag: name, text: text }; }

  function faultText(e) {
    const d = e.detail || {};
    if (e.mode === "none") return "no fault in this episode (control): request " + e.request_id + " goes through";
    const parts = ["mode " + e.mode + " on request " + e.request_id];
    if (d.lands_at !== undefined) parts.push("the request stays in flight and lands at t=" + L.t(d.lands_at) +
      (d.delay_after_timeout_s !== undefined ? " (" + L.t(d.delay_after_timeout_s) + " s after the timeout)" : ""));
    if (d.copy_at !== undefined) parts.push("a copy will be redelivered at t=" + L.t(d.copy_at));
    if (d.delivered === false) parts.push("the request never reaches the service");
    if (d.delivered === true) parts.push("the request reaches the service");
    if (d.response_lost) parts.push("its response is lost");
    if (d.acknowledged) parts.push("the agent is told it succeeded");
    if (d.stale_for_next_read) parts.push("the next read is stale");
    if (d.k !== undefined && d.n !== undefined) parts.push("the batch is cut after " + d.k + " of " + d.n + " rows");
    return parts.join("; ");
  }

  function resultText(e) {
    const r = e.result;
    if (r && typeof r === "object" && r.ok === false) {
      const err = r.error || {};
      return "error " + (err.kind || "") + (err.status ? " (" + err.status + ")" : "") +
        (err.message ? ": " + err.message : "");
    }
    return "ok";
  }

  function commitTags(e, ctx) {
    const tags = [];
    const f = ctx.fault, res = ctx.faultResult;
    if (f && e.request_id === f.request_id && res && e.t > res.t) {
      tags.push(tag("late", "LATE COMMIT: lands after the agent got the failed result at t=" + L.t(res.t)));
    }
    if (/redeliver/.test(e.attempt || "")) tags.push(tag("redelivered", "REDELIVERED COPY"));
    if (/^reissue/.test(e.attempt || "")) tags.push(tag("reissued", "FROM A RE-ISSUED CALL"));
    const role = ctx.roles[String(e.seq)];
    if (role && role.copy > 1) tags.push(tag("duplicate", "DUPLICATE: effect " + role.copy + " of " + role.of + " for intent " + role.intent));
    else if (role) tags.push(tag("intent", "counts for intent " + role.intent));
    else tags.push(tag("spurious", "matches no intent"));
    return tags;
  }

  /* One entry per event type: (event, index, context, row) fills the row's title, text, tags
     and detail. A type not listed is shown field by field, as stored. */
  const DESCRIBE = {
    turn: function (e, i, ctx, r) {
      r.title = "MODEL TURN " + e.n;
      r.text = (e.text || "") + (e.tools && e.tools.length ? (e.text ? " — " : "") + "asks for " + e.tools.join(", ") : "");
    },
    call: function (e, i, ctx, r) {
      r.title = "CALL " + (e.id || "");
      r.text = e.tool;
      r.detail = e.args;
      if (i in ctx.reissue) r.tags.push(tag("reissue", "RE-ISSUE of " + ctx.reissue[i]));
      if (ctx.faultCall === e && ctx.fault.mode !== "none") r.tags.push(tag("faulted", "the fault acts on this call"));
    },
    result: function (e, i, ctx, r) {
      r.title = "RESULT " + (e.id || "");
      r.text = e.tool + ": " + resultText(e);
      r.detail = e.result;
      if (e.result && e.result.ok === false) r.tags.push(tag("error", "FAILED"));
    },
    finish: function (e, i, ctx, r) {
      r.text = e.report ? (e.report.status + (e.report.summary ? ": " + e.report.summary : "")) : "";
      r.detail = e.report;
    },
    fault: function (e, i, ctx, r) {
      r.title = e.mode === "none" ? "NO FAULT" : "FAULT";
      r.text = faultText(e);
      r.detail = e.detail;
      if (e.mode !== "none") r.tags.push(tag("fault", "FAULT " + e.mode));
    },
    commit: function (e, i, ctx, r) {
      r.title = "COMMIT #" + e.seq;
      r.text = e.tool + " → " + e.object_id + " (request " + e.request_id + ", attempt " + e.attempt + ")";
      r.tags = commitTags(e, ctx);
    },
    arrival: function (e, i, ctx, r) {
      const since = ctx.sent[e.request_id];
      r.title = "LANDS";
      r.text = e.request_id + " (" + e.attempt + ") reaches " + e.tool + ": " + e.outcome +
        (since !== undefined && since < e.t ? "; in flight since t=" + L.t(since) + " (" + L.t(e.t - since) + " s)" : "");
      if (/redeliver/.test(e.attempt || "")) r.tags.push(tag("redelivered", "REDELIVERED COPY"));
      if (ctx.fault && e.request_id === ctx.fault.request_id) r.tags.push(tag("landed", "THE FAULTED REQUEST LANDS"));
    },
    replay: function (e, i, ctx, r) {
      r.title = "KEY REPLAY";
      r.text = e.request_id + " (" + e.attempt + ") answered from key " + e.key + "; no new effect";
      r.tags.push(tag("replay", "NO EFFECT"));
    },
    lagged_read: function (e, i, ctx, r) {
      r.title = "LAGGED READ";
      r.text = e.tool + " (" + e.request_id + ") shows the state as of t=" + L.t(e.horizon) +
        "; it hides commit " + (e.hidden || []).map(function (s) { return "#" + s; }).join(", ");
      r.tags.push(tag("stale", "STALE READ"));
    },
    guard: function (e, i, ctx, r) {
      r.text = e.action + " " + (e.tool || "") + (e.detail && e.detail.reason ? ": " + e.detail.reason : "");
      r.detail = { step: e.step, caller: e.caller, key: e.key, detail: e.detail };
    },
    condition: function (e, i, ctx, r) {
      r.title = "SCAFFOLD " + (e.name || "");
      r.text = e.action + " " + (e.tool || "");
      const rest = Object.assign({}, e);
      ["t", "type", "name", "action", "tool"].forEach(function (k) { delete rest[k]; });
      r.detail = rest;
    },
    clock: function (e, i, ctx, r) { r.text = "+" + e.seconds + " s (" + e.reason + ")"; },
    limit: function (e, i, ctx, r) {
      r.text = String(e.reason);
      r.tags.push(tag("limit", "EPISODE ENDED BY A LIMIT"));
    },
  };

  function describe(e, i, ctx) {
    const r = { title: String(e.type).toUpperCase(), text: "", tags: [], detail: null };
    if (Object.prototype.hasOwnProperty.call(DESCRIBE, e.type)) DESCRIBE[e.type](e, i, ctx, r);
    else r.text = L.fields(e, ["t", "type"]);
    return r;
  }

  L.laneRows = function (rec) {
    const ctx = context(rec);
    return (rec.events || []).map(function (e, i) {
      const d = describe(e, i, ctx);
      d.i = i; d.t = e.t; d.type = e.type; d.lane = AGENT[e.type] ? "agent" : "world";
      return d;
    });
  };
  L.laneContext = context;

  function item(row) {
    return L.el("div", { class: "item" },
      L.el("span", { class: "kind", text: row.title }), " ",
      row.tags.map(function (t) { return L.el("span", { class: "tag", "data-tag": t.tag, text: t.text }); }),
      row.text ? L.el("span", { class: "what", text: row.text }) : null,
      row.detail !== null && row.detail !== undefined && L.json(row.detail) !== "{}" ?
        L.el("details", null, L.el("summary", { text: "data" }), L.el("pre", { text: JSON.stringify(row.detail, null, 2) })) : null);
  }

  /* The lanes as a table: one row per event, the time in the first column, gaps marked. */
  L.lanesTable = function (rows) {
    const tbody = L.el("tbody");
    let prev = null;
    rows.forEach(function (row) {
      if (prev !== null && typeof row.t === "number" && row.t - prev >= 10) {
        tbody.appendChild(L.el("tr", { class: "gap" }, L.el("td", { colspan: 3, text: "⋯ " + L.t(row.t - prev) + " s pass" })));
      }
      const tags = row.tags.map(function (t) { return t.tag; }).join(" ");
      tbody.appendChild(L.el("tr", { id: "ev-" + row.i, class: "ev " + row.lane + (tags ? " has-tags" : ""),
        "data-lane": row.lane, "data-type": row.type, "data-t": row.t, "data-tags": tags },
        L.el("td", { class: "t", text: L.t(row.t) }),
        L.el("td", { class: "lane agent", "data-label": "agent" }, row.lane === "agent" ? item(row) : null),
        L.el("td", { class: "lane world", "data-label": "world" }, row.lane === "world" ? item(row) : null)));
      if (typeof row.t === "number") prev = row.t;
    });
    return L.el("table", { class: "lanes", id: "lanes" },
      L.el("caption", { text: "Every event in order; the left lane is what the agent saw, the right lane what really happened." }),
      L.el("thead", null, L.el("tr", null, L.el("th", { scope: "col", text: "t (s)" }),
        L.el("th", { scope: "col", text: "agent lane: what the agent saw" }),
        L.el("th", { scope: "col", text: "world lane: what really happened" }))),
      tbody);
  };

  /* ---- the strip: both lanes drawn to scale ---- */
  const NS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, text) {
    const n = document.createElementNS(NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { n.setAttribute(k, attrs[k]); });
    if (text !== undefined) n.textContent = text;
    return n;
  }
  function mark(parent, row, shape, title) {
    const a = svg("a", { href: "#ev-" + row.i, class: "mark " + row.lane, "data-i": row.i,
      "data-t": row.t, "data-type": row.type, "data-tags": row.tags.map(function (t) { return t.tag; }).join(" ") });
    a.appendChild(svg("title", {}, "t=" + L.t(row.t) + " " + title));
    a.appendChild(shape);
    parent.appendChild(a);
    return a;
  }

  function ticks(g, x, end, y) {
    const steps = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200];
    const step = steps.find(function (s) { return end / s <= 8; }) || 14400;
    for (let t = 0; t <= end + 1e-9; t += step) {
      g.appendChild(svg("line", { x1: x(t), x2: x(t), y1: y, y2: y + 5, class: "tick" }));
      g.appendChild(svg("text", { x: x(t), y: y + 17, class: "ticklabel", "text-anchor": "middle" }, t + " s"));
    }
  }

  const W = 1000, LEFT = 70, RIGHT = 20, AY = 40, WY = 100;
  const has = function (row, name) { return row.tags.some(function (t) { return t.tag === name; }); };

  /* The fault as a dashed line across both lanes, and its request's time in flight. */
  function drawFault(g, x, rec, rows, f) {
    const landing = rows.find(function (r) { return r.type === "arrival" && rec.events[r.i].request_id === f.request_id; });
    const until = landing ? landing.t : (f.detail && f.detail.lands_at);
    if (typeof until === "number" && until > f.t) {
      g.appendChild(svg("rect", { x: x(f.t), y: WY - 7, width: Math.max(2, x(until) - x(f.t)), height: 14, class: "inflight" }));
      g.appendChild(svg("text", { x: x(f.t) + 4, y: WY + 20, class: "note" }, f.request_id + " in flight"));
    }
    g.appendChild(svg("line", { x1: x(f.t), x2: x(f.t), y1: 14, y2: 120, class: "faultline" }));
    g.appendChild(svg("text", { x: x(f.t) + 3, y: 12, class: "faultlabel" }, "FAULT " + f.mode));
  }

  /* One event's mark: calls as boxes from sending to result, commits as diamonds, the finish as
     a flag, other world events as small squares. */
  function drawRow(g, x, rec, ctx, row) {
    const e = rec.events[row.i], at = x(row.t);
    if (row.type === "call") {
      const res = ctx.results[e.id], re = has(row, "reissue");
      const failed = res && res.result && res.result.ok === false;
      mark(g, row, svg("rect", { x: at, y: AY - 7, width: Math.max(3, x(res ? res.t : row.t) - at), height: 14,
        class: "call" + (re ? " reissue" : "") + (failed ? " failed" : "") }), row.title + " " + row.text + (re ? " (re-issue)" : ""));
      if (re) g.appendChild(svg("text", { x: at, y: AY - 11, class: "note" }, "re-issue"));
    } else if (row.type === "finish") {
      mark(g, row, svg("path", { d: "M" + at + " " + (AY - 12) + " v24 M" + at + " " + (AY - 12) + " h10 v7 h-10", class: "finish" }), "finish");
    } else if (row.type === "commit") {
      const late = has(row, "late");
      mark(g, row, svg("path", { d: "M" + at + " " + (WY - 9) + " l7 9 l-7 9 l-7 -9 z", class: "commit" + (late ? " late" : "") }),
        row.title + " " + row.text + (late ? " (late commit)" : ""));
      g.appendChild(svg("text", { x: at, y: WY - 13, class: "note", "text-anchor": "middle" }, (late ? "late " : "") + "#" + e.seq));
    } else if (row.lane === "world" && row.type !== "clock" && row.type !== "fault") {
      mark(g, row, svg("rect", { x: at - 3, y: WY + 2, width: 6, height: 6, class: "minor " + row.type }), row.title + " " + row.text);
    }
  }

  /* Both lanes drawn to scale on one SVG strip; each mark links to its row in the table. */
  L.strip = function (rec, rows) {
    const ctx = context(rec);
    const times = rows.map(function (r) { return r.t; }).filter(function (t) { return typeof t === "number"; });
    const end = Math.max(1, Math.max.apply(null, times.concat([0])));
    const x = function (t) { return LEFT + (W - LEFT - RIGHT) * (t / end); };
    const root = svg("svg", { viewBox: "0 0 " + W + " 160", class: "strip", role: "img", "aria-labelledby": "strip-title" });
    root.appendChild(svg("title", { id: "strip-title" }, "The episode to scale: agent lane above, world lane below, time in seconds"));
    root.appendChild(svg("text", { x: 4, y: AY + 4, class: "lanelabel" }, "agent"));
    root.appendChild(svg("text", { x: 4, y: WY + 4, class: "lanelabel" }, "world"));
    [AY, WY].forEach(function (y) { root.appendChild(svg("line", { x1: LEFT, x2: W - RIGHT, y1: y, y2: y, class: "laneline" })); });
    const g = svg("g", {});
    root.appendChild(g);
    ticks(g, x, end, 128);
    if (ctx.fault && ctx.fault.mode !== "none") drawFault(g, x, rec, rows, ctx.fault);
    rows.forEach(function (row) { drawRow(g, x, rec, ctx, row); });
    return root;
  };
})();
