"""The async faces in the source are what tools/generate_async.py writes today: the
generated module repositories/_async.py, and the marker blocks left in place (retention,
transfer)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
FACES = Path("src", "agentledger", "repositories", "_async.py")


def test_the_generated_async_faces_are_fresh() -> None:
    done = _generator_run(ROOT, "--check")
    assert done.returncode == 0, done.stderr


def test_a_hand_edit_or_loss_of_the_generated_module_is_reported_and_undone(
    tmp_path: Path,
) -> None:
    shutil.copy(ROOT / "pyproject.toml", tmp_path)  # ruff's settings
    shutil.copytree(ROOT / "tools", tmp_path / "tools")
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    faces = tmp_path / FACES
    fresh = faces.read_text()
    edited = fresh.replace(
        "return await self._run(self._proxied.revoke, id, capability)",
        "return await self._run(self._proxied.revoke, id)",
    )
    assert edited != fresh
    faces.write_text(edited)

    stale = _generator_run(tmp_path, "--check")
    assert stale.returncode == 1
    assert str(FACES) in stale.stderr

    assert _generator_run(tmp_path).returncode == 0
    assert faces.read_text() == fresh

    faces.unlink()
    assert _generator_run(tmp_path, "--check").returncode == 1
    assert _generator_run(tmp_path).returncode == 0
    assert faces.read_text() == fresh


def test_an_in_place_proxy_edited_by_hand_is_reported_stale() -> None:
    generator = _load_generator()
    path = ROOT / "src" / "agentledger" / "retention.py"
    source = path.read_text()
    edited = source.replace(
        "return await self._run(self._proxied.vacuum)",
        "return await self._run(self._proxied.vacuum, 1)",
    )
    assert edited != source
    assert generator.generate(edited, path) == source


def test_no_sync_module_holds_an_async_repository_face() -> None:
    package = ROOT / "src" / "agentledger" / "repositories"
    found = [
        f"{path.relative_to(package)}: {line}"
        for path in package.rglob("*.py")
        if path.name != "_async.py"
        for line in path.read_text().splitlines()
        if line.startswith("class Async")
    ]
    assert not found


def _generator_run(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "tools" / "generate_async.py"), *options],
        capture_output=True,
        text=True,
        cwd=root,
    )


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "generate_async", ROOT / "tools" / "generate_async.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
