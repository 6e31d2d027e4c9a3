"""The browser surface: which Host names are answered, which requests may change something,
and the headers every answer carries.

A browser is rota's riskiest client: it runs other sites' pages next to the
dashboard, and without a token the server's only guard is that it listens on
loopback, which every page in the operator's browser can reach. So:

- ``Host`` must name this server (``HostPolicy``): loopback serves answer for
  ``localhost``, ``127.0.0.1`` and ``::1``; ``--allowed-host`` adds names; a serve
  bound to a wildcard address (0.0.0.0, ::) has a token (``rota.api.server``) and
  answers any Host unless ``--allowed-host`` names some. A DNS-rebinding page
  reaches the server under its own name: refused here (421), or, on a wildcard
  bind, left with no token to send.
- A request that may change something (POST, PUT, PATCH, DELETE) from another
  origin is refused (403) whether or not it carries a token: ``Origin`` present
  and not this server's, or ``Sec-Fetch-Site`` saying ``cross-site`` or
  ``same-site``. A request a browser marks as its own (``Origin`` or ``Sec-Fetch-*``
  present) must also carry ``X-Rota-Request: 1``, which the dashboard sends and
  no other origin can send without a CORS permission this server never gives. A
  body must be ``Content-Type: application/json`` (415 otherwise): a form, a
  ``text/plain`` fetch or a beacon cannot be. curl, httpx and scripts send no
  ``Origin``: a JSON body or no body at all is all they need.
- Every answer says ``nosniff``, ``X-Frame-Options: DENY`` and
  ``Referrer-Policy: no-referrer``; every HTML answer (the dashboard, and its 401
  copy) carries the dashboard's Content-Security-Policy, ``frame-ancestors
  'none'`` included, and any other answer ``default-src 'none'; frame-ancestors
  'none'``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", ""})
BROWSER_HEADERS = (b"origin", b"sec-fetch-site", b"sec-fetch-mode", b"sec-fetch-dest")
ROTA_REQUEST_HEADER = b"x-rota-request"
JSON = "application/json"
OTHER_CSP = b"default-src 'none'; frame-ancestors 'none'"

CROSS_ORIGIN = "urn:rota:problem:cross-origin"
UNSUPPORTED_MEDIA_TYPE = "urn:rota:problem:unsupported-media-type"
MISDIRECTED = "urn:rota:problem:misdirected"

_NAME = re.compile(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")
_PORT = re.compile(r":[0-9]{1,5}")

Headers = Mapping[bytes, Sequence[bytes]]  # lower-case name -> every value sent


@dataclass(frozen=True)
class Refusal:
    """A request refused before any route: the problem to answer with."""

    status: int
    title: str
    detail: str
    type: str


def headers_of(raw: Iterable[tuple[bytes, bytes]]) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for name, value in raw:
        out.setdefault(name.lower(), []).append(value)
    return out


def _shown(value: bytes) -> str:
    """A header value fit to quote in an answer: short, and repr'd."""
    return repr(value[:80].decode("latin-1"))


# -- Host ------------------------------------------------------------------------------


def host_name(authority: str) -> str | None:
    """The host of ``host[:port]`` (``[v6]:port`` too), lower case; None if it is none."""
    value = authority.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :]
        if end < 0 or (rest and not _PORT.fullmatch(rest)):
            return None
        return _address(value[1:end])
    name, colon, port = value.partition(":")
    if colon and not port.isdigit():
        return None
    name = name.rstrip(".")
    return name if _NAME.fullmatch(name) else None


def _address(text: str) -> str | None:
    try:
        return ipaddress.ip_address(text).compressed
    except ValueError:
        return None


class AllowedHostError(ValueError):
    """An ``--allowed-host`` value is not a host name or address."""


def parse_allowed_hosts(values: Iterable[str]) -> list[str]:
    """``--allowed-host`` values (each one or several, comma-separated) as host names."""
    names: list[str] = []
    for value in values:
        for part in value.split(","):
            text = part.strip()
            name = _allowed_name(text)
            if name is None:
                raise AllowedHostError(
                    f"--allowed-host {text[:80]!r}: give a host name or address, without "
                    "scheme, port or path (rota.example.com, 10.0.0.5, ::1); every port of "
                    "it is allowed"
                )
            names.append(name)
    return names


def _allowed_name(text: str) -> str | None:
    bare = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    if ":" in bare:  # an IPv6 address; a name with a port is refused
        return _address(bare)
    name = bare.lower().rstrip(".")
    return name if _NAME.fullmatch(name) else None


