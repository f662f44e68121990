"""The OpenAI Agents SDK's own session tests over agentledger's ``LedgerSession``.

The test files of the installed openai-agents release's source distribution (fetched
from the package index once, kept in ``.cache/``) that build one of its SQL stores:
those of ``tests/memory/`` that name ``SQLiteSession``, ``AsyncSQLiteSession`` or
``SQLAlchemySession`` (the session contract, session limits, the Runner over a
session, and the compaction wrapper ``OpenAIResponsesCompactionSession`` over a store
with the SDK's atomic compaction hooks), with ``tests/extensions/memory/``'s
``test_sqlalchemy_session.py`` and ``test_async_sqlite_session.py``. Each runs in a
pytest of its own, once as it is (the reference) and once per database with those
classes replaced by adapters of the same constructors that build a ``LedgerSession``
(``suite/stores.py``, injected as a conftest): on SQLite, PostgreSQL and, where its
server is set (always under CI), MariaDB. The runs go side by side.

Every reference test that builds a store and passes must pass on each database, or be
listed in ``CANNOT_PASS`` with its reason (an SDK store's internal, or a deliberate
difference), or in ``KNOWN_DEFECTS`` (agentledger's, on one database: to be fixed);
a listed test that passes fails the run too. The tests that build no store are left
out. It takes about a minute (the four runs side by side on two cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ...framework_suites import (
    NOT_RUN,
    Outcome,
    migrated_servers,
    outcomes,
    release_sources,
    suite_databases,
    with_conftest,
)

pytestmark = [pytest.mark.slow, pytest.mark.suite]

STORES = Path(__file__).with_name("suite") / "stores.py"
STORE_CLASSES = ("SQLiteSession", "SQLAlchemySession")  # AsyncSQLiteSession too
EXTENSION_FILES = (
    "tests/extensions/memory/test_sqlalchemy_session.py",
    "tests/extensions/memory/test_async_sqlite_session.py",
)
REFERENCE = "reference"
HOOKS = ("pytest_collection_modifyitems", "pytest_runtest_call", "pytest_sessionfinish")
"""The hooks of ``suite/stores.py`` the copied tests' conftest takes."""
PYTEST_OPTIONS = (
    "-q",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:randomly",
    "-p",
    "no:hypothesispytest",
    "--tb=native",
)
"""``--tb=native`` and no hypothesis plugin: the run parses no source after collection.
CPython 3.11.7 fails its run with SystemError ("AST constructor recursion depth
mismatch") when a garbage-collected aiomysql connection of a closed loop raises in
``__del__`` during ``ast.parse``, which pytest calls to draw a traceback."""

_R0 = (
    "ScriptedModel answers each turn with the same item (id '1', text 'done'): the "
    "SDK's store appends it every time, LedgerSession stores an item whose own id and "
    "content it already holds once (a repeated add_items stores nothing twice, by "
    "design)"
)
_R1 = (
    "asserts the SQL SQLAlchemySession sends through the test's engine (UPDATE "
    "agent_sessions before its DELETE)"
)
_R2 = "checks SQLAlchemySession's private registry of configured SQLite engines"
_R3 = "checks SQLAlchemySession's private table-creation lock"
_R4 = "checks SQLiteSession's private per-file lock registry (_lock, _file_lock_counts)"
_R5 = (
    "drops or alters the SDK store's own SQLite table (sqlite3, or a trigger through "
    "the test's engine) to make a statement fail"
)
_R6 = (
    "expects json.dumps's TypeError for a non-JSON item, then probes SQLite's write "
    "lock with sqlite3; LedgerSession refuses the item before writing with "
    "ValidationError (a ValueError)"
)
_R7 = "makes AsyncSQLiteSession's connection initialization fail (a patched aiosqlite connect)"
_R8 = (
    "makes INSERT INTO custom_messages fail through the test's engine, which "
    "LedgerSession does not write through"
)
_R9 = "patches AsyncSQLiteSession's WAL set-up (aiosqlite connect, PRAGMA journal_mode) to fail"
_R10 = "patches SQLAlchemySession's private _ensure_tables to reach its tables"
_R11 = (
    "reads SQLiteSession's private per-thread sqlite3 connections (_connections, "
    "_connections_lock, _quarantined_connections) or swaps in its own "
    "sqlite3.Connection"
)
_R12 = "reads or replaces AsyncSQLiteSession's private aiosqlite connection (_get_connection)"
_R13 = "reads or writes SQLAlchemySession's own tables through its private _session_factory"
_R14 = "reads or updates SQLAlchemySession's own messages table (its private _messages)"
_R15 = (
    "waits for the wrapper's clear_session-then-add_items restore or "
    "AsyncSQLiteSession's connect to reach a gate the test set: LedgerSession has "
    "_atomic_replace_items and opens no aiosqlite connection, so the gate is never "
    "reached (skipped on ours: it would wait forever)"
)
_R16 = (
    "writes a corrupt row into SQLiteSession's own messages table through its private "
    "_locked_connection"
)

