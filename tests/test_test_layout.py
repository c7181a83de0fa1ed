"""The test tree itself: pytest imports a test module in a folder that is not a package by its file
name alone, so two such modules of one name stop the whole default run at collection."""
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _in_a_package(path: Path) -> bool:
    return (path.parent / "__init__.py").exists()


def test_no_two_test_modules_outside_packages_share_a_name():
    by_name = defaultdict(list)
    for path in TESTS.rglob("test_*.py"):
        if "third_party" in path.parts or _in_a_package(path):
            continue
        by_name[path.name].append(str(path.relative_to(TESTS)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}
