"""Proposed supersessions between facts of different subjects, as plain functions.

Two current facts in one scope may say nearly the same thing about what looks like the
same entity under different subjects ("meeting_day: Tuesday 2pm" and "sync_meeting:
Thursday 3pm"). Such a pair is only ever *proposed*: a person (or an agent whose
authority allows) decides. Two signals must agree:

- meaning: the cosine similarity of the stored vectors of ``"{key}: {value}"`` is at
  least ``SIMILARITY_THRESHOLD`` (tuned on tests/fixtures/conflict_pairs.json, see
  ``make bench-conflicts``);
- the entity, lexically: the subjects and keys share a word that names a thing, not
  one of the generic words many subjects end with (limit, date, policy, ...), and not
  both sides name something the other does not ("shipping_cost_eu" and
  "shipping_cost_us" are two entities; "wifi_password" and "office_wifi_password" may
  be one).

The values must differ (the same value is no conflict, only a repetition).
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .supersession import subject_for_key

# Tuned on the labelled pairs (docs/benchmarks-conflicts.md, make bench-conflicts) with
# the default wordllama vectors: the vectors are of "{key}: {value}" and the values of a
# conflict differ by definition, so even one entity scores low; the floor drops the pairs
# whose words match by chance and whose statements have nothing in common.
SIMILARITY_THRESHOLD = 0.25

# Words that say what kind of value a subject holds, not what it is about: sharing only
# these ("refund_limit" and "travel_limit") says nothing about the entity.
GENERIC_WORDS = {
    "limit",
    "limits",
    "max",
    "min",
    "maximum",
    "minimum",
    "date",
    "day",
    "time",
    "status",
    "state",
    "name",
    "id",
    "count",
    "number",
    "total",
    "amount",
    "value",
    "policy",
    "rule",
    "rate",
    "price",
    "cost",
    "budget",
    "type",
    "level",
    "version",
    "config",
    "setting",
    "settings",
    "default",
    "current",
    "info",
    "details",
    "preference",
    "window",
    "period",
    "length",
    "duration",
    "schedule",
    "location",
    "provider",
    "term",
    "terms",
    "model",
    "month",
    "year",
    "start",
    "end",
    "notice",
    "main",
    "primary",
    "standard",
    "new",
    "next",
    "weekly",
    "daily",
    "annual",
    "quarterly",
    "favorite",
}

_SPLIT = re.compile(r"[^0-9a-z]+")
# Only the words that never name anything: "us", "it" or a number do, in a key.
_KEY_STOPWORDS = {"of", "to", "the", "and", "for", "a", "an", "in", "on", "at", "by", "with"}
_VERSION = re.compile(r"^v\d+$")


def entity_words(key: str, subject: str) -> set[str]:
    """The words of a fact's subject and key (version suffixes, a few stop words and
    one-letter words out; a plural's trailing ``s`` dropped)."""
    words = set()
    for text in (subject or "", subject_for_key(key or "")):
        for word in _SPLIT.split(text.lower()):
            if len(word) < 2 or _VERSION.match(word) or word in _KEY_STOPWORDS:
                continue
            if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
                word = word[:-1]
            words.add(word)
    return words


def matched_words(a: set[str], b: set[str]) -> list[str]:
    """The entity words two facts share, when they are enough to think them about one
    entity: one names a thing (not only generic words), and at most one side names
    something the other does not. Empty otherwise."""
    shared = a & b
    if not shared or not (shared - GENERIC_WORDS):
        return []
    # Each side naming something the other does not ("shipping_cost_eu" and
    # "shipping_cost_us", "parking_spot_ada" and "parking_spot_tom"): two entities.
    if (a - shared - GENERIC_WORDS) and (b - shared - GENERIC_WORDS):
        return []
    return sorted(shared)


@dataclass(frozen=True)
class Candidate:
    key: str
    subject: str
    value: Any
    vector: Any  # a normalized numpy row, or None when the fact has no stored vector


@dataclass(frozen=True)
class Evidence:
    """Why a pair is proposed: both values, the similarity and the words that matched."""

    similarity: float
    words: list[str]


def conflict_evidence(
    new: Candidate,
    other: Candidate,
    threshold: float = SIMILARITY_THRESHOLD,
) -> Evidence | None:
    """The evidence for proposing that ``new`` supersedes ``other``, or None when the pair
    is no conflict: same subject (the supersession rules already decide those), the same
    value, a missing vector, too little similarity or no shared entity word."""
    if new.subject == other.subject or new.value == other.value:
        return None
    if new.vector is None or other.vector is None:
        return None
    words = matched_words(
        entity_words(new.key, new.subject), entity_words(other.key, other.subject)
    )
    if not words:
        return None
    similarity = float(new.vector @ other.vector)
    if similarity < threshold:
        return None
    return Evidence(similarity=round(similarity, 4), words=words)


def search_words(words: Iterable[str]) -> list[str]:
    """The entity words worth a lexical pre-filter of candidates: the non-generic ones."""
    return sorted(w for w in words if w not in GENERIC_WORDS)
