// Draws the figures whose plotly JSON the page carries, and opens an attempt on a click.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll('script[type="application/json"][data-figure]').forEach(function (block) {
    var target = document.getElementById(block.dataset.figure);
    var fig = JSON.parse(block.textContent);
    Plotly.newPlot(target, fig.data, fig.layout, {displaylogo: false, responsive: true}).then(function () {
      target.on("plotly_click", function (ev) {
        var url = ev.points.length && ev.points[0].customdata;
        if (typeof url === "string") { window.location.href = url; }
      });
    });
  });
});
