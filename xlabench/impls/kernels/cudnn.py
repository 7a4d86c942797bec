"""cudnn: JAX's dot_product_attention on cuDNN's fused kernel (GPU), which takes half-precision inputs."""

from __future__ import annotations

from typing import Optional

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel, Style


def cudnn(b, sq, sk, hq, hkv, dtype, cfg, platform) -> Optional[str]:
    if dtype not in ("bfloat16", "float16"):
        return f"cuDNN fused attention needs bfloat16/float16 inputs, got {dtype}"
    return None


KERNELS = (Kernel(ImplInfo("cudnn", "jax", ATTENTION, ("gpu",), (),
                           "jax.nn.dot_product_attention(implementation='cudnn')"), cudnn,
                  code="xlabench.backends.jax.attention_impls:cudnn", style=Style("#9467bd", (0, (3, 1, 1, 1, 1, 1)), "++")),)
