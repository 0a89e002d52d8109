/* The episode browser: filter by every cell factor and outcome, search ids, sort, page.
   The state lives in the address (#fault=timeout_late&duplicate=yes&sort=-agent_time_s...),
   so a view can be linked and Back returns to it. One pass over the index per change counts
   the matches and, for every filter, how many episodes each of its choices would leave. */
"use strict";
(function () {
  const L = window.LIMBO;
  const PAGE = 100;
  const LIST = ["episode_id", "model", "condition", "contract", "fault", "template", "instance",
    "focal_write", "duplicate", "missing", "overclaim", "exactly_once", "termination",
    "agent_time_s", "tool_calls"];
  const LABEL = { episode_id: "episode", focal_write: "focal write", exactly_once: "exactly once",
    agent_time_s: "agent time (s)", tool_calls: "tool calls", fault_fired: "fault fired",
    task_success: "task success", report_status: "report status", contract_class: "contract class",
    claimed_clean: "claimed clean", model_turns: "model turns", cost_usd: "cost (USD)" };
  const label = function (name) { return LABEL[name] || name; };
  let idx, cols, ids, cells, facets, state, cellMask;

  function setup() {
    idx = L.data.index;
    cells = L.data.cells || {};
    cols = {};
    idx.columns.forEach(function (c) { cols[c.name] = c; });
    ids = idx.ids;
    facets = idx.columns.filter(function (c) { return c.kind !== "number"; });
    buildFacets();
    readState();
    render();
  }

  /* ---- state <-> address ---- */
  function readState() {
    const p = L.params();
    state = { q: (p.get("q") || "").trim(), cell: p.get("cell"), num: p.get("num") === "1",
      sort: p.get("sort") || "", page: Math.max(0, parseInt(p.get("page") || "1", 10) - 1 || 0),
      filters: {} };
    facets.forEach(function (c) { if (p.has(c.name)) state.filters[c.name] = p.get(c.name); });
    document.getElementById("q").value = state.q;
    cellMask = null;
    const cell = state.cell && cells[state.cell];
    if (cell) {
      cellMask = new Uint8Array(idx.n);
      let at = 0;
      if (cell.rows) cell.rows.split(",").forEach(function (d) { at += +d; cellMask[at] = 1; });
    }
  }

  function writeState() {
    const p = new URLSearchParams();
    if (state.cell) p.set("cell", state.cell);
    if (state.cell && state.num) p.set("num", "1");
    facets.forEach(function (c) { if (c.name in state.filters) p.set(c.name, state.filters[c.name]); });
    if (state.q) p.set("q", state.q);
    if (state.sort) p.set("sort", state.sort);
    if (state.page) p.set("page", String(state.page + 1));
    L.setParams(p);
  }

  /* ---- filtering ---- */
  function test(c, value) {
    if (c.kind === "flag") {
      const want = value === "yes" ? 1 : 0;
      return function (i) { return c.values[i] === want; };
    }
    const code = c.levels.map(String).indexOf(value);
    return function (i) { return c.values[i] === code; };
  }

  function compute() {
    const active = Object.keys(state.filters).filter(function (n) { return cols[n]; })
      .map(function (n) { return { name: n, test: test(cols[n], state.filters[n]) }; });
    const cell = state.cell && cells[state.cell];
    const numCol = cell && state.num && cols[cell.outcome] && cols[cell.outcome].kind === "flag"
      ? cols[cell.outcome] : null;
    const q = state.q.toLowerCase();
    const counts = {};
    facets.forEach(function (c) { counts[c.name] = new Array(c.levels ? c.levels.length : 2).fill(0); });
    const add = function (c, i) { counts[c.name][c.values[i]] += 1; };
    const out = [];
    for (let i = 0; i < idx.n; i++) {
      if (cellMask && !cellMask[i]) continue;
      if (numCol && numCol.values[i] !== 1) continue;
      if (q && ids[i].toLowerCase().indexOf(q) < 0) continue;
      let failed = -1, misses = 0;
      for (let f = 0; f < active.length && misses < 2; f++) {
        if (!active[f].test(i)) { misses++; failed = f; }
      }
      if (misses === 0) { out.push(i); facets.forEach(function (c) { add(c, i); }); }
      else if (misses === 1) add(cols[active[failed].name], i);
    }
    return { rows: sort(out), counts: counts };
  }

  function key(name) {
    if (name === "episode_id") return function (i) { return ids[i]; };
    const c = cols[name];
    return function (i) { return c.values[i]; };
  }

  function sort(rows) {
    if (!state.sort) return rows;
    const desc = state.sort[0] === "-";
    const name = desc ? state.sort.slice(1) : state.sort;
    if (name !== "episode_id" && !cols[name]) return rows;
    const k = key(name);
    const sign = desc ? -1 : 1;
    return rows.sort(function (a, b) {
      const x = k(a), y = k(b);
      if (x === y) return a - b;
      if (x === null) return 1;
      if (y === null) return -1;
      return (x < y ? -1 : 1) * sign;
    });
  }

  /* ---- rendering ---- */
  function buildFacets() {
    const box = document.getElementById("facets");
    box.replaceChildren();
    facets.forEach(function (c) {
      const id = "f-" + c.name;
      box.appendChild(L.el("div", { class: "field" },
        L.el("label", { for: id, text: label(c.name) }),
        L.el("select", { id: id, "data-column": c.name, onchange: function (e) {
          if (e.target.value === "") delete state.filters[c.name];
          else state.filters[c.name] = e.target.value;
          state.page = 0;
          update();
        } })));
    });
  }

  function fillFacets(counts) {
    facets.forEach(function (c) {
      const sel = document.getElementById("f-" + c.name);
      const values = c.kind === "flag" ? ["no", "yes"] : c.levels.map(String);
      const n = counts[c.name];
      const total = n.reduce(function (a, b) { return a + b; }, 0);
      const opts = [L.el("option", { value: "", text: "any (" + L.num(total) + ")" })];
      values.forEach(function (v, k) {
        opts.push(L.el("option", { value: v, text: v + " (" + L.num(n[k]) + ")" }));
      });
      const chosen = state.filters[c.name];
      if (chosen !== undefined && values.indexOf(chosen) < 0) {
        opts.push(L.el("option", { value: chosen, text: chosen + " (not in this run)" }));
      }
      sel.replaceChildren(...opts);
      sel.value = chosen === undefined ? "" : chosen;
      sel.classList.toggle("active", chosen !== undefined);
    });
  }

  function banner(result) {
    const box = document.getElementById("cell-banner");
    const cell = state.cell && cells[state.cell];
    box.hidden = !state.cell;
    if (!state.cell) return;
    if (!cell) {
      box.replaceChildren(L.el("p", { text: "No table entry " + state.cell + " in this report." }));
      return;
    }
    const flag = cols[cell.outcome] && cols[cell.outcome].kind === "flag";
    const hits = flag ? countWithin(cell.outcome) : null;
    box.replaceChildren(
      L.el("p", null, L.el("strong", { text: "Table " + cell.table + ": " }), cell.title),
      L.el("p", null, "Row ", L.el("strong", { text: cell.row }), ", column ",
        L.el("strong", { text: cell.column }), " shows ", L.el("code", { text: cell.shown }),
        ": computed over these " + L.num(cell.count) + " episodes" +
        (flag ? " (" + L.num(hits) + " with " + label(cell.outcome) + ")." : ".")),
      flag ? L.el("label", { class: "check" }, L.el("input", { type: "checkbox", id: "num",
        checked: state.num, onchange: function (e) { state.num = e.target.checked; state.page = 0; update(); } }),
        " only the " + L.num(hits) + " with " + label(cell.outcome)) : null,
      L.el("button", { type: "button", onclick: function () {
        state.cell = null; state.num = false; cellMask = null; state.page = 0; update();
      }, text: "Show all episodes, not only this entry's" }));
  }

  function countWithin(outcome) {
    const c = cols[outcome];
    let n = 0;
    for (let i = 0; i < idx.n; i++) if (cellMask[i] && c.values[i] === 1) n++;
    return n;
  }

  function cellText(name, i) {
    if (name === "episode_id") {
      return L.el("a", { href: "episode.html#" + encodeURIComponent(ids[i]), text: ids[i] });
    }
    const c = cols[name];
    if (!c) return "";
    const v = c.values[i];
    if (c.kind === "flag") return v ? L.el("span", { class: "flag yes", text: "yes" }) : "no";
    if (c.kind === "number") return v === null ? "–" : L.num(v);
    return String(c.levels[v]);
  }

  function head() {
    const thead = document.querySelector("#list thead");
    const desc = state.sort[0] === "-";
    const by = desc ? state.sort.slice(1) : state.sort;
    const cells = LIST.filter(function (n) { return n === "episode_id" || cols[n]; }).map(function (n) {
      const sorted = by === n ? (desc ? "descending" : "ascending") : null;
      return L.el("th", { scope: "col", "aria-sort": sorted },
        L.el("button", { type: "button", class: "sort", "data-column": n, onclick: function () {
          state.sort = by === n && !desc ? "-" + n : n;
          state.page = 0;
          update();
        } }, label(n), L.el("span", { class: "arrow", "aria-hidden": "true",
          text: sorted ? (desc ? " ▼" : " ▲") : "" })));
    });
    const focused = document.activeElement && document.activeElement.classList.contains("sort")
      ? document.activeElement.dataset.column : null;
    thead.replaceChildren(L.el("tr", null, cells));
    if (focused) thead.querySelector('button[data-column="' + focused + '"]').focus();
  }

  function body(rows) {
    const shown = LIST.filter(function (n) { return n === "episode_id" || cols[n]; });
    const start = state.page * PAGE;
    const trs = rows.slice(start, start + PAGE).map(function (i) {
      return L.el("tr", null, shown.map(function (n) {
        return L.el(n === "episode_id" ? "th" : "td", n === "episode_id" ? { scope: "row" } :
          { class: cols[n].kind === "number" ? "num" : null }, cellText(n, i));
      }));
    });
    document.querySelector("#list tbody").replaceChildren(...trs);
  }

  function summary(rows) {
    const tally = function (name) {
      const c = cols[name];
      if (!c) return null;
      let n = 0;
      rows.forEach(function (i) { n += c.values[i]; });
      return L.num(n) + " " + label(name);
    };
    const parts = ["duplicate", "missing", "overclaim", "exactly_once"].map(tally).filter(Boolean);
    document.getElementById("summary").textContent = L.num(rows.length) + " of " +
      L.num(idx.n) + " episodes match" + (rows.length ? " · " + parts.join(" · ") : "");
  }

  function pager(rows) {
    const pages = Math.max(1, Math.ceil(rows.length / PAGE));
    if (state.page >= pages) state.page = pages - 1;
    const go = function (p, text, disabled) {
      return L.el("button", { type: "button", disabled: disabled, onclick: function () {
        state.page = p; update(); document.getElementById("list").focus();
      }, text: text });
    };
    const first = state.page * PAGE + 1, last = Math.min(rows.length, (state.page + 1) * PAGE);
    document.getElementById("pager").replaceChildren(
      go(0, "« first", state.page === 0), go(state.page - 1, "‹ previous", state.page === 0),
      L.el("span", { text: rows.length ? "episodes " + L.num(first) + "–" + L.num(last) +
        " (page " + (state.page + 1) + " of " + pages + ")" : "no episodes" }),
      go(state.page + 1, "next ›", state.page >= pages - 1), go(pages - 1, "last »", state.page >= pages - 1));
  }

  function update() {
    const result = compute();
    fillFacets(result.counts);
    banner(result);
    pager(result.rows);
    head();
    body(result.rows);
    summary(result.rows);
    writeState();
  }
  const render = update;

  document.getElementById("q").addEventListener("input", function (e) {
    state.q = e.target.value.trim();
    state.page = 0;
    update();
  });
  document.getElementById("filters").addEventListener("submit", function (e) { e.preventDefault(); });
  document.getElementById("clear").addEventListener("click", function () {
    state.filters = {}; state.q = ""; state.cell = null; state.num = false; cellMask = null;
    state.page = 0;
    document.getElementById("q").value = "";
    update();
  });
  window.addEventListener("hashchange", function () { readState(); update(); });

  L.live(async function (info) {
    const before = idx.n;
    await L.loadScript("data/meta.js" + L.fresh());
    await L.loadScript("data/index.js?v=" + info.version);
    await L.loadScript("data/cells.js?v=" + info.version);
    setup();
    const added = L.data.index.n - before;
    L.say(added > 0 ? L.num(added) + " new episodes (" + L.num(L.data.index.n) + " in all)"
      : "updated: " + L.num(L.data.index.n) + " episodes");
  });

  setup();
})();
