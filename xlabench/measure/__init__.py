"""The framework-free measuring core, on the bottom floor: what every other package may import.

Its modules: README.md, Layout.
"""
