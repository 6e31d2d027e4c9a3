"""Operator actions and the note each one carries: who, why (the time is the database's).

An operator's cancel, replay, pause or resume is recorded in the
``operator_actions`` table, in the transaction of the transition itself, with
the actor (the OS user for the command line; whatever identity the caller
has for other front ends), an optional free-text reason, and the database
clock. ``rota job`` and ``rota schedules`` show them.

Both strings come from outside (a command line, an HTTP body) and are
hostile until checked: ``ActionNote.of`` refuses what cannot be stored or
shown safely (too long, NUL, control characters that would rewrite a
terminal line, lone surrogates from undecodable bytes) with a ``ValueError``
that names the field.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from enum import StrEnum

REASON_MAX_CHARS = 1000
ACTOR_MAX_CHARS = 200


class OperatorAction(StrEnum):
    CANCEL = "cancel"
    REPLAY = "replay"
    PAUSE = "pause"
    RESUME = "resume"


def check_note_text(field: str, value: str, max_chars: int) -> str:
    """``value`` if it can be stored and printed as it is; else a ValueError saying why."""
    if len(value) > max_chars:
        raise ValueError(f"{field} is at most {max_chars} characters, got {len(value)}")
    for position, char in enumerate(value, start=1):
        if char == "\x00":
            raise ValueError(
                f"{field} holds a NUL character (at {position}), which cannot be stored"
            )
        if "\ud800" <= char <= "\udfff":
            raise ValueError(
                f"{field} is not valid text at character {position} (bytes that are not UTF-8)"
            )
        if unicodedata.category(char) == "Cc":
            raise ValueError(
                f"{field} holds a control character (U+{ord(char):04X} at {position}); "
                "write it on one line, without escape sequences"
            )
    return value


@dataclass(frozen=True)
class ActionNote:
    """Who asked for an action, and why (``reason`` may be None)."""

    actor: str
    reason: str | None = None

    @classmethod
    def of(cls, actor: str, reason: str | None = None) -> ActionNote:
        """A checked note: an empty reason means none; a bad value raises ValueError."""
        actor = check_note_text("the actor", actor.strip(), ACTOR_MAX_CHARS)
        if not actor:
            raise ValueError("the actor must not be empty")
        if reason is not None:
            reason = check_note_text("the reason", reason.strip(), REASON_MAX_CHARS) or None
        return cls(actor, reason)
