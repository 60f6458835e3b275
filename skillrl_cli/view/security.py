"""Who may reach the view and change the bank through it: bind rule, access and CSRF tokens."""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from dataclasses import dataclass, field

from skillrl_core.errors import SkillRLError


class UnsafeBindError(SkillRLError):
    """A non-loopback address was asked for without an access token."""


def is_loopback(host: str) -> bool:
    """Tell whether ``host`` is ``localhost`` or and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ViewSecurity:
    """The tokens one server run uses."""

    access_token: str | None = None
    """Required on every request (``?token=`` once, then a cookie) when not None."""
    csrf_token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    """Every form that changes the bank carries it; a request without it is refused."""

    def access_ok(self, supplied: str | None) -> bool:
        """Accept ``supplied`` when no access token is needed or it matches the token."""
        if self.access_token is None:
            return True
        return supplied is not None and hmac.compare_digest(supplied, self.access_token)

    def csrf_ok(self, supplied: str | None) -> bool:
        """Accept ``supplied`` only when it is this run's CSRF token."""
        return supplied is not None and hmac.compare_digest(supplied, self.csrf_token)


def security_for_bind(host: str, access_token: str | None) -> ViewSecurity:
    """Return the tokens for serving on ``host``; a non-loopback host without a token is refused."""
    if not is_loopback(host) and not access_token:
        raise UnsafeBindError(
            f"refusing to serve on {host} without an access token: "
            "pass --token (or omit --host to stay on 127.0.0.1)"
        )
    return ViewSecurity(access_token=access_token or None)
