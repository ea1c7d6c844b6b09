"""The client's version, as clients/python/pyproject.toml says it (and its User-Agent)."""

__version__ = "0.3.0"
