"""Deprecated alias of contextops_client; removed in the next release."""

from contextops_client import *  # noqa: F403
from contextops_client import __all__  # noqa: F401
