"""contextops.client: the agent side of contextops, standalone (httpx and the stdlib only).

    from contextops.client import Client, InsufficientTokens

See docs/agents.md. ``contextops.client.anthropic.wrap`` adds the Anthropic SDK wrapper.
"""

from ._core import Frame, Session, Suspension
from ._http import RetryPolicy
from .aio import AsyncClient
from .errors import *  # noqa: F403
from .errors import __all__ as _errors
from .sync import Client

__all__ = ["AsyncClient", "Client", "Frame", "RetryPolicy", "Session", "Suspension", *_errors]
