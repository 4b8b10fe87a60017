"""A non-editable install ships exactly what the source tree has."""

from __future__ import annotations

import tomllib

from tests.helpers import REPO


def test_every_subpackage_is_listed_in_pyproject():
    settings = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {"kstool." + ".".join(p.parent.relative_to(REPO / "kstool").parts)
             for p in (REPO / "kstool").rglob("__init__.py")}
    found = {name.rstrip(".") for name in found} | {"kstool.commands"}
    assert found == set(settings["packages"])
    for package, files in settings["package-data"].items():
        folder = REPO / package.replace(".", "/")
        assert all((folder / name).is_file() for name in files)
