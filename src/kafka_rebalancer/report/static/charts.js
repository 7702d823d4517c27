(function () {
  "use strict";
  var config = PLOTLY_CONFIG;
  function draw(div) {
    var figure = JSON.parse(document.getElementById(div.id + "-figure").textContent);
    Plotly.newPlot(div, figure.data, figure.layout, config);
  }
  var charts = document.querySelectorAll("div.chart");
  if (!("IntersectionObserver" in window)) { Array.prototype.forEach.call(charts, draw); return; }
  var watcher = new IntersectionObserver(function (entries) {
    entries.forEach(function (entry) {
      if (entry.isIntersecting) { watcher.unobserve(entry.target); draw(entry.target); }
    });
  }, {rootMargin: "300px"});
  Array.prototype.forEach.call(charts, function (div) { watcher.observe(div); });
})();
