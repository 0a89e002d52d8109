"""mypy over the package as it is installed: `limbo/` plus the folders pyproject.toml maps into it
(`services/` is `limbo.services`, and so on).

Why not plain `mypy limbo services ...`: mypy names a module after the folder it sits in, so
`services/mail.py` would become `services.mail` and every `limbo.services` import would be
unresolved; nor can mypy follow setuptools' editable-install finder. So this hands mypy each file
with the module name the package gives it, read from the same `package-dir` table setuptools uses.
The settings are pyproject.toml's `[tool.mypy]`; extra arguments go to mypy (e.g. `--no-incremental`).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from mypy import build
from mypy.errors import CompileError
from mypy.main import process_options
from mypy.modulefinder import BuildSource

ROOT = Path(__file__).resolve().parents[1]


def package_roots() -> dict[str, Path]:
    """Each top-level package's folder: `limbo` itself plus pyproject's `package-dir` entries."""
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapped = table["tool"]["setuptools"].get("package-dir", {})
    return {"limbo": ROOT / "limbo", **{name: ROOT / folder for name, folder in mapped.items()}}


def sources() -> list[BuildSource]:
    """Every module of the package, named as an import of the installed package names it
    (and this script)."""
    found = []
    for package, folder in package_roots().items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append(BuildSource(str(path.relative_to(ROOT)), ".".join((package, *parts))))
    return [*found, BuildSource(str(Path(__file__).resolve().relative_to(ROOT)), "typecheck")]


def main(argv: list[str]) -> int:
    # `-c ""` satisfies mypy's need for a target; the real targets are `sources()`.
    _, options = process_options(["--config-file", str(ROOT / "pyproject.toml"), *argv, "-c", ""])
    files = sources()
    try:
        result = build.build(files, options)
    except CompileError as exc:
        print("\n".join(exc.messages), file=sys.stderr)
        return 2
    for line in result.errors:
        print(line)
    errors = sum(1 for line in result.errors if ": error:" in line)
    if errors:
        print(f"Found {errors} errors in {len(files)} source files", file=sys.stderr)
        return 1
    print(f"Success: no issues found in {len(files)} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
