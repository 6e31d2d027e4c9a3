"""Who a request is: named tokens with roles, from ``ROTA_API_TOKEN`` and ``ROTA_API_TOKENS_FILE``.

``ROTA_API_TOKEN`` is one token, an admin named ``default``. ``ROTA_API_TOKENS_FILE``
names a YAML file of more, each with a name and a role, holding the SHA-256 of the
token (hex, of its UTF-8 bytes) and never the token itself::

    tokens:
      - name: alice
        role: operator
        sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8

A bad file is refused whole (``TokensFileError``, one ``file:line: message`` per
problem) before the server binds. Its messages name keys, roles and names, never a
token or a hash: a hash names its token to anyone who can guess it.

A presented token is hashed and compared with every entry's hash in constant time
(``hmac.compare_digest`` over equal-length digests, no early exit), so neither its
length nor which entry it resembles leaks through timing.
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import hmac
import os
import re
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

TOKEN_ACTOR = "default"  # the name of ROTA_API_TOKEN's identity
NO_TOKEN_ACTOR = "anonymous"  # no token configured: loopback only, nobody proved a name
MAX_FILE_BYTES = 1024 * 1024  # thousands of tokens; more is a wrong path, not a tokens file
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")  # a logfmt value without quoting
HEX_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
ENTRY_KEYS = ("name", "role", "sha256")


class Role(enum.Enum):
    """What a token may do; each role may do everything of the roles before it."""

    VIEWER = "viewer"  # reads: the API's GETs, /metrics, the dashboard
    OPERATOR = "operator"  # job and schedule actions, POST /jobs
    ADMIN = "admin"  # everything, configuration included

    @property
    def rank(self) -> int:
        return list(Role).index(self)

    def allows(self, needed: Role) -> bool:
        return self.rank >= needed.rank


ROLE_NAMES = tuple(r.value for r in Role)


@dataclass(frozen=True)
class Identity:
    """The name a request proved (its actor) and what it may do."""

    name: str
    role: Role


ANONYMOUS = Identity(NO_TOKEN_ACTOR, Role.ADMIN)


@dataclass(frozen=True)
class TokenEntry:
    identity: Identity
    digest: bytes  # SHA-256 of the token's UTF-8 bytes
    line: int = 0  # where the file names it (0: ROTA_API_TOKEN)
    digest_line: int = 0  # where the file holds its sha256


def digest(token: bytes) -> bytes:
    return hashlib.sha256(token).digest()


EMPTY_DIGEST = digest(b"")  # never a token: an empty Bearer would match it


class TokenTable:
    """Every token this server accepts. Empty: no token is configured (open on loopback)."""

    def __init__(self, entries: Sequence[TokenEntry] = ()) -> None:
        self._entries = tuple(entries)

    @classmethod
    def of(cls, token: str | None = None, entries: Sequence[TokenEntry] = ()) -> TokenTable:
        """``token`` (ROTA_API_TOKEN, an admin named ``default``) beside ``entries``."""
        if not token:
            return cls(entries)
        own = TokenEntry(Identity(TOKEN_ACTOR, Role.ADMIN), digest(token.encode()))
        return cls([own, *entries])

    @property
    def empty(self) -> bool:
        return not self._entries

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.identity.name for e in self._entries)

    def identify(self, candidates: Iterable[bytes]) -> Identity | None:
        """The identity of the first candidate that is a known token, or None.

        Every candidate is compared with every entry: the time taken depends on how
        many were given, never on which (if any) matched.
        """
        found: Identity | None = None
        for candidate in candidates:
            given = digest(candidate)
            for entry in self._entries:
                if hmac.compare_digest(given, entry.digest) and found is None:
                    found = entry.identity
        return found


class TokensFileError(ValueError):
    """The tokens file is refused: ``problems`` are ``file:line: message`` lines."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = list(problems)


def token_table(token: str | None, tokens_file: str | None) -> TokenTable:
    """The tokens of ``ROTA_API_TOKEN`` and the file ``ROTA_API_TOKENS_FILE`` names."""
    if not tokens_file:
        return TokenTable.of(token)
    entries = read_tokens_file(tokens_file)
    problems: list[str] = []
    if token:
        own = digest(token.encode())
        for e in entries:
            if e.identity.name == TOKEN_ACTOR:
                problems.append(
                    f"{tokens_file}:{e.line}: name {TOKEN_ACTOR!r} is ROTA_API_TOKEN's: "
                    "choose another name"
                )
            if hmac.compare_digest(e.digest, own):
                problems.append(
                    f"{tokens_file}:{e.digest_line}: {e.identity.name!r} has the same sha256 "
                    "as ROTA_API_TOKEN (two names for one token)"
                )
    if problems:
        raise TokensFileError(problems)
    return TokenTable.of(token, entries)


def read_tokens_file(path: str) -> list[TokenEntry]:
    return parse_tokens_text(_read_text(path), path)


