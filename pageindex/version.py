"""The package version, named once: the `pageindex` marker in every footer written records it.

pyproject.toml reads it from here; `pageindex.__version__` re-exports it.
"""
__version__ = "0.1.0"
