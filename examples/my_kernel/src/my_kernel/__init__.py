"""An example user kernel for xlabench: a simple, deliberately untuned Pallas flash attention."""

from my_kernel.attention import blocked_attention

__all__ = ["blocked_attention"]
