/* Leaderboard page: renders window.LEADERBOARD (data.js) into sortable, filterable tables and SVG bar
   charts. Plain JS, no libraries, works from file://. */
(function () {
  "use strict";
  var D = window.LEADERBOARD;
  var $ = function (id) { return document.getElementById(id); };
  if (!D) {
    $("meta").textContent = "data.js is missing: rebuild with python -m harness.leaderboard";
    return;
  }
  var FAMILY_LABELS = D.labels || {};   /* table id -> label, declared by each task family */
  var SIZE_ORDER = { small: 0, base: 1, large: 2 };
  var TEXT_COLS = [
    { id: "_name", label: "Model" }, { id: "_size", label: "Size" }, { id: "_family", label: "Family" }
  ];
  var rowsById = {};
  D.rows.forEach(function (r) { rowsById[r.id] = r; });
  var state = { model: "", size: "", family: "", origin: "", sort: {}, baseline: "" };
  var SIG = D.sig || null;   /* paired tests between run rows (python -m harness.leaderboard --significance) */

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, text) {
    var e = document.createElementNS("http://www.w3.org/2000/svg", tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function familyLabel(f) { return FAMILY_LABELS[f] || f; }
  function originClass(o) { return o === "published" ? "published" : "this-run"; }
  /* A cell that competes for best (cells.ranked): a number, complete, on the full official datasets. */
  function ranked(c) { return !!c && c.v !== null && !c.p && !c.sub && !c.loc && !c.om && !c.op; }

  /* ---------- filters ---------- */
  function rowVisible(row) {
    var q = state.model.trim().toLowerCase();
    if (q && (row.name + " " + row.family).toLowerCase().indexOf(q) < 0) return false;
    if (state.size && row.size !== state.size) return false;
    if (state.origin && row.origin !== state.origin) return false;
    return true;
  }
  function visibleColumns(table) {
    if (!state.family) return table.columns;
    return table.columns.filter(function (c) { return c.family === state.family; });
  }
  function tableVisible(table) {
    return table.id === "overview" || !state.family || table.family === state.family;
  }
  function rowInTable(table, rowId, cols) {
    var cells = table.cells[rowId];
    if (!cells) return false;
    if (!state.family) return true;
    return cols.some(function (c) { return cells[c.id]; });
  }

  /* ---------- tooltips and detail panel ---------- */
  function num(v) { return typeof v === "number" && v !== 0 && Math.abs(v) < 1e-3 ? v.toExponential() : v; }
  var KEY_HP = ["lr", "learning_rate", "weight_decay", "epochs", "seed", "batch_size"];
  function hpText(hp) {   /* the key hyperparameters; the detail panel shows them all */
    if (!hp) return "";
    var keys = KEY_HP.filter(function (k) { return k in hp; });
    var rest = Object.keys(hp).length - keys.length;
    if (!keys.length) keys = Object.keys(hp).slice(0, 5);
    return keys.map(function (k) { return k + "=" + num(hp[k]); }).join(" ") + (rest > 0 && keys.length < Object.keys(hp).length ? " …" : "");
  }
  function versionsText(i) {
    var v = D.versions[i] || {};
    return ["torch", "transformers", "sentence-transformers", "harness"].filter(function (k) { return v[k]; })
      .map(function (k) { return k + " " + v[k]; }).join(", ");
  }
  function sourceLine(s) {
    if (s.citation) return s.where + " — " + s.citation + " (" + s.file + (s.row ? ", row " + s.row : "") +
      (s.column ? ", column " + s.column : "") + ", printed " + s.printed + ")" +
      (s.copied_from ? "; copied there from " + s.copied_from : "");
    if (s.component) return s.component + ": " + s.text;
    return (s.used ? "✔ " : "· ") + s.run_id + " | " + s.created_at + " | " + s.status +
      (s.score !== null && s.score !== undefined ? " " + s.metric + "=" + s.score : "") +
      (s.hp && Object.keys(s.hp).length ? " | " + hpText(s.hp) : "") + " | " + versionsText(s.ver) + " | " + s.path;
  }
  /* The paired test of this row against the chosen baseline row: {d, lo, hi, p} as B - A (this row - baseline). */
  function versus(table, col, id) {
    if (!SIG || !state.baseline || id === state.baseline) return null;
    var pairs = (SIG.pairs[table.id] || {})[col.id] || {};
    var t = pairs[state.baseline + "\t" + id];
    if (t) return t;
    t = pairs[id + "\t" + state.baseline];
    return t ? { d: -t.d, lo: -t.hi, hi: -t.lo, p: t.p } : null;
  }
  function markOf(table, t) {
    if (!t) return null;
    var better = table.hib === false ? t.d < 0 : t.d > 0;
    var sig = t.p < SIG.settings.alpha;
    return { sym: !sig ? "=" : better ? "▲" : "▼", cls: !sig ? "sig-same" : better ? "sig-better" : "sig-worse",
      text: "vs " + rowsById[state.baseline].name + ": " + (t.d >= 0 ? "+" : "") + t.d.toFixed(2) + ", " +
        Math.round(SIG.settings.level * 100) + "% interval [" + t.lo.toFixed(2) + ", " + t.hi.toFixed(2) + "], p = " +
        t.p.toPrecision(2) + (sig ? (better ? " (significantly better" : " (significantly worse") : " (no significant difference") +
        " at " + SIG.settings.alpha + "; paired randomization test, " + SIG.settings.permutations + " permutations)" };
  }
  /* Tie group (compact letters), rank interval and every pair's corrected p of this row's cell, or null. */
  function groupOf(table, col, id) {
    if (!SIG || !SIG.groups) return null;
    var letters = ((SIG.groups[table.id] || {})[col.id] || {})[id];
    if (letters === undefined) return null;
    var rank = ((SIG.ranks[table.id] || {})[col.id] || {})[id];
    var pairs = (SIG.pairs[table.id] || {})[col.id] || {};
    var lines = ["tie group " + letters + "; rank " + rank[0] + " (" + Math.round(SIG.settings.level * 100) +
      "% interval " + rank[1] + "-" + rank[2] + "); corrected p (" + SIG.settings.correction +
      " across this table's " + SIG.family[table.id] + " tests):"];
    Object.keys(pairs).forEach(function (k) {
      var ab = k.split("\t");
      if (ab[0] !== id && ab[1] !== id) return;
      var other = ab[0] === id ? ab[1] : ab[0];
      lines.push("  vs " + rowsById[other].name + ": p = " + pairs[k].q.toPrecision(2) +
        (pairs[k].q < SIG.settings.alpha ? " (different)" : " (tied)"));
    });
    return { letters: letters, text: lines.join("\n") };
  }
  function tooltip(table, col, row, cell) {
    var lines = [row.name + " (" + row.origin + ") — " + col.label + ": " + cell.t];
    if (cell.note) lines.push(cell.note);
    var src = cell.src || [];
    src.slice(0, 6).forEach(function (s) { lines.push(sourceLine(s)); });
    if (src.length > 6) lines.push("… and " + (src.length - 6) + " more (click the cell)");
    else if (src.length && !src[0].citation && !src[0].component) lines.push("click the cell for the full record details");
    return lines.join("\n");
  }
  function showDetail(table, col, row, cell) {
    var body = $("detail-body");
    body.innerHTML = "";
    body.appendChild(el("h3", {}, row.name + " — " + table.title + " — " + col.label));
    body.appendChild(el("p", {}, "Shown: " + cell.t + (cell.note ? " (" + cell.note + ")" : "")));
    body.appendChild(el("p", { class: "note" }, "Combine rule: " + D.meta.combine + " — " + D.meta.combine_text));
    var list = el("ol");
    (cell.src || []).forEach(function (s) {
      var li = el("li");
      if (s.path) {
        var a = el("a", { href: s.path, target: "_blank" }, s.path);
        li.appendChild(el("span", {}, (s.used ? "used: " : "not used: ")));
        li.appendChild(a);
        var info = { run_id: s.run_id, created_at: s.created_at, status: s.status, metric: s.metric, score: s.score,
          split: s.split, hyperparameters: s.hp, sweep: s.sweep, precision: s.precision, git_sha: s.git,
          model_revision: s.revision, data_fingerprint: s.data, error: s.error, versions: D.versions[s.ver] };
        li.appendChild(el("pre", {}, JSON.stringify(info, null, 1)));
      } else {
        li.textContent = sourceLine(s);
      }
      list.appendChild(li);
    });
    body.appendChild(list);
    $("detail").hidden = false;
  }

  /* ---------- sorting ---------- */
  function sortRows(table, ids) {
    var s = state.sort[table.id];
    if (!s) return ids;
    var sign = s.dir === "asc" ? 1 : -1;
    function textKey(id) {
      var r = rowsById[id];
      if (s.col === "_size") return (SIZE_ORDER[r.size] !== undefined ? SIZE_ORDER[r.size] : 9) + r.size;
      if (s.col === "_family") return r.family.toLowerCase();
      return r.name.toLowerCase();
    }
    function rank(c) { return !c || c.v === null ? 2 : (ranked(c) ? 0 : 1); }
    return ids.slice().sort(function (a, b) {
      if (s.col.charAt(0) === "_") {
        var ka = textKey(a), kb = textKey(b);
        return ka < kb ? -sign : ka > kb ? sign : 0;
      }
      var ca = table.cells[a][s.col], cb = table.cells[b][s.col];
      var ra = rank(ca), rb = rank(cb);
      if (ra !== rb) return ra - rb;           // empty, partial, subset and local-data values after complete ones
      if (ra === 2) return 0;
      return sign * (ca.v - cb.v);
    });
  }
  function onSort(table, colId) {
    var cur = state.sort[table.id];
    var dir = colId.charAt(0) === "_" ? "asc" : "desc";
    if (cur && cur.col === colId) dir = cur.dir === "asc" ? "desc" : "asc";
    state.sort[table.id] = { col: colId, dir: dir };
    render();
  }

  /* ---------- tables ---------- */
  function renderTable(table, visibleRowIds) {
    var cols = visibleColumns(table);
    var section = el("section", { class: "lb-table", id: "section-" + table.id });
    section.appendChild(el("h2", {}, table.title));
    if (table.note) section.appendChild(el("p", { class: "note" }, table.note));
    if (SIG && SIG.groups && SIG.groups[table.id]) {
      section.appendChild(el("p", { class: "note groups-note" }, "Letters: tie groups per column. Run rows that " +
        "share a letter are separated by no test after the " + SIG.settings.correction + " correction " +
        "across this table's " + SIG.family[table.id] + " tests (every pair of run rows in every column and the " +
        "average, at " + SIG.settings.alpha + "); hover a cell for each pair's corrected p and the bootstrap " +
        "interval of the row's rank. Published rows carry no letters: no per-query scores were published, so " +
        "nothing can be tested against them."));
    }
    var wrap = el("div", { class: "table-wrap" });
    var t = el("table", { id: "t-" + table.id, "data-family": table.family });
    var tr = el("tr");
    var s = state.sort[table.id];
    TEXT_COLS.concat(cols).forEach(function (c) {
      var numeric = c.id.charAt(0) !== "_";
      var th = el("th", { "data-col": c.id, class: numeric ? "num" : "", title: "click to sort" }, c.label);
      if (s && s.col === c.id) th.setAttribute("aria-sort", s.dir === "asc" ? "ascending" : "descending");
      th.addEventListener("click", function () { onSort(table, c.id); });
      tr.appendChild(th);
    });
    t.appendChild(el("thead")).appendChild(tr);
    var ids = sortRows(table, D.rows.map(function (r) { return r.id; }).filter(function (id) { return table.cells[id]; }));
    var shown = ids.filter(function (id) { return visibleRowIds[id] && rowInTable(table, id, cols); });
    var shownSet = {};
    shown.forEach(function (id) { shownSet[id] = true; });
    var best = {};
    cols.forEach(function (c) {
      shown.forEach(function (id) {
        var cell = table.cells[id][c.id];
        var sign = table.hib === false ? -1 : 1;
        if (ranked(cell) && (best[c.id] === undefined || sign * cell.v > sign * best[c.id])) best[c.id] = cell.v;
      });
    });
    var tbody = el("tbody");
    ids.forEach(function (id) {
      var row = rowsById[id];
      var r = el("tr", { "data-row": id, class: originClass(row.origin) });
      r.hidden = !shownSet[id];
      var name = el("td", { class: "name" }, row.name + " ");
      name.appendChild(el("span", { class: "badge " + originClass(row.origin) }, row.origin));
      (row.badges || []).forEach(function (b) {   /* a later paper's row: its source table, its protocol on hover */
        name.appendChild(document.createTextNode(" "));
        name.appendChild(el("span", { class: "badge source", title: b.note }, b.badge));
      });
      r.appendChild(name);
      r.appendChild(el("td", { class: "size" }, row.size));
      r.appendChild(el("td", { class: "family" }, row.family));
      cols.forEach(function (c) {
        var cell = table.cells[id][c.id];
        var td = el("td", { class: "num", "data-col": c.id });
        if (cell) {
          td.textContent = cell.t;
          if (cell.p) td.classList.add("partial");
          if (cell.sub) td.classList.add("subset");
          if (cell.loc) td.classList.add("local");
          if (cell.f) td.classList.add("failed");
          if (ranked(cell) && cell.v === best[c.id]) td.classList.add("best");
          td.title = tooltip(table, c, row, cell);
          var grp = groupOf(table, c, id);
          if (grp) {
            td.appendChild(el("sup", { class: "cld" }, grp.letters));
            td.title = grp.text + "\n" + td.title;
          }
          var mk = markOf(table, versus(table, c, id));
          if (mk) {
            td.appendChild(el("span", { class: "sig " + mk.cls }, " " + mk.sym));
            td.title = mk.text + "\n" + td.title;
          }
          td.addEventListener("click", function () { showDetail(table, c, row, cell); });
        }
        r.appendChild(td);
      });
      tbody.appendChild(r);
    });
    t.appendChild(tbody);
    wrap.appendChild(t);
    section.appendChild(wrap);
    return { node: section, shown: shown };
  }

  /* ---------- charts ---------- */
  function renderChart(title, bars) {
    var box = el("div", { class: "chart" });
    box.appendChild(el("h3", {}, title));
    var labelW = 230, barW = 260, rowH = 17, w = labelW + barW + 60, h = bars.length * rowH + 6;
    var max = Math.max.apply(null, bars.map(function (b) { return b.v; }).concat([1]));
    var s = svg("svg", { width: w, height: h, role: "img", "aria-label": title });
    var defs = svg("defs");
    var pat = svg("pattern", { id: "hatch", width: 6, height: 6, patternUnits: "userSpaceOnUse", patternTransform: "rotate(45)" });
    pat.appendChild(svg("rect", { width: 3, height: 6, fill: "#bbb" }));
    defs.appendChild(pat);
    s.appendChild(defs);
    bars.forEach(function (b, i) {
      var y = i * rowH + 3;
      s.appendChild(svg("text", { x: labelW - 6, y: y + 11, "text-anchor": "end" }, b.label));
      var width = Math.max(1, barW * b.v / max);
      s.appendChild(svg("rect", { x: labelW, y: y, width: width, height: rowH - 4,
        fill: b.partial ? "url(#hatch)" : (b.origin === "published" ? "#4a6fa5" : "#d9822b") }));
      s.appendChild(svg("text", { x: labelW + width + 4, y: y + 11 }, b.text));
    });
    box.appendChild(s);
    return box;
  }
  function chartColumns() {
    /* the overview's columns, then (for families the overview does not cover) each table's average,
       or its first columns when it has none */
    var out = [];
    var covered = {};
    D.tables.forEach(function (t) {
      if (t.id === "overview") {
        visibleColumns(t).forEach(function (c) { out.push({ table: t, col: c }); covered[c.family] = 1; });
      }
    });
    D.tables.forEach(function (t) {
      if (t.id === "overview" || covered[t.family] || !tableVisible(t)) return;
      var avg = t.columns.filter(function (c) { return c.id === "avg"; });
      (avg.length ? avg : t.columns.slice(0, 4)).forEach(function (c) { out.push({ table: t, col: c }); });
    });
    return out;
  }
  function renderCharts(visibleRowIds) {
    var list = $("chart-list");
    list.innerHTML = "";
    chartColumns().forEach(function (tc) {
      var table = tc.table, c = tc.col;
      var bars = [];
      Object.keys(table.cells).forEach(function (id) {
        var cell = table.cells[id][c.id];
        if (!visibleRowIds[id] || !cell || cell.v === null) return;
        var row = rowsById[id];
        bars.push({ label: row.name + (row.origin === "published" ? " (pub.)" : " (run)"), v: cell.v, text: cell.t,
          partial: !ranked(cell), origin: row.origin });
      });
      if (!bars.length) return;
      bars.sort(function (a, b) { return (a.partial - b.partial) || (b.v - a.v); });
      var fam = familyLabel(c.family);
      list.appendChild(renderChart(c.label === fam ? c.label : fam + ": " + c.label, bars));
    });
  }

  /* ---------- page ---------- */
  function render() {
    var visibleRowIds = {};
    var nVisible = 0;
    D.rows.forEach(function (r) { if (rowVisible(r)) { visibleRowIds[r.id] = true; nVisible++; } });
    var host = $("tables");
    host.innerHTML = "";
    D.tables.forEach(function (t) {
      if (!tableVisible(t)) return;
      var out = renderTable(t, visibleRowIds);
      if (out.shown.length || t.id === "overview") host.appendChild(out.node);
    });
    renderCharts(visibleRowIds);
    $("shown").textContent = nVisible + " of " + D.rows.length + " rows match";
    var note = $("baseline-note");
    note.hidden = !(SIG && state.baseline);
    if (!note.hidden) note.textContent = "▲ / ▼: significantly better / worse than " + rowsById[state.baseline].name +
      " (paired randomization test on the queries or examples both scored, p < " + SIG.settings.alpha +
      ", not corrected across cells); =: no significant difference; hover for the difference, interval and p. " +
      "Published rows carry no mark: no per-query scores were published. A cell averaged over seeds is tested " +
      "over its items and seeds (two-level bootstrap); an incomplete one is not tested.";
  }

  function init() {
    var m = D.meta;
    $("meta").textContent = "Built " + m.generated_at + " from " + m.n_records + " record(s) (" + m.n_failed +
      " failed) in " + (m.results_dirs.join(", ") || "no results directory") + ". Combine rule: " + m.combine + ".";
    if (m.skipped.length) {
      var d = el("details", { id: "skipped" });
      d.appendChild(el("summary", {}, m.skipped.length + " file(s) skipped (malformed or not a result record)"));
      var ul = el("ul");
      m.skipped.forEach(function (s) { ul.appendChild(el("li", {}, s)); });
      d.appendChild(ul);
      $("meta").appendChild(d);
    }
    m.rules.forEach(function (r) { $("rules-list").appendChild(el("li", {}, r)); });
    var sizes = {};
    D.rows.forEach(function (r) { if (r.size) sizes[r.size] = 1; });
    Object.keys(sizes).sort(function (a, b) {
      return ((SIZE_ORDER[a] !== undefined ? SIZE_ORDER[a] : 9) - (SIZE_ORDER[b] !== undefined ? SIZE_ORDER[b] : 9)) || (a < b ? -1 : 1);
    }).forEach(function (s) { $("filter-size").appendChild(el("option", { value: s }, s)); });
    D.tables.forEach(function (t) {
      if (t.id !== "overview") $("filter-family").appendChild(el("option", { value: t.family }, familyLabel(t.family)));
    });
    $("filter-model").addEventListener("input", function (e) { state.model = e.target.value; render(); });
    [["filter-size", "size"], ["filter-family", "family"], ["filter-origin", "origin"]].forEach(function (p) {
      $(p[0]).addEventListener("change", function (e) { state[p[1]] = e.target.value; render(); });
    });
    $("detail-close").addEventListener("click", function () { $("detail").hidden = true; });
    if (SIG) {
      $("baseline-label").hidden = false;
      D.rows.forEach(function (r) {
        if (r.origin !== "published") $("baseline").appendChild(el("option", { value: r.id }, r.name));
      });
      var pre = SIG.settings.baseline;
      D.rows.forEach(function (r) { if (pre && r.origin !== "published" && r.name === pre) state.baseline = r.id; });
      $("baseline").value = state.baseline;
      $("baseline").addEventListener("change", function (e) { state.baseline = e.target.value; render(); });
    }
    if (D.series && D.series.length) {   /* python -m harness.series: series.html, drawn by the build */
      $("series-link").hidden = false;
      $("series-names").textContent = D.series.join(", ");
    }
    var foot = $("sources");
    if (m.sources.length) {
      foot.appendChild(el("h2", {}, "Published sources"));
      var ul2 = el("ul");
      m.sources.forEach(function (s) {
        ul2.appendChild(el("li", {}, s.where + " (" + s.file + "): " + s.citation +
          (s.protocol ? " — protocol: " + s.protocol : "")));
      });
      foot.appendChild(ul2);
    }
    render();
  }
  init();
})();
