"""Small Gymnasium wrappers: text observation, text action, chat history."""

from llmgym.errors import InvalidActionError
from llmgym.wrappers.history import ChatHistory, HistoryWrapper
from llmgym.wrappers.text_action import TextAction
from llmgym.wrappers.text_observation import TextObservation

__all__ = ["ChatHistory", "HistoryWrapper", "InvalidActionError", "TextAction", "TextObservation"]
