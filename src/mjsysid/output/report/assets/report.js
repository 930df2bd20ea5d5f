/* mjsysid report: sortable/filterable/paged tables and plotly figures, all drawn on load.
   No network access: plotly.js is inlined or loaded from a local file (see build.py). */
(function () {
  "use strict";

  // ---- parameter table -------------------------------------------------------------------
  function setupTable(table) {
    var tbody = table.tBodies[0];
    var rows = Array.prototype.slice.call(tbody.rows);
    var filterBox = document.getElementById(table.dataset.filter);
    var flaggedBox = document.getElementById(table.dataset.flagged);
    // rows of data-detail="1" (a windowed fit's windows) only when this box is ticked
    var detailBox = table.dataset.detail ? document.getElementById(table.dataset.detail) : null;
    var sizeSel = document.getElementById(table.dataset.pagesize);
    var pager = document.getElementById(table.dataset.pager);
    var info = pager.querySelector(".info");
    var prev = pager.querySelector(".prev");
    var next = pager.querySelector(".next");
    var page = 0;
    var sortCol = -1;
    var sortDir = 1;

    function key(row, col, numeric) {
      var cell = row.cells[col];
      var v = cell.getAttribute("data-v");
      if (v === null) { v = cell.textContent; }
      if (numeric) {
        var x = parseFloat(v);
        return isNaN(x) ? null : x;
      }
      return v.toLowerCase();
    }

    function visibleRows() {
      var q = (filterBox.value || "").trim().toLowerCase();
      var onlyFlagged = flaggedBox.checked;
      return rows.filter(function (r) {
        if (onlyFlagged && r.dataset.flagged !== "1") { return false; }
        if (detailBox && !detailBox.checked && r.dataset.detail === "1") { return false; }
        return !q || r.dataset.search.indexOf(q) >= 0;
      });
    }

    function render() {
      var list = visibleRows();
      var size = parseInt(sizeSel.value, 10) || list.length || 1;
      var pages = Math.max(1, Math.ceil(list.length / size));
      if (page >= pages) { page = pages - 1; }
      var start = page * size;
      var end = Math.min(list.length, start + size);
      var shown = new Set(list.slice(start, end));
      rows.forEach(function (r) { r.hidden = !shown.has(r); });
      info.textContent = list.length === 0 ? "no matching parameters" :
        "rows " + (start + 1) + "–" + end + " of " + list.length +
        (list.length !== rows.length ? " (" + rows.length + " in total)" : "");
      prev.disabled = page === 0;
      next.disabled = page >= pages - 1;
    }

    function sortBy(col, numeric) {
      if (sortCol === col) { sortDir = -sortDir; } else { sortCol = col; sortDir = 1; }
      rows.sort(function (a, b) {
        var ka = key(a, col, numeric);
        var kb = key(b, col, numeric);
        if (ka === null && kb === null) { return a.dataset.order - b.dataset.order; }
        if (ka === null) { return 1; }
        if (kb === null) { return -1; }
        if (ka < kb) { return -sortDir; }
        if (ka > kb) { return sortDir; }
        return a.dataset.order - b.dataset.order;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
        if (i === col) { th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending"); }
        else { th.removeAttribute("aria-sort"); }
      });
      table.classList.toggle("sorted", true);
      page = 0;
      render();
    }

    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      var btn = th.querySelector("button");
      if (btn) {
        btn.addEventListener("click", function () { sortBy(i, th.dataset.type === "num"); });
      }
    });
    filterBox.addEventListener("input", function () { page = 0; render(); });
    flaggedBox.addEventListener("change", function () { page = 0; render(); });
    if (detailBox) { detailBox.addEventListener("change", function () { page = 0; render(); }); }
    sizeSel.addEventListener("change", function () { page = 0; render(); });
    prev.addEventListener("click", function () { page -= 1; render(); });
    next.addEventListener("click", function () { page += 1; render(); });
    render();
  }

  // ---- figures ---------------------------------------------------------------------------
  // Every figure that is not inside a closed <details> is drawn when the page loads (a
  // screenshot, a PDF or a print shows them all); a figure inside a closed <details> is
  // drawn when it is opened (drawn hidden, plotly would not know its width).
  var FIGS = {};
  var blob = document.getElementById("mjsysid-figures");
  if (blob) { FIGS = JSON.parse(blob.textContent); }
  var CONFIG = { responsive: true, displaylogo: false, scrollZoom: false };
  var PRINT_WIDTH = 680; // CSS px: an A4 or Letter page less its margins

  function draw(el) {
    if (el.dataset.drawn) { return Promise.resolve(); }
    el.dataset.drawn = "1";
    var fig = FIGS[el.dataset.fig];
    if (!fig) { el.textContent = "figure data missing"; return Promise.resolve(); }
    if (typeof window.Plotly === "undefined") {
      el.className += " reason";
      el.textContent = "plotly.js could not be loaded (" + PLOTLY_TRIED.join(", ") + "): " +
        "rewrite the report with 'mjsysid report FOLDER' on a machine with mjsysid, or " +
        "make it standalone (default_report(..., plotly_js='copy'))";
      return Promise.resolve();
    }
    return window.Plotly.newPlot(el, fig.data, fig.layout, CONFIG);
  }

  function shown(el) {
    for (var d = el.closest("details"); d; d = d.parentElement.closest("details")) {
      if (!d.open) { return false; }
    }
    return true;
  }

  function drawAll(els) {
    // one after the other, yielding between them so the page stays responsive
    return els.reduce(function (chain, el, k) {
      return chain.then(function () {
        return draw(el).then(function () {
          return k % 4 === 3 ? new Promise(function (r) { setTimeout(r, 0); }) : null;
        });
      });
    }, Promise.resolve());
  }

  function visibleFigures(root) {
    return Array.prototype.filter.call(root.querySelectorAll("[data-fig]"), function (el) {
      return !el.dataset.drawn && shown(el);
    });
  }

  function setupFigures() {
    document.querySelectorAll("details").forEach(function (d) {
      d.addEventListener("toggle", function () { if (d.open) { drawAll(visibleFigures(d)); } });
    });
    // On paper the page is narrower than the screen: every plot is drawn PRINT_WIDTH wide
    // (or narrower) while printing, and fits the window again after.
    function forPrint(printing) {
      if (!window.Plotly) { return; }
      document.querySelectorAll(".js-plotly-plot").forEach(function (el) {
        if (printing) {
          var w = el._fullLayout ? el._fullLayout.width : PRINT_WIDTH;
          window.Plotly.relayout(el, { width: Math.min(w, PRINT_WIDTH) });
        } else {
          var fixed = (FIGS[el.dataset.fig] || { layout: {} }).layout.width;
          window.Plotly.relayout(el, { width: fixed || null, autosize: true });
        }
      });
    }
    window.addEventListener("beforeprint", function () { forPrint(true); });
    window.addEventListener("afterprint", function () { forPrint(false); });
    if (window.matchMedia) {
      var media = window.matchMedia("print");
      var onChange = function (e) { forPrint(e.matches); };
      if (media.addEventListener) { media.addEventListener("change", onChange); }
      else if (media.addListener) { media.addListener(onChange); }
    }
    return drawAll(visibleFigures(document));
  }

  // plotly.js: inlined, or the first of the sources (shared copy, then the folder's) that loads
  var PLOTLY_TRIED = [];
  function loadPlotly() {
    var el = document.getElementById("mjsysid-plotly");
    var sources = el ? JSON.parse(el.textContent) : [];
    return new Promise(function (resolve) {
      (function next(i) {
        if (typeof window.Plotly !== "undefined" || i >= sources.length) { resolve(); return; }
        PLOTLY_TRIED.push(sources[i]);
        var s = document.createElement("script");
        s.src = sources[i];
        s.onload = function () { resolve(); };
        s.onerror = function () { s.remove(); next(i + 1); };
        document.head.appendChild(s);
      })(0);
    });
  }

  function setupExpanders() {
    document.querySelectorAll("[data-expand]").forEach(function (btn) {
      btn.addEventListener("click", function () {
        var open = btn.dataset.expand === "open";
        document.querySelectorAll("details.sequence").forEach(function (d) { d.open = open; });
      });
    });
  }

  document.querySelectorAll("table[data-sortable]").forEach(setupTable);
  setupExpanders();
  loadPlotly().then(setupFigures).then(function () {
    document.documentElement.dataset.ready = "1";
  });
})();
