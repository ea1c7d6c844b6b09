"""contextops_client: the agent side of contextops, standalone (httpx and the stdlib only).

    from contextops_client import Client, InsufficientTokens

See docs/agents.md. ``contextops_client.anthropic.wrap`` adds the Anthropic SDK wrapper.
The JSON bodies the methods return are typed in ``contextops_client.types``; those a
method returns whole, and the ``.data`` of Session, Frame and Suspension, import from here.
"""

from ._core import Frame, Session, SessionResume, Suspension
from ._http import RetryPolicy
from ._version import __version__
from .aio import AsyncClient
from .errors import *  # noqa: F403
from .errors import __all__ as _errors
from .sync import Client
from .types import (
    Compaction,
    CompactionQueued,
    ConstraintCheck,
    ContextPack,
    ContextPackRecord,
    Environment,
    Event,
    Fact,
    FactPage,
    FactWrite,
    FrameCompaction,
    FrameData,
    FrameHandle,
    Handle,
    HandlePageIn,
    HandlePageOut,
    Health,
    ImportJob,
    ImportQueued,
    ImportSummary,
    Lineage,
    MessagesAppended,
    Pressure,
    RlmCheckpoint,
    RlmCheckpointDetail,
    RlmCompletion,
    RlmExport,
    RlmMutation,
    RlmState,
    RlmStatePage,
    RlmVariable,
    RlmVariableRead,
    SessionData,
    SessionPage,
    SuspensionData,
    Turn,
    UsageTotals,
    WorkingSetItem,
)

__all__ = [
    "__version__",
    "AsyncClient",
    "Client",
    "Frame",
    "RetryPolicy",
    "Session",
    "Suspension",
    "Compaction",
    "CompactionQueued",
    "ConstraintCheck",
    "ContextPack",
    "ContextPackRecord",
    "Environment",
    "Event",
    "Fact",
    "FactPage",
    "FactWrite",
    "FrameData",
    "FrameCompaction",
    "FrameHandle",
    "Handle",
    "HandlePageIn",
    "HandlePageOut",
    "Health",
    "ImportJob",
    "ImportQueued",
    "ImportSummary",
    "Lineage",
    "MessagesAppended",
    "Pressure",
    "RlmCheckpoint",
    "RlmCheckpointDetail",
    "RlmCompletion",
    "RlmExport",
    "RlmMutation",
    "RlmState",
    "RlmStatePage",
    "RlmVariable",
    "RlmVariableRead",
    "SessionData",
    "SessionPage",
    "SessionResume",
    "SuspensionData",
    "Turn",
    "UsageTotals",
    "WorkingSetItem",
    *_errors,
]
