"""LangGraph's own store tests over agentledger's ``LedgerStore`` and ``AsyncLedgerStore``.

The store tests of the installed ``langgraph-checkpoint-sqlite`` and
``langgraph-checkpoint-postgres`` releases' source distributions (fetched from the
package index once, kept in ``.cache/``): test_store.py, test_async_store.py and the
SQLite package's test_ttl.py, each in a pytest of its own with agentledger's stores in
place of LangGraph's (``suite/stores.py``), each package's on the database it was
written for: the SQLite package's on SQLite, the PostgreSQL package's on PostgreSQL
(most of their tests are the same; both on both took 4 minutes, twice this, and the
contract suite runs the memory operations on every database). Every test
passes but those in ``PRIVATE`` and ``DIFFERENT``, which are not run: the first test a
detail of LangGraph's implementations (their SQL, tables, connections, migrations),
the second a behaviour where agentledger chose otherwise, each with the reason.

The PostgreSQL package runs its tests over three ways of connecting (``default``,
``pipe``, ``pool``: a psycopg connection, a pipeline, a pool); agentledger's store
connects one way, so only ``default`` runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ...framework_suites import DATABASES, migrated_servers, outcomes, release_sources

pytestmark = [pytest.mark.slow, pytest.mark.suite]

STORES = Path(__file__).with_name("suite") / "stores.py"
STORE_TESTS = ("tests/test_store.py", "tests/test_async_store.py")
PACKAGES = {
    "langgraph-checkpoint-sqlite": (*STORE_TESTS, "tests/test_ttl.py"),
    "langgraph-checkpoint-postgres": STORE_TESTS,
}
DATABASE_OF = {
    "langgraph-checkpoint-sqlite": "sqlite",
    "langgraph-checkpoint-postgres": "postgresql",
}
"""The database each package's tests run on."""

PRIVATE: dict[str, str] = {
    "test_vector_store_initialization": "reads the SQLite store's connection (store.conn) "
    "and its sqlite_master for its vector table",
    "test_nonnull_migrations": "reads the store class's MIGRATIONS (its own SQL)",
    "test_escape_glob_literal": "a private helper of the SQLite store",
    "test_escape_like_literal": "a private helper of the PostgreSQL store",
    "test_namespace_match_pattern": "a private helper of the stores (their regex for "
    "list_namespaces)",
    "test_list_namespaces_prefix_uses_indexable_condition": "inspects the SQL the SQLite "
    "store generates",
    "test_omit_expired_filters_read_paths": "backdates expires_at through raw SQL on the "
    "PostgreSQL store's table (agentledger's expiry is tested with a clock it is given: "
    "MemoryExpiryContract)",
    "test_omit_expired_disabled_preserves_expired_rows": "the same, and expects expired "
    "rows read back with omit_expired off (agentledger never reads an expired item)",
    "test_omit_expired_refresh_ttl_only_refreshes_live_rows": "reads expires_at through raw "
    "SQL on the PostgreSQL store's table",
    "test_omit_expired_search_pagination": "backdates updated_at through raw SQL",
    "test_abatch_uses_single_pool_checkout": "patches the PostgreSQL store's connection pool",
}
"""Tests of a detail of LangGraph's implementations, by name, with the reason."""

DIFFERENT: dict[str, str] = {
    "test_sql_injection_vulnerability": "expects the SQLite store's refusal of a filter "
    "key that is not [a-zA-Z0-9_.-] (it writes keys into its SQL); agentledger filters "
    "in Python, where any key is safe, and refuses none",
    "test_ttl_override_default": "expects the SQLite store's own default of not "
    "refreshing on read when a TTL config leaves refresh_on_read out; agentledger "
    "follows LangGraph's documented default (True), as the PostgreSQL store does",
}
"""Tests of a behaviour agentledger chose otherwise, by name, with the reason."""


def _deselected() -> str:
    return " and ".join(f"not {name}" for name in sorted({*PRIVATE, *DIFFERENT}))


def test_every_store_test_of_langgraph_passes_on_agentledgers_stores(tmp_path: Path) -> None:
    env = dict(os.environ)
    failures: list[str] = []
    ran = 0
    with migrated_servers(DATABASES, tmp_path) as urls:
        env.update(urls)
        for package, files in PACKAGES.items():
            env["AGENTLEDGER_SUITE_DATABASES"] = DATABASE_OF[package]
            source = release_sources(package, marker="tests/test_store.py")
            suite = tmp_path / package
            shutil.copytree(source, suite)
            shutil.copy(STORES, suite / "tests" / "conftest.py")
            selection = _deselected()
            if package.endswith("postgres"):
                selection += " and not pipe and not pool"
            junit = tmp_path / f"{package}.xml"
            subprocess.run(
                [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:randomly",
                 "-p", "no:cacheprovider", "-k", selection, f"--junitxml={junit}"],
                cwd=suite, env=env, capture_output=True, text=True, timeout=1500, check=False,
            )  # fmt: skip
            for test_id, outcome in outcomes(junit).items():
                ran += 1
                if not outcome.passed:
                    failures.append(f"{package} {test_id}: {outcome.detail}")
    assert ran > 120, f"only {ran} of LangGraph's store tests ran"
    assert not failures, f"{len(failures)} of {ran} failed:\n" + "\n".join(failures)


def test_every_listed_exception_names_a_test_of_the_releases() -> None:
    names = set()
    for package, files in PACKAGES.items():
        source = release_sources(package, marker="tests/test_store.py")
        for file in files:
            names |= {
                line.split("(")[0].split()[-1]
                for line in (source / file).read_text().splitlines()
                if line.lstrip().startswith(("def test_", "async def test_"))
            }
    assert set(PRIVATE) | set(DIFFERENT) <= names
