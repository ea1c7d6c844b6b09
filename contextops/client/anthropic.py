"""Deprecated alias of contextops_client.anthropic; removed in the next release."""

from contextops_client.anthropic import *  # noqa: F403
from contextops_client.anthropic import (  # noqa: F401
    SUMMARY_PREFIX,
    AsyncRecorder,
    Recorder,
    __all__,
    canonical,
    jsonable,
    reply_message,
    usage_of,
)
