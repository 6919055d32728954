"""The worker side: the only code that runs in a submission's process (main.py), with the sandbox, the op audit, the
address check, the write check, the GPU compile check, the interpreter's patches, the Triton cache layered over the
staff's (tritoncache.py) and the speed tests' timing. Imports nothing of the trusted side."""
