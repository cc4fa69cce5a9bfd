"""Alembic, driven from code so that an installed wheel can migrate without an ini file.

Alembic is loaded only to migrate or to compare revisions it cannot be spared for: every
command opens the database and asks whether its schema is current, and loading Alembic costs
a fresh process more than the rest of that question (see `is_current`).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from consolidator.core.resources import migrations_dir

if TYPE_CHECKING:
    from alembic.config import Config

# A migration file's own `revision = "..."` or `down_revision = "..."` line (annotated or not).
_REVISION_LINE: Final = re.compile(
    r"^(?P<key>revision|down_revision)\b[^=\n]*=\s*(?P<value>None|['\"][^'\"\n]+['\"])\s*$",
    re.MULTILINE,
)


def alembic_config(engine: Engine) -> Config:
    """Alembic's configuration for `engine`, writing to the `sys.stdout` of the moment:
    alembic's own default is the one there was when it was first imported."""
    from alembic.config import Config

    config = Config(stdout=sys.stdout)
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["engine"] = engine
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(engine), revision)


def check(engine: Engine) -> None:
    """Raise if the database schema differs from the models (alembic's autogenerate diff)."""
    from alembic import command

    command.check(alembic_config(engine))


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision(engine: Engine) -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config(engine)).get_current_head()


def is_current(engine: Engine) -> bool:
    """Whether the schema is at the newest migration. Answered without Alembic when the
    version table holds exactly the one head that the migration files name; anything else (no
    table yet, an older revision, a file this reading does not understand) is Alembic's to
    answer."""
    heads = file_heads(migrations_dir() / "versions")
    if heads is not None and len(heads) == 1 and stored_revisions(engine) == heads:
        return True
    return current_revision(engine) == head_revision(engine)


def file_heads(versions: Path) -> frozenset[str] | None:
    """The revisions no migration file revises, read from the files' `revision` and
    `down_revision` lines; None when a file states either in another form."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for path in sorted(versions.glob("*.py")):
        found = {
            match["key"]: match["value"]
            for match in _REVISION_LINE.finditer(path.read_text(encoding="utf-8"))
        }
        if set(found) != {"revision", "down_revision"} or found["revision"] == "None":
            return None
        revisions.add(found["revision"][1:-1])
        if found["down_revision"] != "None":
            revised.add(found["down_revision"][1:-1])
    return frozenset(revisions - revised)


def stored_revisions(engine: Engine) -> frozenset[str] | None:
    """The revisions the database's version table holds; None when it has no such table."""
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT version_num FROM alembic_version"))
            return frozenset(str(row[0]) for row in rows)
    except DBAPIError:
        return None
