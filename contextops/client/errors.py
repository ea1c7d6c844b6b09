"""Deprecated alias of contextops_client.errors; removed in the next release."""

from contextops_client.errors import *  # noqa: F403
from contextops_client.errors import BY_CODE, BY_STATUS, __all__  # noqa: F401
