"""npm packages the project pins (web/graphiql, tests/http/http-audit, tests/http/e2e):
installed with `npm ci` from their package-lock.json, again only when the lock changed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def npm_ci(folder: Path) -> Path:
    """`npm ci` in `folder` unless its node_modules already matches its lock; node_modules."""
    modules = folder / "node_modules"
    installed = modules / ".package-lock.json"  # npm writes it on every install
    lock = folder / "package-lock.json"
    if installed.is_file() and installed.stat().st_mtime >= lock.stat().st_mtime:
        return modules
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(f"npm is needed to install {folder.relative_to(ROOT)}")
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=folder, check=True
    )
    return modules
