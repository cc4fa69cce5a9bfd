"""The `consolidator` command line (`boundary` holds the group and its error boundary).

This module loads nothing at all, so that a Ctrl-C at any moment, even while the command
line's modules are still loading, ends in one line and exit 1, never a traceback.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import click


def interrupt_again_where_it_can_be_caught(unraisable: sys.UnraisableHookArgs) -> None:
    """`sys.unraisablehook` for the console script: a Ctrl-C that lands in a callback Python
    cannot raise from (a weak reference's, as the import machinery frees a module lock) would
    be printed with a traceback and lost; it is delivered again instead, once this hook has
    returned (from another thread, so that it does not land in the hook itself), to the code
    that runs next, where the error boundary turns it into its one line."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        import _thread

        _thread.start_new_thread(_thread.interrupt_main, ())
        return
    sys.__unraisablehook__(unraisable)


def main(argv: list[str] | None = None) -> None:
    """The console script: run the command line, and turn an interrupt that arrives outside
    its error boundary (while it loads, or as it exits) into the boundary's one line."""
    if argv is None:
        sys.unraisablehook = interrupt_again_where_it_can_be_caught
    try:
        from consolidator.face.cli.idle import answered_idle

        if answered_idle(sys.argv[1:] if argv is None else argv):
            sys.exit(0)
        from consolidator.face.cli.boundary import run

        run(argv)
    except KeyboardInterrupt:
        import signal

        # A second Ctrl-C while this one is reported is not another traceback either.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stderr.write("consolidator: interrupted\n")
        sys.exit(1)
    finally:
        if argv is None:
            # The process ends with the command: a Ctrl-C while the interpreter shuts down
            # would only turn a finished run's exit code into a signal. `_signal` is `signal`
            # without its enums, which would cost an answered idle pass more than its checks.
            import _signal

            _signal.signal(_signal.SIGINT, _signal.SIG_IGN)


def __getattr__(name: str) -> click.Group:
    """`cli`, the click group, loaded when asked for."""
    if name == "cli":
        from consolidator.face.cli.boundary import cli

        return cli
    raise AttributeError(name)
