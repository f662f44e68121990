"""The documentation site builds with ``mkdocs build --strict``: a broken link or anchor,
a page missing from the navigation, or an API symbol the reference names that no longer
exists (mkdocstrings) fails the run. Nothing is fetched at build time (mkdocs.yml)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..databases import IN_CI

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_site_builds_strict_without_a_warning(tmp_path: Path) -> None:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        message = "the docs extra is not installed (mkdocs): python3 dev.py setup installs it"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # The API pages document the source tree, whatever agentledger is installed.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert done.returncode == 0 and not warnings, done.stderr
    assert (site / "index.html").is_file()
    assert (site / "api-ledger" / "index.html").is_file()
    api = (site / "api-ledger" / "index.html").read_text()
    assert "unit_of_work" in api  # mkdocstrings rendered the docstrings
