"""Who may reach the view and change the bank through it: bind rule, host names, tokens, origins.

A page of another site must not be able to read the view or drive it. A DNS-rebinding page
reaches a loopback server under its own name, so every request's ``Host`` must be one of the
names the view answers to; a form posted from another origin is refused before its CSRF token is
even looked at. Tokens are compared as bytes in constant time (``hmac.compare_digest`` refuses
non-ASCII text with a TypeError).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from skillrl_core.errors import SkillRLError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "[::1]"})
"""The ``Host`` names a loopback view answers to (an IPv6 literal keeps its brackets)."""

_HOST_HEADER = re.compile(r"(?P<name>\[[0-9a-f:.]+\]|[^\s\[\]:@/\\?#]+)(?::[0-9]{1,5})?", re.I)
"""A ``Host`` header: a name or a bracketed IPv6 literal, then an optional port; nothing else."""

_NOT_IN_A_URL = re.compile(r"[\s\x00-\x1f\x7f]")
"""Characters no ``Origin`` or ``Referer`` a browser sends holds (whitespace, controls)."""

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods that change nothing, so need no same-origin check."""


class UnsafeBindError(SkillRLError):
    """A non-loopback address was asked for without an access token."""


def is_loopback(host: str) -> bool:
    """Tell whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_unspecified(host: str) -> bool:
    """Tell whether ``host`` means every address of the machine (``0.0.0.0``, ``::``)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def host_name(host: str) -> str:
    """Return ``host`` as a ``Host`` header names it: lower case, an IPv6 literal in brackets."""
    name = host.strip().lower()
    return f"[{name}]" if ":" in name and not name.startswith("[") else name


def _same_token(supplied: object, token: str) -> bool:
    if not isinstance(supplied, str):  # absent, or a file part of a form
        return False
    return hmac.compare_digest(
        supplied.encode("utf-8", "surrogatepass"), token.encode("utf-8", "surrogatepass")
    )


@dataclass(frozen=True)
class ViewSecurity:
    """The tokens and host names one server run uses."""

    access_token: str | None = None
    """Required on every request (``?token=`` once, then a cookie) when not None."""
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """Every form that changes the bank carries it; a request without it is refused."""
    allowed_hosts: frozenset[str] | None = LOOPBACK_NAMES
    """``Host`` names answered (as :func:`host_name` writes them); None answers any name, which
    only a view bound to every address with an access token gets (the token guards it)."""

    def access_ok(self, supplied: object) -> bool:
        """Accept ``supplied`` when no access token is needed or it matches the token."""
        return self.access_token is None or _same_token(supplied, self.access_token)

    def csrf_ok(self, supplied: object) -> bool:
        """Accept ``supplied`` only when it is this run's CSRF token (text, not a file part)."""
        return _same_token(supplied, self.csrf_token)

    def host_ok(self, header: str | None) -> bool:
        """Accept a request's ``Host`` header when it names this view (any port)."""
        if header is None:
            return False
        match = _HOST_HEADER.fullmatch(header)
        if match is None:
            return False
        return self.allowed_hosts is None or match["name"].lower() in self.allowed_hosts

    def origin_ok(self, origin: str | None, referer: str | None, host: str) -> bool:
        """Accept a request that changes something only from a page of this view.

        The page's origin is ``Origin``, else the ``Referer``'s scheme and host; it must be
        http(s) on the very ``host`` (name and port) the request was sent to. A request with
        neither header comes from no browser page (curl, a script): the CSRF token decides.
        """
        source = origin if origin is not None else referer
        if source is None:
            return True
        source = source.strip()
        if _NOT_IN_A_URL.search(source):  # urlsplit would silently drop tabs and line breaks
            return False
        try:
            parts = urlsplit(source)
        except ValueError:  # an unbalanced IPv6 bracket
            return False
        if parts.scheme not in ("http", "https") or "@" in parts.netloc:
            return False
        return parts.netloc.lower() == host.strip().lower()


def security_for_bind(host: str, access_token: str | None) -> ViewSecurity:
    """Return the tokens and host names for serving on ``host``; refuse an open bind.

    A non-loopback host without a token is refused. The view answers to the loopback names, and
    to ``host`` itself when it is loopback or a token guards it; bound to every address with a
    token, it answers to any name the machine is reached by.
    """
    if not is_loopback(host) and not access_token:
        raise UnsafeBindError(
            f"refusing to serve on {host} without an access token: "
            "pass --token (or omit --host to stay on 127.0.0.1)"
        )
    allowed: frozenset[str] | None = LOOPBACK_NAMES | {host_name(host)}
    if access_token and is_unspecified(host):
        allowed = None
    return ViewSecurity(access_token=access_token or None, allowed_hosts=allowed)
