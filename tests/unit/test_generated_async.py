"""The async proxies in the source are what tools/generate_async.py writes today."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def test_the_generated_async_proxies_are_fresh() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "generate_async.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr


def test_a_proxy_edited_by_hand_is_reported_stale(tmp_path: Path) -> None:
    generator = _load_generator()
    source = (ROOT / "src" / "agentledger" / "repositories" / "grants.py").read_text()
    edited = source.replace(
        "return await self._run(self._proxied.revoke, id, capability)",
        "return await self._run(self._proxied.revoke, id)",
    )
    assert edited != source
    assert generator.generate(edited, Path("grants.py")) == source


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "generate_async", ROOT / "tools" / "generate_async.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module
