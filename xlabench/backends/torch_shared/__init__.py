"""Plain torch shared by the torch backends (torch_xla, torch_tpu): the GPT-2 / LLaMA model and the attention
math written with torch ops. Imports torch only, never a backend's runtime: each backend's worker imports
its runtime (torch_xla, torch_tpu) first."""
