"""What a person reads of a run: the terminal summary of `run` (summary), the data behind every chart
(chartdata: pure pandas), the charts (plots: matplotlib) the markdown report (markdown), and which
files a command reads from the paths it is given (inputs: folders, samples and compile files)."""
