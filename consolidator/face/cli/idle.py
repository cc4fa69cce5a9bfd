"""`consolidator run --json` or `--quiet` that finds nothing new, answered before the settings,
the command line and the database layer are loaded (see `phases.idle`): a cron job's usual
pass."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

# The only arguments such a pass may have beside `run`: any other option takes the full path.
_OUTPUT_FLAGS = {"--json": "json", "--quiet": "quiet", "-q": "quiet"}


def answered_idle(args: Sequence[str]) -> bool:
    """Print what a certified pass printed and return True, when `args` ask for such a pass
    and nothing it depended on moved; False (nothing printed) means: run the command."""
    if not args or args[0] != "run":
        return False
    flags = {_OUTPUT_FLAGS.get(arg) for arg in args[1:]}
    if None in flags:
        return False
    from consolidator.phases.idle import certified_output

    try:
        output = certified_output(os.environ, json_output="json" in flags, quiet="quiet" in flags)
    except Exception:
        # The full command reports whatever went wrong, as it always does.
        return False
    if output is None:
        return False
    if "json" in flags:
        sys.stdout.write(output + "\n")
        sys.stdout.flush()
    return True
