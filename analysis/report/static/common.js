/* LIMBO report: what every page shares. Data files are scripts that call LIMBO.receive();
   pages read them from LIMBO.data. Nothing here reaches the network: under file:// there is
   no server, and under `limbo view` only this report's own address is asked. */
"use strict";
(function () {
  const L = (window.LIMBO = window.LIMBO || {});
  L.data = L.data || {};
  L.buckets = {};

  L.receive = function (kind, a, b) {
    if (kind === "bucket") L.buckets[a] = b;
    else L.data[kind] = a;
  };

  /* Load a script beside the page; resolves after it ran. */
  L.loadScript = function (src) {
    return new Promise(function (resolve, reject) {
      const s = document.createElement("script");
      s.src = src;
      s.onload = function () { s.remove(); resolve(); };
      s.onerror = function () { s.remove(); reject(new Error("could not load " + src)); };
      document.head.appendChild(s);
    });
  };

  /* FNV-1a over UTF-16 code units: the same as index.bucket_of in Python. */
  L.bucketOf = function (id, buckets) {
    let h = 0x811c9dc5;
    for (let i = 0; i < id.length; i++) {
      h ^= id.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return h % buckets;
  };

  L.bucketFile = function (n) { return "episodes/b" + String(n).padStart(4, "0") + ".js"; };

  /* base64 of gzip of JSON -> object, with the browser's own DecompressionStream. */
  L.inflate = async function (b64) {
    const bin = atob(b64);
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  };

  L.loadEpisode = async function (id) {
    const n = L.bucketOf(id, L.data.meta.buckets);
    if (!(n in L.buckets)) await L.loadScript(L.bucketFile(n) + L.fresh());
    const all = await L.inflate(L.buckets[n]);
    return all[id] || null;
  };

  /* A query string that defeats caches when served live; nothing under file://. */
  L.fresh = function () { return L.served() ? "?v=" + L.data.meta.version : ""; };
  L.served = function () { return location.protocol === "http:" || location.protocol === "https:"; };

  /* Build DOM without ever parsing data as HTML. */
  L.el = function (tag, props) {
    const node = document.createElement(tag);
    if (props) {
      for (const k of Object.keys(props)) {
        const v = props[k];
        if (v === null || v === undefined || v === false) continue;
        if (k === "text") node.textContent = v;
        else if (k === "class") node.className = v;
        else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
        else node.setAttribute(k, v === true ? "" : v);
      }
    }
    for (let i = 2; i < arguments.length; i++) L.append(node, arguments[i]);
    return node;
  };
  L.append = function (node, child) {
    if (child === null || child === undefined || child === false) return;
    if (Array.isArray(child)) child.forEach(function (c) { L.append(node, c); });
    else node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  };

  L.json = function (v) { return typeof v === "string" ? v : JSON.stringify(v); };
  /* "key: value; ..." with strings as they are (an event or stream item of unknown shape). */
  L.fields = function (obj, skip) {
    return Object.keys(obj).filter(function (k) { return !skip || skip.indexOf(k) < 0; })
      .map(function (k) { return k + ": " + L.json(obj[k]); }).join("; ");
  };
  L.t = function (t) { return typeof t === "number" ? t.toFixed(1) : "?"; };
  L.num = function (n) { return typeof n === "number" ? n.toLocaleString("en") : String(n); };

  L.params = function () { return new URLSearchParams(location.hash.slice(1)); };
  L.setParams = function (p) {
    const s = p.toString();
    history.replaceState(null, "", s ? "#" + s : location.pathname + location.search);
  };

  L.say = function (text) {
    const live = document.getElementById("live");
    if (live) live.textContent = text;
  };

  /* Under `limbo view`: call onChange(info) when the server has a newer build. */
  L.live = function (onChange) {
    if (!L.served()) return;
    let seen = L.data.meta.version;
    setInterval(async function () {
      try {
        const r = await fetch("api/version", { cache: "no-store" });
        const info = await r.json();
        if (info.version !== seen) { seen = info.version; await onChange(info); }
      } catch (e) { L.say("lost the connection to limbo view"); }
    }, 1500);
  };

  /* Copy text; falls back to a selected text field where the clipboard API is refused. */
  L.copy = async function (text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch (e) {
      const area = L.el("textarea", { class: "offscreen", readonly: true });
      area.value = text;
      document.body.appendChild(area);
      area.select();
      const ok = document.execCommand("copy");
      area.remove();
      return ok;
    }
  };

  /* The overview, served live: swap in the newer page's content. */
  document.addEventListener("DOMContentLoaded", function () {
    if (document.body.dataset.page !== "overview") return;
    L.live(async function (info) {
      const r = await fetch("index.html", { cache: "no-store" });
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      const fresh = doc.getElementById("main");
      if (fresh) document.getElementById("main").replaceChildren(...fresh.childNodes);
      L.say("updated: " + L.num(info.episodes) + " episodes");
    });
  });
})();
