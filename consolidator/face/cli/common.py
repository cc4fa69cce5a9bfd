"""What every command shares: the one declaration of the common options (settings,
`--json`, `--quiet`, logging, `--adopt-memory-files`, `--allow-shrink`), the invocation they
resolve to, and opening the store, the backend and the published memory for a command."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from consolidator.core.config import (
    ADOPT_MEMORY_FILES_ENV,
    SETTINGS,
    Settings,
    build_settings,
    setting_spec,
)
from consolidator.core.errors import ConfigError, WorkFailed
from consolidator.face.logs import configure_logging

# A command imports what it uses when it runs, so that the commands an agent runs at every
# session start (`context`, `--version`) never pay for the model SDK, Alembic or the scanner.
if TYPE_CHECKING:
    from rich.console import Console

    from consolidator.backends.base import Backend
    from consolidator.db.store import Store


log = logging.getLogger(__name__)


F = TypeVar("F", bound=Callable[..., Any])


_UNWRAPPED_WIDTH = 100_000


@dataclass
class Invocation:
    settings: Settings
    json_output: bool
    quiet: bool
    log_format: str = "human"
    _console: Console | None = None

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            if sys.stdout.isatty():
                self._console = Console(stderr=False, highlight=False)
            else:
                # Redirected output is read by scripts and pagers: one value, one line.
                self._console = Console(
                    stderr=False, highlight=False, soft_wrap=True, width=_UNWRAPPED_WIDTH
                )
        return self._console

    def emit(self, payload: dict[str, Any], human: Callable[[], None]) -> None:
        if self.json_output:
            click.echo(json_text(payload))
        elif not self.quiet:
            human()


def json_text(payload: dict[str, Any]) -> str:
    """A command's JSON report as `--json` prints it (one line feed follows it)."""
    return json.dumps(payload, indent=2, default=str)


def _help_for(spec_name: str) -> str:
    spec = setting_spec(spec_name)
    return f"{spec.help} [env: {spec.env}; default: {spec.default}]"


