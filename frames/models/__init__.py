from .core import ContextHandle, Event, Frame, Session, Usage
from .suspension import Suspension

__all__ = ["ContextHandle", "Event", "Frame", "Session", "Suspension", "Usage"]
from .context import ContextPackRecord  # noqa: E402,F401
