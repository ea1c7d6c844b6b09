"""Deprecated alias of contextops_client.types; removed in the next release."""

from contextops_client.types import *  # noqa: F403
from contextops_client.types import __all__  # noqa: F401
