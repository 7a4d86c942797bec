"""The framework-free measuring core, above the worker protocol: what every floor above may import.

Its modules: README.md, Layout.
"""
