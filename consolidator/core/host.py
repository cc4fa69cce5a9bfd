"""This host's name, for the settings that default to it."""

from __future__ import annotations

import os


def host_name() -> str:
    """This host's name, as `socket.gethostname` gives it, without loading `socket` (whose
    enums cost a command's start more than the rest of the settings)."""
    uname = getattr(os, "uname", None)
    if uname is not None:
        return str(uname().nodename)
    import socket

    return socket.gethostname()
