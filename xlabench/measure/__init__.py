"""The framework-free measuring core, on the bottom floor: what every other package may import.

Modules: ``timers`` (the timer names a suite, the CLI and the backends agree on), ``power`` (the
samples a case needs before the gate's test can call it significant).
"""