def is_loopback(host: str) -> bool:
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HostPolicy:
    """The Host names answered; ``names`` None answers any (a wildcard bind with a token)."""

    def __init__(self, names: Iterable[str] | None) -> None:
        self.names = None if names is None else frozenset(names)

    @classmethod
    def loopback(cls) -> HostPolicy:
        return cls(LOOPBACK_NAMES)

    @classmethod
    def for_bind(cls, host: str, allowed: Sequence[str], *, token_required: bool) -> HostPolicy:
        """What a serve bound to ``host`` answers for, given ``--allowed-host`` names.

        A wildcard bind answers any Host only when a token is required: the token,
        not the name, keeps a rebinding page out.
        """
        bind = host.strip("[]")
        if bind in WILDCARD_BINDS:
            if allowed or not token_required:
                return cls([*allowed, *([] if token_required else LOOPBACK_NAMES)])
            return cls(None)
        own = _allowed_name(host) or bind
        extra = LOOPBACK_NAMES if is_loopback(bind) else frozenset()
        return cls([*allowed, own, *extra])

    def describe(self) -> str:
        return "any" if self.names is None else ",".join(sorted(self.names))

    def refuse(self, headers: Headers) -> Refusal | None:
        if self.names is None:
            return None
        values = headers.get(b"host", [])
        name = host_name(values[0].decode("latin-1")) if len(values) == 1 else None
        if name is not None and name in self.names:
            return None
        given = _shown(values[0]) if values else "missing"
        return Refusal(
            421,
            "Misdirected request",
            f"this server answers for {', '.join(sorted(self.names))}, not for Host "
            f"{given} (name others with rota serve --allowed-host)",
            MISDIRECTED,
        )


# -- changes from other origins --------------------------------------------------------


def _origin_authority(origin: bytes) -> str | None:
    m = re.fullmatch(r"https?://([^/?#@\s]+)", origin.decode("latin-1").lower())
    return _without_default_port(m.group(1)) if m else None


def _without_default_port(authority: str) -> str:
    for default in (":80", ":443"):
        if authority.endswith(default):
            return authority[: -len(default)]
    return authority


def refuse_change(headers: Headers) -> Refusal | None:
    """Why a request that may change something is refused, or None (see the module doc)."""
    host = headers.get(b"host", [b""])[0].decode("latin-1").strip().lower()
    own = _without_default_port(host)
    for origin in headers.get(b"origin", []):
        if _origin_authority(origin) != own:
            return Refusal(
                403,
                "Cross-origin request refused",
                f"a change from another origin (Origin {_shown(origin)}) is refused: only "
                "this server's own page, or a client that sends no Origin, may change "
                "anything",
                CROSS_ORIGIN,
            )
    for site in headers.get(b"sec-fetch-site", []):
        if site.strip().lower() not in (b"same-origin", b"none"):
            return Refusal(
                403,
                "Cross-origin request refused",
                f"the browser says this request comes from another site (Sec-Fetch-Site: "
                f"{site[:20].decode('latin-1')}): refused",
                CROSS_ORIGIN,
            )
    from_browser = any(name in headers for name in BROWSER_HEADERS)
    if from_browser and headers.get(ROTA_REQUEST_HEADER) != [b"1"]:
        return Refusal(
            403,
            "Cross-origin request refused",
            "a browser's request that changes something must carry X-Rota-Request: 1 "
            "(the dashboard sends it; no other origin can)",
            CROSS_ORIGIN,
        )
    return _refuse_body(headers)


def _refuse_body(headers: Headers) -> Refusal | None:
    types = headers.get(b"content-type", [])
    lengths = headers.get(b"content-length", [])
    has_body = b"transfer-encoding" in headers or any(v.strip() not in (b"0", b"") for v in lengths)
    if not types and not has_body:
        return None  # nothing to read: curl -X POST
    kinds = {t.split(b";", 1)[0].strip().lower() for t in types}
    if kinds == {JSON.encode()}:
        return None
    return Refusal(
        415,
        "Unsupported media type",
        "send the body as Content-Type: application/json (or send no body): a form, "
        "text/plain or an untyped body is refused",
        UNSUPPORTED_MEDIA_TYPE,
    )


# -- headers on every answer -----------------------------------------------------------


def with_security_headers(
    headers: Sequence[tuple[bytes, bytes]], page_csp: bytes
) -> list[tuple[bytes, bytes]]:
    """``headers`` of an answer, with the security headers every answer carries."""
    kept = [(n, v) for n, v in headers if n.lower() != b"content-security-policy"]
    present = {n.lower() for n, _ in kept}
    kind = next((v for n, v in kept if n.lower() == b"content-type"), b"")
    html = kind.lower().startswith(b"text/html")
    csp = (
        page_csp
        if html
        else next((v for n, v in headers if n.lower() == b"content-security-policy"), OTHER_CSP)
    )
    added = [
        (name, value)
        for name, value in (
            (b"x-content-type-options", b"nosniff"),
            (b"x-frame-options", b"DENY"),
            (b"referrer-policy", b"no-referrer"),
        )
        if name not in present
    ]
    return [*kept, *added, (b"content-security-policy", csp)]
