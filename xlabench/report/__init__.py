"""What a person reads of a run: the terminal summary of `run` (summary), the data behind every chart
(chartdata: pure pandas), the charts (plots: matplotlib) and the markdown report (markdown)."""
