"""Every code example in docs/ is a file the tests run, or a fragment that is checked.

A page shows a file with a marker line and a fenced block holding the file's exact
text:

    <!-- include: docs/examples/query_run_steps.py -->
    ```python
    ...the file...
    ```

A few pages show fragments too short to be programs (a call with its options, a
command line): a block after a ``<!-- fragment -->`` line. A Python fragment must
compile (top-level ``await`` allowed), and every ``agentledger`` command line in any
block must parse with the command line's own parser, so a renamed option fails here.
A ``mermaid`` block is a diagram of the tables, checked against the models
(tests/docs/test_facts.py). Any other fenced block must be ``text`` (output, never
code).
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.engine import URL
from sqlalchemy.pool import NullPool

from agentledger import cli, migrations
from agentledger.models import VERSION_TABLE, metadata

from ..host._support import run, versions

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md"))
FENCE = re.compile(
    r"(?:<!-- (?:include: (?P<path>\S+)|(?P<fragment>fragment)) -->\n)?"
    r"```(?P<lang>\w*)\n(?P<body>.*?)^```$",
    re.DOTALL | re.MULTILINE,
)
RUN_BY = {
    # Each included file, and the tests that run it.
    "docs/examples/first_ledger.py": "tests/docs/test_readme.py",
    "docs/examples/keys_and_state.py": "tests/docs/test_docs.py",
    "docs/examples/openai_branches.py": "tests/docs/test_docs.py",
    "docs/examples/memory.py": "tests/docs/test_docs.py",
    "docs/examples/memory_langgraph.py": "tests/docs/test_docs.py",
    "docs/examples/memory_adk.py": "tests/docs/test_docs.py",
    "examples/quickstart_async.py": "tests/docs/test_examples.py",
    "examples/two_writers_conflict.py": "tests/docs/test_examples.py",
    "examples/join_app_transaction.py": "tests/docs/test_examples.py",
    "docs/examples/query_expensive_sessions.py": "tests/docs/test_queries.py",
    "docs/examples/query_latest_sessions.py": "tests/docs/test_queries.py",
    "docs/examples/query_run_steps.py": "tests/docs/test_queries.py",
    "docs/examples/query_active_grants.py": "tests/docs/test_queries.py",
    "docs/examples/query_usage_per_model.py": "tests/docs/test_queries.py",
    "docs/examples/query_in_a_schema.py": "tests/docs/test_queries.py",
    "docs/examples/pipeline.sh": "tests/docs/test_docs.py",
    "docs/examples/adopt.sh": "tests/docs/test_docs.py",
    "docs/examples/single_pipeline/alembic.ini": "tests/migrations/test_wheel.py",
    "docs/examples/single_pipeline/helpdesk.py": "tests/host/test_single_pipeline.py",
    "docs/examples/single_pipeline/migrations/env.py": "tests/host/test_single_pipeline.py",
    "docs/examples/single_pipeline/migrations/versions/host_0001_support_tickets.py": (
        "tests/host/test_single_pipeline.py"
    ),
    "examples/host_app/deploy.sh": "tests/host/test_separate_stream.py",
    "examples/host_app/app.py": "tests/host/test_host_app.py",
    "examples/host_app/shop/orders.py": "tests/host/test_host_app.py",
    "examples/host_app/migrations/env.py": "tests/host/test_separate_stream.py",
}


def _blocks() -> list[tuple[Path, str | None, str, str]]:
    return [
        (
            page,
            match["path"],
            "fragment " + match["lang"] if match["fragment"] else match["lang"],
            match["body"],
        )
        for page in PAGES
        for match in FENCE.finditer(page.read_text())
    ]


def test_the_guides_exist() -> None:
    assert {page.name for page in PAGES} >= {
        "sharing-a-database.md",
        "deploy-pipelines.md",
        "querying-with-the-orm.md",
        "adk-session-tests.md",
        "benchmarks.md",
    }


@pytest.mark.parametrize("page", PAGES, ids=[page.name for page in PAGES])
def test_every_code_block_is_an_included_file_verbatim(page: Path) -> None:
    for where, path, lang, body in _blocks():
        if where != page:
            continue
        if path is None:
            allowed = {"text", "mermaid", "fragment python", "fragment sh"}
            assert lang in allowed, f"{page.name}: a {lang or 'bare'} block that no test runs"
            continue
        assert (ROOT / path).read_text() == body, f"{page.name}: {path} differs from the file"


def test_every_python_fragment_compiles() -> None:
    flags = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    for page, _, lang, body in _blocks():
        if lang == "fragment python":
            compile(body, f"<{page.name}>", "exec", flags=flags)


_OPERATORS = {">", ">>", "<", "|", "||", "&&", ";", "&", "2>", "2>&1"}


def _command_lines(body: str) -> list[str]:
    """The ``agentledger`` command lines of a block (after a ``$`` prompt or variable
    assignments), continuation lines joined, comments left out."""
    command = re.compile(r"^\s*(?:\$ )?(?:[A-Z_]+=\S+ +)*agentledger (.*)$")
    found = []
    for line in body.replace("\\\n", " ").splitlines():
        match = command.match(line)
        if match:
            lexer = shlex.shlex(match[1], posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words = list(itertools.takewhile(lambda word: word not in _OPERATORS, lexer))
            found.append(shlex.join(words))
    return found


def test_every_command_line_shown_parses_with_the_cli_parser() -> None:
    shown = 0
    for page, _, _, body in _blocks():
        for line in _command_lines(body):
            shown += 1
            stderr = io.StringIO()
            try:
                with contextlib.redirect_stderr(stderr):
                    cli._parser().parse_args(shlex.split(line))
            except SystemExit:
                pytest.fail(f"{page.name}: agentledger {line}: {stderr.getvalue().strip()}")
    assert shown >= 20  # the command line guide, migrations, the deploy scripts


def _run_page_example(path: str, tmp_path: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_framework_example_runs_and_prints_what_it_read(tmp_path: Path) -> None:
    out = _run_page_example("docs/examples/keys_and_state.py", tmp_path)
    assert out.split() == ["3", "0", "Porto"]


def test_the_branches_example_runs_and_prints_what_it_read(tmp_path: Path) -> None:
    out = _run_page_example("docs/examples/openai_branches.py", tmp_path)
    assert out.splitlines() == ["['main', 'try-again']", "[2]", "6 None"]


def test_the_memory_example_runs_and_prints_what_it_read(tmp_path: Path) -> None:
    out = _run_page_example("docs/examples/memory.py", tmp_path)
    assert out.splitlines() == [
        "2 soup",
        "stale",
        "['food']",
        "[('memories', 'ada@example.com')]",
    ]


def test_the_langgraph_memory_example_runs_and_prints_what_it_read(tmp_path: Path) -> None:
    out = _run_page_example("docs/examples/memory_langgraph.py", tmp_path)
    assert out.splitlines() == ["remembered: likes pasta with tomatoes", "['travel', 'food']"]


def test_the_adk_memory_example_runs_and_prints_what_it_read(tmp_path: Path) -> None:
    out = _run_page_example("docs/examples/memory_adk.py", tmp_path)
    assert out.splitlines() == ["['I always take the train']", "[]"]


def test_every_included_file_is_run_by_a_test() -> None:
    included = {path for _, path, _, _ in _blocks() if path is not None}
    assert included <= set(RUN_BY), included - set(RUN_BY)
    for path, test in RUN_BY.items():
        assert (ROOT / path).is_file() and (ROOT / test).is_file(), (path, test)


def test_the_pipeline_script_reviews_applies_and_gates(scratch_url: URL, tmp_path: Path) -> None:
    script = ROOT / "docs" / "examples" / "pipeline.sh"

    run("sh", script, url=scratch_url, cwd=tmp_path)
    again = run("sh", script, url=scratch_url, cwd=tmp_path)

    reviewed = (tmp_path / "agentledger-upgrade.sql").read_text()
    assert "CREATE INDEX IF NOT EXISTS ix_agentledger_steps_started_at_model" in reviewed
    assert "CREATE TABLE agentledger_app_state" in reviewed  # revision 0003
    assert "CREATE TABLE agentledger_sessions" not in reviewed
    assert again.stdout.count(f"is at {migrations.head()} (head)") == 2
    assert versions(scratch_url, VERSION_TABLE) == {migrations.head()}


def test_the_pipeline_gate_fails_on_a_database_behind(scratch_url: URL, tmp_path: Path) -> None:
    migrations.upgrade(scratch_url, "agentledger_0001")

    gate = run("sh", ROOT / "docs" / "examples" / "pipeline.sh", url=scratch_url, cwd=tmp_path)

    # The upgrade step brought it to head; without it the gate would have said so.
    assert f"is at {migrations.head()} (head)" in gate.stdout
    migrations.downgrade(scratch_url, "agentledger_0001")
    check = ("agentledger", "db", "check", "--url", scratch_url.render_as_string(False))
    behind = run(*check, url=scratch_url, cwd=tmp_path, check=False)
    assert behind.returncode == 3
    assert "at agentledger revision agentledger_0001" in behind.stderr
    assert "to apply: agentledger_0002, agentledger_0003" in behind.stderr


def test_the_adoption_script_stamps_create_all_tables(scratch_url: URL, tmp_path: Path) -> None:
    engine = create_engine(scratch_url, poolclass=NullPool)
    with engine.begin() as connection:
        metadata.create_all(connection)
    engine.dispose()

    done = run("sh", ROOT / "docs" / "examples" / "adopt.sh", url=scratch_url, cwd=tmp_path)

    assert f"is at {migrations.head()} (head)" in done.stdout
    migrations.check(scratch_url)
