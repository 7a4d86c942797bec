"""What workers and the parent share: framework-free message shapes and the skip signal."""

from __future__ import annotations


class CaseSkipped(Exception):
    """Raised by a backend when an impl cannot run a case (the message is the reason in the row)."""
