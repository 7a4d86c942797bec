"""xla_sdpa: JAX's dot_product_attention on its XLA path. Runs every case."""

from __future__ import annotations

from xlabench.impls.kernel import ALL_PLATFORMS, ATTENTION, ImplInfo, Kernel, Style

KERNELS = (Kernel(ImplInfo("xla_sdpa", "jax", ATTENTION, ALL_PLATFORMS, (),
                           "jax.nn.dot_product_attention(implementation='xla')"),
                  code="xlabench.backends.jax.attention_impls:xla_sdpa", style=Style("#8c564b", (0, (4, 1.5, 1, 1.5)), "..")),)
