"""What a run shows people: plain-text band tables for logs (tables), the runs list and `show` (overview, show),
and the run's own page, report/index.html (run_report, with its plotly charts in charts)."""
