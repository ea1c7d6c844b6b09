"""The server's version, as pyproject.toml says it; the dashboard shows it in its footer."""

__version__ = "0.2.0"
