(function () {
  "use strict";
  function forEach(list, fn) { Array.prototype.forEach.call(list, fn); }
  function sortKey(row, index, numeric) {
    var cell = row.cells[index];
    var value = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
    return numeric ? parseFloat(value) : value;
  }
  forEach(document.querySelectorAll("table.sortable"), function (table) {
    var headers = table.tHead.rows[0].cells;
    forEach(headers, function (th, index) {
      th.addEventListener("click", function () {
        var numeric = th.getAttribute("data-type") === "number";
        var ascending = th.getAttribute("aria-sort") !== "ascending";
        forEach(headers, function (other) { other.removeAttribute("aria-sort"); });
        th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        rows.sort(function (a, b) {
          var x = sortKey(a, index, numeric), y = sortKey(b, index, numeric);
          var order = numeric ? (x === y ? 0 : (x < y ? -1 : 1)) : x.localeCompare(y, undefined, {numeric: true});
          return ascending ? order : -order;
        });
        var fragment = document.createDocumentFragment();
        rows.forEach(function (row) { fragment.appendChild(row); });
        body.appendChild(fragment);
      });
    });
  });
  forEach(document.querySelectorAll("input[data-filters]"), function (input) {
    var table = document.getElementById(input.getAttribute("data-filters"));
    var counter = document.getElementById(input.getAttribute("data-filters") + "-count");
    if (!table) { return; }
    input.addEventListener("input", function () {
      var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      var rows = table.tBodies[0].rows;
      var shown = 0;
      forEach(rows, function (row) {
        var text = row.textContent.toLowerCase();
        var match = words.every(function (word) { return text.indexOf(word) !== -1; });
        row.hidden = !match;
        if (match) { shown += 1; }
      });
      if (counter) { counter.textContent = words.length ? shown + " of " + rows.length + " rows" : ""; }
    });
  });
})();
