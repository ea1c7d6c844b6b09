"""The ``frames.conversation`` Django app."""

from django.apps import AppConfig


class ConversationConfig(AppConfig):
    name = "frames.conversation"
    label = "conversation"
    verbose_name = "Conversation and compaction"
