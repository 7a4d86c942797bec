"""`xlabench explain`: where a row's step time goes, by category of HLO op (docs/explain.md). Framework-free."""
