"""`consolidator ui`: the local web viewer (see consolidator/face/ui/)."""

from __future__ import annotations

from typing import Any

import click

from consolidator.face.cli.common import common_options, invocation


@click.command("ui")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port on 127.0.0.1 to listen on; 0 takes any free one.",
)
@click.option("--read-only", is_flag=True, help="Show everything, change nothing.")
@common_options
def ui_command(port: int, read_only: bool, **params: Any) -> None:
    """Open the memory in a browser: projects and what `context` injects in each, entries
    with their sessions, review, history, search and status.

    Listens on 127.0.0.1 only. The first line printed is the URL to open; it carries a
    random access token, so keep it to yourself. Every change (approve, reject, forget,
    rollback, clear) is a POST from the viewer's own pages with a CSRF token, and --read-only
    refuses them all. Stop it with Ctrl-C.
    """
    from consolidator.face.ui.serve import serve

    inv = invocation(params)
    try:
        serve(
            inv.settings,
            port=port,
            read_only=read_only,
            announce=lambda url: click.echo(url),
        )
    except KeyboardInterrupt:
        # Ctrl-C is how a person stops the viewer: the server has shut down cleanly.
        return


COMMANDS = (ui_command,)
