/* mjsysid report: sortable/filterable/paged parameter table and lazily drawn plotly figures.
   No network access: plotly.js is loaded from the file next to the report. */
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
  var FIGS = {};
  var blob = document.getElementById("mjsysid-figures");
  if (blob) { FIGS = JSON.parse(blob.textContent); }
  var CONFIG = { responsive: true, displaylogo: false, scrollZoom: false };

  function draw(el) {
    if (el.dataset.drawn) { return; }
    el.dataset.drawn = "1";
    var fig = FIGS[el.dataset.fig];
    if (!fig) { el.textContent = "figure data missing"; return; }
    if (typeof window.Plotly === "undefined") {
      el.className += " reason";
      el.textContent = "plotly.js could not be loaded: keep the report_assets folder next to " +
        "report.html.";
      return;
    }
    window.Plotly.newPlot(el, fig.data, fig.layout, CONFIG);
  }

  function setupFigures() {
    var els = document.querySelectorAll("[data-fig]");
    if (!("IntersectionObserver" in window)) {
      Array.prototype.forEach.call(els, draw);
      return;
    }
    var io = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) {
        if (e.isIntersecting) { io.unobserve(e.target); draw(e.target); }
      });
    }, { rootMargin: "400px 0px" });
    Array.prototype.forEach.call(els, function (el) { io.observe(el); });
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
  setupFigures();
  document.documentElement.dataset.ready = "1";
})();
