"""What a run shows people: plain-text band tables for logs (tables), the runs list and `show` (overview, show),
and the run's own page, report/index.html (run_report writes it: collect reads the run into views, render draws
them with the plotly charts of charts and the page's style and table script in static/)."""
