"""The sandbox's C fork loop (sandbox/_forkserver.c). Everything else is configured in pyproject.toml.

The extension is optional: where it cannot be built, the sandbox runs the same loop in Python,
slower, and its isolation report says which one runs.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("agentrl.sandbox._forkserver", ["sandbox/_forkserver.c"], optional=True,
                             extra_compile_args=["-O2", "-Wall"])])