class SettingOption(click.Option):
    """A setting every command takes. A command's `--help` names them in one line, and
    `consolidator --help-settings` lists them; docs/configuration.md explains each."""

    def __init__(self, *args: Any, env: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.env = env

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        return None


def common_options(func: F) -> F:
    """Every command takes the settings, `--json`, `--quiet` and the logging options."""
    decorated: Any = func
    for spec in reversed(SETTINGS):
        decorated = click.option(
            spec.option,
            spec.name,
            cls=SettingOption,
            env=spec.env,
            default=None,
            type=spec.flag_type,
            multiple=spec.repeatable,
            help=_help_for(spec.name),
            show_default=False,
        )(decorated)
    decorated = click.option(
        "--config",
        "config_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Config file (TOML, keys as the option names with underscores). "
        "[default: $CONSOLIDATOR_HOME/config.toml]",
    )(decorated)
    decorated = click.option("--json", "json_output", is_flag=True, help="Print JSON for scripts.")(
        decorated
    )
    decorated = click.option(
        "--quiet", "-q", is_flag=True, help="Print nothing on success (for cron mail)."
    )(decorated)
    decorated = click.option(
        "--log-format",
        type=click.Choice(["human", "json"]),
        default="human",
        show_default=True,
        help="Log line format on stderr.",
    )(decorated)
    decorated = click.option(
        "--verbose", "-v", is_flag=True, help="Log progress details (and tracebacks on errors)."
    )(decorated)
    result: F = decorated
    return result


def adopt_option(func: F) -> F:
    """For the commands that write the memory folder: take over files found in our names."""
    decorated: F = click.option(
        "--adopt-memory-files",
        "adopt_memory_files",
        is_flag=True,
        envvar=ADOPT_MEMORY_FILES_ENV,
        help="Take over MEMORY.md, memory_summary.md or raw_memories.md found in the memory"
        " folder but not written by consolidator (MEMORY.md is backed up first). Without it"
        f" such files stop the command with exit 2. [env: {ADOPT_MEMORY_FILES_ENV}]",
    )(func)
    return decorated


def allow_shrink_option(what: str = "phase two") -> Callable[[F], F]:
    """For the commands that run phase two: let it shrink the memory past the gate's limit."""
    return click.option(
        "--allow-shrink", is_flag=True, help=f"Let {what} remove much of the memory."
    )


def invocation(params: dict[str, Any]) -> Invocation:
    explicit = {spec.name: params.pop(spec.name, None) for spec in SETTINGS}
    config_file = params.pop("config_file", None)
    json_output = bool(params.pop("json_output", False))
    quiet = bool(params.pop("quiet", False))
    verbose = bool(params.pop("verbose", False))
    log_format = params.pop("log_format", "human")
    level = (
        logging.DEBUG if verbose else (logging.WARNING if quiet or json_output else logging.INFO)
    )
    configure_logging(level=level, fmt=log_format)
    adopt = params.pop("adopt_memory_files", None)
    settings = build_settings(explicit, config_file=config_file)
    if adopt is not None:
        from consolidator.core.private_files import prepare_state_dir
        from consolidator.phases.publish.projection import check_memory_dir

        # Before any work, and the state directory first: it holds the default memory folder.
        prepare_state_dir(settings.home)
        check_memory_dir(settings.memory_dir, adopt=bool(adopt))
    return Invocation(settings, json_output, quiet, log_format)


@contextmanager
def open_store(settings: Settings) -> Iterator[Store]:
    from consolidator.core.private_files import prepare_state_dir
    from consolidator.db import opened_store

    check_database_folder(settings)
    name_database(settings)
    prepare_state_dir(settings.home)
    with opened_store(settings) as store:
        yield store


def name_database(settings: Settings) -> None:
    """Say under `-v` which database a command reads (its password hidden): every command
    that touches one names it, so a wrong `--db` is seen rather than silently used."""
    log.debug("database %s", settings.db_url_for_display, extra={"action": "database_opened"})


def check_database_folder(settings: Settings) -> None:
    """A SQLite database outside the home folder must lie in a folder that exists: a typo in
    `--db` would otherwise create the folders and a fresh, empty database without a word."""
    from consolidator.core.database_url import normalize_url

    url = normalize_url(settings.db_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return
    folder = Path(str(url.database)).expanduser().absolute().parent
    home = settings.home.expanduser().absolute()
    if folder.is_dir() or folder.is_relative_to(home):
        return
    raise ConfigError(
        f"the folder of the database {url.database} does not exist (--db or "
        f"CONSOLIDATOR_DB_URL); create it first, or leave the setting unset for {home}/state.db"
    )


def publish_memory(inv: Invocation, store: Store) -> None:
    from consolidator.phases.worker import publish_current

    publish_current(store, inv.settings)


@contextmanager
def changing_memory(inv: Invocation) -> Iterator[Store]:
    """The store for a command whose change the memory folder must show at once (`forget`,
    `clear-all`, `rollback`, `approve`, `skills approve|reject`).

    The folder was checked as the command started (`adopt_option`), and its lock is held
    from before the commit to after the publish: a folder that cannot be written or locked
    refuses the change with the database untouched, and no other process publishes between
    this commit and this publish.
    """
    from consolidator.phases.publish.projection import holding_memory_dir

    with open_store(inv.settings) as store, holding_memory_dir(inv.settings.memory_dir):
        yield store


def publish_committed(write: Callable[[], object]) -> str | None:
    """Run `write`, the publish of a change already committed; the reason it failed, if it
    did (`phases.erase.published`)."""
    from consolidator.phases.erase import published

    return published(write)


def fail_unpublished(inv: Invocation, done: str, problem: str | None) -> None:
    """Exit 1 naming what is committed and what the folder may still show, after the report."""
    if problem is None:
        return
    raise WorkFailed(
        f"{done} in the database, but the memory folder {inv.settings.memory_dir} could not be"
        f" rewritten ({problem}), so it may still show the memory as it was; fix that, then"
        " `consolidator run` (or the daemon's next pass) rewrites it"
    )


def backend_for(inv: Invocation, store: Store | None = None) -> Backend:
    """The configured backend; an agent backend keeps its token budget in `store`."""
    from consolidator.backends.factory import make_backend

    backend = make_backend(inv.settings, store.tokens if store is not None else None)
    if inv.settings.backend == "auto":
        # The resolved name, not `backend.name`: asking the offline backend would load it.
        resolved = inv.settings.resolved_backend()
        log.info(
            "backend auto -> %s (%s)",
            resolved,
            "OPENAI_API_KEY or OPENAI_BASE_URL is set"
            if resolved == "openai"
            else "no OPENAI_API_KEY or OPENAI_BASE_URL: offline extractive mode",
            extra={"action": "backend_selected", "backend": resolved},
        )
    return backend


def checked_backend_for(inv: Invocation, store: Store | None = None) -> Backend:
    """The backend, once its endpoint accepted the key (for the commands that go straight to
    phase two): a refused key is exit 2 and a down endpoint exit 1, each naming the endpoint,
    before the phase-two lease is taken."""
    from consolidator.backends.base import check_model_access

    backend = backend_for(inv, store)
    check_model_access(backend)
    return backend
