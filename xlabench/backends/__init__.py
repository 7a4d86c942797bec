"""Backends: how a framework computes a workload. Imported only inside worker processes."""