def _read_text(path: str) -> str:
    """The file's text; a FIFO, a device or a huge file is refused before it is read."""

    def refuse(message: str) -> TokensFileError:
        return TokensFileError([f"{path}:1: {message} (ROTA_API_TOKENS_FILE)"])

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise refuse(f"cannot read the tokens file: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise refuse("cannot read the tokens file: it is not a regular file")
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise refuse(f"the tokens file is larger than {MAX_FILE_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("the tokens file is not UTF-8 text") from None


def parse_tokens_text(text: str, where: str) -> list[TokenEntry]:
    """The entries of a tokens file's ``text`` (``where`` names it in messages)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise TokensFileError([f"{where}:{line}: not YAML: {problem}"]) from None
    return _Parser(where).file(root)


class _Parser:
    """Checks a composed YAML tree, collecting every problem before refusing the file."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.problems: list[str] = []

    def problem(self, node: Node | None, message: str) -> None:
        line = node.start_mark.line + 1 if node is not None else 1
        self.problems.append(f"{self.where}:{line}: {message}")

    def file(self, root: Node | None) -> list[TokenEntry]:
        if not isinstance(root, MappingNode):
            self.problem(root, "the file has no tokens: list (tokens: [{name, role, sha256}])")
            raise TokensFileError(self.problems)
        tokens = self.mapping(root, ("tokens",)).get("tokens")
        if tokens is None and not self.problems:
            self.problem(root, "the file has no tokens: list (tokens: [{name, role, sha256}])")
        entries: list[TokenEntry] = []
        if isinstance(tokens, SequenceNode):
            if not tokens.value:
                self.problem(tokens, "tokens: names no token")
            entries = self.entries(tokens.value)
        elif tokens is not None:
            self.problem(tokens, "tokens: must be a list of {name, role, sha256}")
        if self.problems:
            raise TokensFileError(self.problems)
        return entries

    def mapping(self, node: MappingNode, keys: Sequence[str]) -> dict[str, Node]:
        """The node's values by key; unknown and repeated keys are problems."""
        found: dict[str, Node] = {}
        for key_node, value in node.value:
            key = key_node.value if isinstance(key_node, ScalarNode) else None
            if not isinstance(key, str):
                self.problem(key_node, "a key must be a word")
            elif key in found:
                self.problem(key_node, f"duplicate key {key[:40]!r}")
            elif key not in keys:
                self.problem(key_node, f"unknown key {key[:40]!r}{_hint(key, keys)}")
            else:
                found[key] = value
        return found

    def entries(self, nodes: Sequence[Node]) -> list[TokenEntry]:
        entries: list[TokenEntry] = []
        names: dict[str, int] = {}
        digests: dict[bytes, tuple[str, int]] = {}
        for node in nodes:
            entry = self.entry(node)
            if entry is None:
                continue
            name, line = entry.identity.name, entry.line
            if name in names:
                self.problem(node, f"name {name!r} is taken (line {names[name]})")
                continue
            names[name] = line
            if entry.digest in digests:
                first, at = digests[entry.digest]
                self.problems.append(
                    f"{self.where}:{entry.digest_line}: {name!r} has the same sha256 as "
                    f"{first!r} (line {at}): two names for one token"
                )
                continue
            digests[entry.digest] = (name, line)
            entries.append(entry)
        return entries

    def entry(self, node: Node) -> TokenEntry | None:
        if not isinstance(node, MappingNode):
            self.problem(node, "each token is a mapping of name, role and sha256")
            return None
        values = self.mapping(node, ENTRY_KEYS)
        before = len(self.problems)
        for key in ENTRY_KEYS:
            if key not in values:
                self.problem(node, f"missing {key}")
        name = self.text(values.get("name"))
        if "name" in values and (name is None or not NAME.fullmatch(name)):
            self.problem(
                values["name"],
                "name: letters, digits and . _ @ + - (at most 64, starting with a letter or digit)",
            )
        elif name == NO_TOKEN_ACTOR:
            self.problem(values["name"], f"name {name!r} is the actor where no token is set")
        role = self.text(values.get("role"))
        if "role" in values and role not in ROLE_NAMES:
            shown = repr(role[:40]) if role is not None else "that"
            self.problem(values["role"], f"role {shown} is not one of {', '.join(ROLE_NAMES)}")
        hexed = self.text(values.get("sha256"))
        if "sha256" in values and (hexed is None or not HEX_DIGEST.fullmatch(hexed)):
            # The value is never shown: it may be a token pasted in by mistake.
            self.problem(
                values["sha256"],
                "sha256: 64 hexadecimal digits, the SHA-256 of the token "
                '(printf %s "$TOKEN" | sha256sum)',
            )
        elif hexed is not None and bytes.fromhex(hexed) == EMPTY_DIGEST:
            self.problem(values["sha256"], "sha256: that is the hash of an empty token")
        if len(self.problems) > before or name is None or role is None or hexed is None:
            return None
        return TokenEntry(
            Identity(name, Role(role)),
            bytes.fromhex(hexed),
            node.start_mark.line + 1,
            values["sha256"].start_mark.line + 1,
        )

    @staticmethod
    def text(node: Node | None) -> str | None:
        """A scalar's text as written (a name or role of digits stays text)."""
        return node.value if isinstance(node, ScalarNode) and node.value != "" else None


def _hint(key: str, keys: Sequence[str]) -> str:
    if key in ("token", "secret", "password"):
        return ": the file holds the sha256 of each token, never the token"
    close = difflib.get_close_matches(key, keys, n=1)
    return f" (did you mean {close[0]!r}?)" if close else f" (known: {', '.join(keys)})"
