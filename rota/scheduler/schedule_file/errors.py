"""Problems found in a schedule file: ``file:line: message``, all of them at once."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the file; ``line`` is 1-based, at the offending key or value."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class ConfigError(ValueError):
    """A schedule file refused whole, with every problem found (in line order)."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(sorted(problems, key=lambda p: (p.file, p.line)))
        super().__init__("\n".join(str(p) for p in self.problems))