_SESSION = "tests/memory/test_session.py::"
_COMPACTION = (
    "tests/memory/test_openai_responses_compaction_session.py::"
    "TestOpenAIResponsesCompactionSession::"
)
_SQLALCHEMY_COMPACTION = "tests/memory/test_sqlalchemy_compaction.py::"
_SUFFIX = "tests/memory/test_compaction_suffix.py::"
_SQLALCHEMY = "tests/extensions/memory/test_sqlalchemy_session.py::"
_ASYNC_SQLITE = "tests/extensions/memory/test_async_sqlite_session.py::"
_INSERT = "replaces the SDK store's private _insert_items to hold its transaction"
CANNOT_PASS: dict[str, str] = {
    _ASYNC_SQLITE + "test_async_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _R12,
    _ASYNC_SQLITE + "test_async_sqlite_session_get_items_same_timestamp_consistent_order": _R12,
    _ASYNC_SQLITE
    + "test_async_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _R12,
    _ASYNC_SQLITE + "test_async_sqlite_session_pop_item_same_timestamp_returns_latest": _R12,
    _ASYNC_SQLITE + "test_async_sqlite_session_pop_item_skips_corrupt_most_recent": _R12,
    _ASYNC_SQLITE + "test_cancelled_add_items_rolls_back_write_transaction": _R12,
    _ASYNC_SQLITE + "test_cancelled_close_finishes_cleanup_and_propagates_cancellation": _R12,
    _ASYNC_SQLITE + "test_cancelled_connect_closes_eventually_acquired_connection": _R15,
    _ASYNC_SQLITE + "test_cancelled_initialization_finishes_candidate_close": _R15,
    _ASYNC_SQLITE + "test_cancelled_wal_retry_closes_startup_connection": _R9,
    _ASYNC_SQLITE + "test_close_retries_connection_quarantined_after_rollback_failure": _R12,
    _ASYNC_SQLITE + "test_close_retries_quarantined_failed_initialization_candidate": _R7,
    _ASYNC_SQLITE + "test_failed_add_items_rolls_back_and_reuses_connection": _R6,
    _ASYNC_SQLITE + "test_failed_clear_session_rolls_back": _R5,
    _ASYNC_SQLITE + "test_failed_initialization_closes_candidate_connection": _R7,
    _ASYNC_SQLITE + "test_failed_pop_item_releases_write_lock": _R5,
    _ASYNC_SQLITE
    + "test_initialization_does_not_retry_unrecoverable_wal_errors[busy-timeout-disabled]": _R9,
    _ASYNC_SQLITE
    + "test_initialization_does_not_retry_unrecoverable_wal_errors[busy-timeout-elapsed]": _R9,
    _ASYNC_SQLITE
    + "test_initialization_does_not_retry_unrecoverable_wal_errors[unrelated-error]": _R9,
    _ASYNC_SQLITE + "test_initialization_failure_then_cancellation_during_candidate_close": _R15,
    _ASYNC_SQLITE + "test_initialization_retries_transient_wal_lock": _R9,
    _ASYNC_SQLITE + "test_operation_failure_then_cancellation_during_rollback": _R12,
    _ASYNC_SQLITE
    + "test_post_commit_cancellation_propagates_after_known_mutation_outcome[add]": _R12,
    _ASYNC_SQLITE
    + "test_post_commit_cancellation_propagates_after_known_mutation_outcome[clear]": _R12,
    _ASYNC_SQLITE
    + "test_post_commit_cancellation_propagates_after_known_mutation_outcome[pop]": _R12,
    _ASYNC_SQLITE + "test_rollback_failure_closes_and_evicts_connection": _R12,
    _SQLALCHEMY + "test_add_items_cancelled_waiter_does_not_strand_table_init_lock": _R4,
    _SQLALCHEMY + "test_create_tables_false_does_not_allocate_shared_init_lock": _R3,
    _SQLALCHEMY + "test_backdated_append_remains_the_latest_item": _R14,
    _SQLALCHEMY + "test_get_items_limit_skips_corrupt_newest_rows": _R10,
    _SQLALCHEMY + "test_get_items_orders_by_id_for_ties": _R13,
    _SQLALCHEMY + "test_get_items_same_timestamp_consistent_order": _R13,
    _SQLALCHEMY + "test_mutation_cancellation_waits_for_transaction_exit[add]": _R10,
    _SQLALCHEMY + "test_mutation_cancellation_waits_for_transaction_exit[clear]": _R10,
    _SQLALCHEMY + "test_mutation_cancellation_waits_for_transaction_exit[pop]": _R10,
    _SQLALCHEMY + "test_pop_item_retries_returning_claim_lost_to_concurrent_delete": _R10,
    _SQLALCHEMY + "test_pop_item_returns_none_after_dropping_only_corrupt_rows": _R10,
    _SQLALCHEMY + "test_pop_item_same_timestamp_returns_latest": _R13,
    _SQLALCHEMY + "test_pop_item_skips_corrupt_most_recent": _R10,
    _SQLALCHEMY + "test_pop_item_supports_unknown_delete_rowcount": _R10,
    _SQLALCHEMY + "test_sqlalchemy_session_can_store_non_ascii_without_escaping": _R13,
    _SQLALCHEMY + "test_sqlalchemy_session_defaults_to_escaped_non_ascii_storage": _R13,
    _SQLALCHEMY + "test_sqlite_configuration_registry_does_not_grow_unbounded": _R2,
    _SQLALCHEMY + "test_sqlite_configuration_registry_releases_collected_engines": _R2,
    _SQLALCHEMY + "test_sqlite_fallback_reserves_writer_before_tail_claim": _R1,
    _COMPACTION + "test_cancel_restore_waits_for_mutation_lock_before_newer_writes": _R15,
    _COMPACTION + "test_exception_restore_drains_when_compaction_is_cancelled": _R15,
    _COMPACTION + "test_settled_clear_failure_invalidates_response_chain[cancelled]": _R11,
    _COMPACTION + "test_settled_clear_failure_invalidates_response_chain[error]": _R11,
    _COMPACTION + "test_settled_pop_failure_invalidates_response_chain[cancelled]": _R11,
    _COMPACTION + "test_settled_pop_failure_invalidates_response_chain[error]": _R11,
    _SESSION + "test_sqlite_session_close_closes_worker_thread_connections": _R11,
    _SESSION + "test_sqlite_session_close_retries_quarantined_connection": _R11,
    _SESSION + "test_sqlite_session_closes_retired_connections_before_the_next_allocation": _R11,
    _SESSION + "test_sqlite_session_failed_add_items_releases_write_lock": _R6,
    _SESSION + "test_sqlite_session_failed_clear_session_rolls_back": _R5,
    _SESSION + "test_sqlite_session_failed_pop_item_releases_write_lock": _R5,
    _SESSION + "test_sqlite_session_file_lock_is_shared_across_instances": _R4,
    _SESSION + "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": _R16,
    _SESSION + "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": _R16,
    _SESSION + "test_sqlite_session_keeps_connections_of_live_worker_threads": _R11,
    _SESSION + "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": _R16,
    _SESSION + "test_sqlite_session_pop_item_skips_corrupt_most_recent": _R16,
    _SESSION
    + "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome[add]": _R11,
    _SESSION
    + "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome[clear]": _R11,
    _SESSION
    + "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome[pop]": _R11,
    _SESSION + "test_sqlite_session_reaps_connections_from_exited_worker_threads": _R11,
    _SESSION + "test_sqlite_session_rollback_failure_evicts_connection": _R11,
    _SQLALCHEMY_COMPACTION
    + "test_cancelled_replacement_settles_before_other_instance_append[file]": _R13,
    _SQLALCHEMY_COMPACTION
    + "test_cancelled_replacement_settles_before_other_instance_append[memory]": _R13,
    _SQLALCHEMY_COMPACTION + "test_compaction_with_engine_managed_sqlite_begin[file]": _R0,
    _SQLALCHEMY_COMPACTION + "test_compaction_with_engine_managed_sqlite_begin[memory]": _R0,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[file-True-False]": _R8,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[file-True-True]": _R8,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[memory-True-False]": _R8,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[memory-True-True]": _R8,
    _SQLALCHEMY_COMPACTION
    + "test_failed_replacement_preserves_history_during_other_instance_access[file]": _R13,
    _SQLALCHEMY_COMPACTION
    + "test_failed_replacement_preserves_history_during_other_instance_access[memory]": _R13,
    _SQLALCHEMY_COMPACTION + "test_limited_sqlalchemy_compacts_visible_suffix[file-False]": _R0,
    _SQLALCHEMY_COMPACTION + "test_limited_sqlalchemy_compacts_visible_suffix[file-True]": _R0,
    _SQLALCHEMY_COMPACTION + "test_limited_sqlalchemy_compacts_visible_suffix[memory-False]": _R0,
    _SQLALCHEMY_COMPACTION + "test_limited_sqlalchemy_compacts_visible_suffix[memory-True]": _R0,
    _SQLALCHEMY_COMPACTION + "test_parent_constraint_rejection_propagates[file]": _R5,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[file-False-False]": _R14,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[file-False-True]": _R14,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[memory-False-False]": _R14,
    _SQLALCHEMY_COMPACTION + "test_encrypted_prefix_cleanup_is_atomic[memory-False-True]": _R14,
    _SQLALCHEMY_COMPACTION
    + "test_replacement_includes_backdated_append_in_visible_suffix[file]": _R14,
    _SQLALCHEMY_COMPACTION
    + "test_replacement_includes_backdated_append_in_visible_suffix[memory]": _R14,
    _SQLALCHEMY_COMPACTION + "test_parent_constraint_rejection_propagates[memory]": _R5,
    _SQLALCHEMY_COMPACTION + "test_replacement_uses_timestamp_order_not_id_order[file]": _R14,
    _SQLALCHEMY_COMPACTION + "test_replacement_uses_timestamp_order_not_id_order[memory]": _R14,
    _SUFFIX
    + "test_cancelled_suffix_transaction_settles_before_newer_append[async-sqlite]": _INSERT,
    _SUFFIX + "test_cancelled_suffix_transaction_settles_before_newer_append[sqlite]": _INSERT,
    _SUFFIX
    + "test_failed_encrypted_suffix_transaction_preserves_original_tokens[async-sqlite-False]": _R5,
    _SUFFIX
    + "test_failed_encrypted_suffix_transaction_preserves_original_tokens[async-sqlite-True]": _R5,
    _SUFFIX
    + "test_failed_encrypted_suffix_transaction_preserves_original_tokens[sqlite-False]": _R5,
    _SUFFIX
    + "test_failed_encrypted_suffix_transaction_preserves_original_tokens[sqlite-True]": _R5,
    _SUFFIX + "test_suffix_transaction_rolls_back_failed_insert[async-sqlite]": _R5,
    _SUFFIX + "test_suffix_transaction_rolls_back_failed_insert[sqlite]": _R5,
}
"""Tests that pass on the SDK's store but cannot on ``LedgerSession``, by node id,
with the reason (one of the SDK store's internals, or a deliberate difference)."""

