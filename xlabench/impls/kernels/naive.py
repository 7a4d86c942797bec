"""naive: plain attention in each framework (XLA fuses it), and the paged path that gathers every
sequence's pages into dense K/V first. No blocks, no search; the paged one refuses megacore_mode."""

from __future__ import annotations

from xlabench.impls.kernel import ALL_PLATFORMS, ATTENTION, PAGED, ImplInfo, Kernel, Style
from xlabench.workloads.paged import megacore_only_paged

NAME = "naive"  # what suites, rows and the other modules call it (they import this, never spell it)

STYLE = Style("#555555", (0, (2, 1.5)), "")

KERNELS = (
    Kernel(ImplInfo(NAME, "jax", ATTENTION, ALL_PLATFORMS, (),
                    "plain jnp einsum + softmax in float32 logits; XLA fuses it"),
           code="xlabench.backends.jax.attention_impls:naive", style=STYLE),
    Kernel(ImplInfo(NAME, "jax", PAGED, ALL_PLATFORMS, (),
                    "gather every sequence's pages into dense K/V, mask by length, plain jnp attention"),
           megacore_only_paged, code="xlabench.backends.jax.paged_impls:naive", style=STYLE),
    Kernel(ImplInfo(NAME, "torch_xla", ATTENTION, ("cpu", "tpu"), (),
                    "plain torch matmul + softmax (float32 logits) on the XLA device; XLA fuses it"),
           code="xlabench.backends.torch_xla.attention_impls:naive", style=STYLE),
    Kernel(ImplInfo(NAME, "torch_xla", PAGED, ("cpu", "tpu"), (),
                    "gather every sequence's pages into dense K/V, mask by length, plain torch attention"),
           megacore_only_paged, code="xlabench.backends.torch_xla.paged_impls:naive", style=STYLE),
    Kernel(ImplInfo(NAME, "torch_tpu", ATTENTION, ("tpu",), (),
                    "plain torch matmul + softmax (float32 logits) on TorchTPU, torch.compile'd"),
           code="xlabench.backends.torch_tpu.attention_impls:naive", style=STYLE),
    Kernel(ImplInfo(NAME, "torch_tpu", PAGED, ("tpu",), (),
                    "gather every sequence's pages into dense K/V, mask by length, plain torch attention, compiled"),
           megacore_only_paged, code="xlabench.backends.torch_tpu.paged_impls:naive", style=STYLE),
)
