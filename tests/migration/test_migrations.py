"""Alembic migrations against the real databases: they must build exactly the models."""

from __future__ import annotations

from sqlalchemy import inspect

from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import check, current_revision, downgrade, head_revision, upgrade
from consolidator.db.schema import Base


def test_upgrade_head_matches_the_models(db_url: str) -> None:
    engine = create_db_engine(db_url)
    try:
        upgrade(engine)
        check(engine)  # raises when autogenerate would emit any operation
        assert current_revision(engine) == head_revision(engine)
        tables = set(inspect(engine).get_table_names())
        assert set(Base.metadata.tables) <= tables
    finally:
        engine.dispose()


def test_downgrade_and_upgrade_round_trip(db_url: str) -> None:
    engine = create_db_engine(db_url)
    try:
        upgrade(engine)
        downgrade(engine, "base")
        remaining = set(inspect(engine).get_table_names()) - {"alembic_version"}
        assert remaining == set()
        upgrade(engine)
        check(engine)
        downgrade(engine, "-1")
        upgrade(engine)
        check(engine)
    finally:
        engine.dispose()