KNOWN_DEFECTS: dict[tuple[str, str], str] = {}
"""Failures of agentledger's own, by database and node id: to be fixed, not excepted."""
HANGS = (
    _COMPACTION + "test_cancel_restore_waits_for_mutation_lock_before_newer_writes",
    _COMPACTION + "test_exception_restore_drains_when_compaction_is_cancelled",
    _ASYNC_SQLITE + "test_cancelled_initialization_finishes_candidate_close",
    _ASYNC_SQLITE + "test_initialization_failure_then_cancellation_during_candidate_close",
    _ASYNC_SQLITE + "test_cancelled_connect_closes_eventually_acquired_connection",
)
"""The tests of CANNOT_PASS that would wait forever on ours: skipped there."""


def store_test_files(suite: Path) -> list[str]:
    """The test files that build one of the SDK's SQL stores."""
    memory = sorted((suite / "tests" / "memory").glob("test_*.py"))
    return [
        str(path.relative_to(suite))
        for path in [*memory, *(suite / name for name in EXTENSION_FILES)]
        if any(name in path.read_text() for name in STORE_CLASSES)
    ]


def junit_id(node_id: str) -> str:
    """A pytest node id as the JUnit report names it (``module.Class::name``)."""
    path, *classes, name = node_id.split("::")
    return ".".join([path.removesuffix(".py").replace("/", "."), *classes]) + f"::{name}"


