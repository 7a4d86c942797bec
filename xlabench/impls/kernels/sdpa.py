"""sdpa: torch's scaled_dot_product_attention on the XLA device (torch_xla) and on TorchTPU. Runs every case."""

from __future__ import annotations

from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel, Style

STYLE = Style("#bcbd22", (0, (4, 1.5, 1, 1.5)), "++")

KERNELS = (Kernel(ImplInfo("sdpa", "torch_xla", ATTENTION, ("cpu", "tpu"), (),
                           "torch.nn.functional.scaled_dot_product_attention on the XLA device"),
                  code="xlabench.backends.torch_xla.attention_impls:sdpa", layout="bhsd", style=STYLE),
           Kernel(ImplInfo("sdpa", "torch_tpu", ATTENTION, ("tpu",), (),
                           "torch.nn.functional.scaled_dot_product_attention, torch.compile'd: TorchTPU's lowering"),
                  code="xlabench.backends.torch_tpu.attention_impls:sdpa", layout="bhsd", style=STYLE))
