"""What a URL names, for the settings that depend on where a server runs."""

from __future__ import annotations


def is_loopback_url(url: str | None) -> bool:
    """Whether `url` names a server on this machine."""
    if not url:
        return False
    # Loaded only for a URL: most commands have none, and their start stays cheaper.
    import ipaddress
    from urllib.parse import urlsplit

    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