def run_all(suite: Path, stores: list[str], env: dict[str, str], tmp_path: Path) -> None:
    """Run the store test files once per store, side by side."""
    files = store_test_files(suite)
    running = []
    for store in stores:
        env_of = {
            **env,
            "AGENTLEDGER_SUITE_STORE": store,
            "AGENTLEDGER_SUITE_BUILT": str(tmp_path / f"{store}.built"),
            "AGENTLEDGER_SUITE_HANGS": "\n".join(HANGS),
        }
        running.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    *files,
                    *PYTEST_OPTIONS,
                    f"--junitxml={tmp_path / f'{store}.xml'}",
                ],
                cwd=suite,
                env=env_of,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    try:
        for process in running:
            process.wait(timeout=300)
    finally:
        for process in running:
            process.kill()


def built(tmp_path: Path, store: str) -> set[str]:
    """The node ids of the tests that built a store in the run of ``store``."""
    path = tmp_path / f"{store}.built"
    return set(path.read_text().splitlines()) if path.exists() else set()


def test_every_session_test_that_passes_on_the_sdk_stores_passes_on_ledger_session(
    tmp_path: Path,
) -> None:
    suite = with_conftest(
        release_sources("openai-agents"), tmp_path / "openai-agents", STORES, HOOKS
    )
    databases = suite_databases()
    with migrated_servers(databases, tmp_path) as urls:
        run_all(suite, [REFERENCE, *databases], {**os.environ, **urls}, tmp_path)
    reference = outcomes(tmp_path / f"{REFERENCE}.xml")
    building = built(tmp_path, REFERENCE)
    passing = sorted(test for test in building if reference.get(junit_id(test), NOT_RUN).passed)

    failures, stale, counts = [], [], []
    for database in databases:
        ours: dict[str, Outcome] = outcomes(tmp_path / f"{database}.xml")
        passed = 0
        for test in passing:
            outcome = ours.get(junit_id(test), NOT_RUN)
            passed += outcome.passed
            if test in CANNOT_PASS or (database, test) in KNOWN_DEFECTS:
                stale.extend([f"{test} passes on {database} now"] if outcome.passed else [])
            elif not outcome.passed:
                failures.append(f"{database}: {test}: {outcome.detail}")
        counts.append(f"{database}: {passed} of {len(passing)}")
    print(f"reference: {len(passing)} of {len(building)} building a store passed;", counts)
    assert len(passing) > 100, f"only {len(passing)} tests compared: {sorted(reference)[:20]}"
    assert not failures, f"{len(failures)} failed:\n" + "\n".join(failures)
    assert not stale, "CANNOT_PASS lists tests that pass:\n" + "\n".join(stale)
