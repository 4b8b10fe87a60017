"""A non-editable install ships exactly what the source tree has."""

from __future__ import annotations

from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_is_listed_in_pyproject():
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {"kstool." + ".".join(p.parent.relative_to(ROOT / "kstool").parts)
             for p in (ROOT / "kstool").rglob("__init__.py")}
    found = {name.rstrip(".") for name in found} | {"kstool.commands"}
    assert found == set(settings["packages"])
    for package, files in settings["package-data"].items():
        folder = ROOT / package.replace(".", "/")
        assert all((folder / name).is_file() for name in files)
