"""Alembic migrations against the real databases: they must build exactly the models."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, text

from consolidator.core.resources import migrations_dir
from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import (
    check,
    current_revision,
    downgrade,
    file_heads,
    head_revision,
    is_current,
    stored_revisions,
    upgrade,
)
from consolidator.db.schema import Base, alembic_metadata
from consolidator.db.store import Store
from consolidator.memory.blocks import Block, Bullet, Memory, Task, ThreadCitation
from consolidator.memory.codec import encode


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


def _partial_and_operators(options: dict[str, Any], dialect: str) -> tuple[bool, object]:
    return options.get(f"{dialect}_where") is not None, options.get(f"{dialect}_ops") or {}


def test_the_models_state_which_indexes_are_partial_and_their_operator_classes(
    db_url: str,
) -> None:
    """Alembic's check compares neither an index's predicate nor its operator classes, so
    this does: the models hand Alembic PostgreSQL's options apart from the indexes."""
    engine = create_db_engine(db_url)
    dialect = engine.dialect.name
    try:
        upgrade(engine)
        inspector = inspect(engine)
        built = {
            (table, tuple(index["column_names"])): _partial_and_operators(
                dict(index.get("dialect_options", {})), dialect
            )
            for table in inspector.get_table_names()
            for index in inspector.get_indexes(table)
        }
    finally:
        engine.dispose()
    modelled = {
        (table.name, tuple(column.name for column in index.columns)): _partial_and_operators(
            dict(index.dialect_kwargs), dialect
        )
        for table in alembic_metadata().tables.values()
        for index in table.indexes
    }
    assert any(partial for partial, _ in modelled.values())
    assert modelled == {key: built.get(key) for key in modelled}


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


def _memory(*block_ids: str) -> Memory:
    blocks = tuple(
        Block(
            block_id,
            f"Group {block_id}",
            "scope",
            None,
            "rule",
            (
                Task(
                    "t1",
                    "task",
                    (
                        ThreadCitation(
                            f"thread-{block_id}", "s.md", "/w", "/r", "2026-11-01T00:00:00Z"
                        ),
                    ),
                ),
            ),
            knowledge=(Bullet(f"knowledge of {block_id} — ü", ("t1",)),),
        )
        for block_id in block_ids
    )
    return Memory(blocks)


def test_0004_moves_version_content_into_shared_blocks_and_back(db_url: str) -> None:
    engine = create_db_engine(db_url)
    memories = [_memory("one", "two"), _memory("one", "two", "three"), _memory()]
    try:
        upgrade(engine, "0003")
        with engine.begin() as connection:
            for memory in memories:
                stored = encode(memory)
                connection.execute(
                    text(
                        "INSERT INTO memory_versions (created_at, kind, memory_json, content_md,"
                        " content_bytes, input_tokens, output_tokens, diff_summary, quarantined)"
                        " VALUES (:at, 'consolidation', :json, :md, :size, 0, 0, '', 0)"
                    ),
                    {
                        "at": datetime(2026, 11, 1, tzinfo=UTC),
                        "json": stored.memory_json,
                        "md": stored.content_md,
                        "size": stored.content_bytes,
                    },
                )
        upgrade(engine)
        check(engine)
        store = Store(engine)
        records = sorted(store.versions.list_versions(), key=lambda v: v.version)
        assert [r.memory_json for r in records] == [encode(m).memory_json for m in memories]
        assert [r.content_md for r in records] == [encode(m).content_md for m in memories]
        with engine.connect() as connection:
            blocks = connection.execute(text("SELECT count(*) FROM memory_blocks")).scalar_one()
            cited = connection.execute(
                text("SELECT thread_id FROM memory_block_threads ORDER BY thread_id")
            ).scalars()
            assert blocks == 3 and list(cited) == ["thread-one", "thread-three", "thread-two"]

        downgrade(engine, "0003")
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT memory_json, content_md FROM memory_versions ORDER BY version")
            ).all()
            threads = connection.execute(
                text("SELECT version, thread_id FROM memory_version_threads ORDER BY 1, 2")
            ).all()
        assert [tuple(row) for row in rows] == [
            (encode(m).memory_json, encode(m).content_md) for m in memories
        ]
        assert [tuple(row) for row in threads] == [
            (1, "thread-one"),
            (1, "thread-two"),
            (2, "thread-one"),
            (2, "thread-three"),
            (2, "thread-two"),
        ]
    finally:
        engine.dispose()


def test_is_current_reads_the_files_heads_as_alembic_does(db_url: str, tmp_path: Path) -> None:
    """The answer every command asks for without loading Alembic: the head the migration
    files name is Alembic's, the schema is current only at that head, and a file written in
    another form leaves the question to Alembic."""
    engine = create_db_engine(db_url)
    try:
        assert file_heads(migrations_dir() / "versions") == {head_revision(engine)}
        assert stored_revisions(engine) is None
        assert not is_current(engine)
        upgrade(engine)
        assert is_current(engine)
        downgrade(engine, "-1")
        assert stored_revisions(engine) == {current_revision(engine)}
        assert not is_current(engine)
        upgrade(engine)
        assert is_current(engine)
    finally:
        engine.dispose()
    (tmp_path / "0001_a.py").write_text('revision = "0001"\ndown_revision = None\n')
    (tmp_path / "0002_b.py").write_text('revision: str = "0002"\ndown_revision = "0001"\n')
    assert file_heads(tmp_path) == {"0002"}
    (tmp_path / "0003_merge.py").write_text('revision = "0003"\ndown_revision = ("0001", "0002")\n')
    assert file_heads(tmp_path) is None


def test_0022_moves_the_phase_two_job_to_its_row_id(db_url: str) -> None:
    """The phase-two claim finds its job by row id; a database made before keeps its job,
    with its lease history, under that id."""
    engine = create_db_engine(db_url)
    try:
        upgrade(engine, "0021")
        with engine.begin() as connection:
            connection.execute(
                text(
                    "INSERT INTO jobs (kind, job_key, status, lease_epoch, retry_remaining,"
                    " attempts, input_watermark) VALUES"
                    " ('stage1', 'thread-a', 'pending', 0, 3, 0, 5),"
                    " ('phase2', 'global', 'pending', 7, 1000000000, 7, 0)"
                )
            )
        upgrade(engine)
        check(engine)
        with engine.connect() as connection:
            rows = connection.execute(
                text("SELECT id, kind, lease_epoch FROM jobs ORDER BY kind")
            ).all()
        assert [(row.kind, row.lease_epoch) for row in rows] == [("phase2", 7), ("stage1", 0)]
        assert rows[0].id == 0 and rows[1].id != 0
    finally:
        engine.dispose()


_CHECK_AFTER_STDOUT_CLOSED = """
import contextlib, io, sys
from consolidator.db.engine import create_db_engine
from consolidator.db.migrate import check, upgrade

gone = io.StringIO()
with contextlib.redirect_stdout(gone):
    import alembic.config
gone.close()
engine = create_db_engine(sys.argv[1])
upgrade(engine)
check(engine)
"""


@pytest.mark.slow
def test_a_check_writes_to_the_stdout_of_the_moment(tmp_path: Path) -> None:
    """Alembic binds its output to the `sys.stdout` there was when it was first imported; a
    check made after that stream is gone (a test's capture, a redirect) must still run."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    done = subprocess.run(
        [sys.executable, "-c", _CHECK_AFTER_STDOUT_CLOSED, url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "No new upgrade operations detected." in done.stdout
