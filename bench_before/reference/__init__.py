"""Oracles: each task's math in plain PyTorch, with its input generator.

Every module here provides ``generate_input(**params) -> (args, kwargs)`` (CPU tensors, deterministic in
``seed``) and ``ref_kernel(args, kwargs) -> tuple[torch.Tensor, ...]``, one tensor per output declared in the
task's ``task.yaml``. They run only in the judge process, never beside a submission.
"""
