from .core import FAILURE_REASON_MAX, ContextHandle, Event, Frame, Session, Usage
from .pricing import ModelPrice
from .suspension import Suspension, token_hash

__all__ = [
    "FAILURE_REASON_MAX",
    "ContextHandle",
    "Event",
    "Frame",
    "ModelPrice",
    "Session",
    "Suspension",
    "Usage",
    "token_hash",
]
from .archive import EventArchive  # noqa: E402,F401
from .context import ContextPackRecord, HandleAnnotation, ResourceMap  # noqa: E402,F401
