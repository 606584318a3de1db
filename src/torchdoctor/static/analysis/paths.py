"""What a file's path says about it."""

from __future__ import annotations

# Folders whose files are test code (see also :mod:`torchdoctor.static.severity_in_tests`).
TEST_FOLDERS = frozenset({"tests", "test", "testing"})


def is_test_path(path: str) -> bool:
    """Test code (``test_*.py``, ``*_test.py``, ``conftest.py``, a ``tests/`` folder)."""
    *folders, name = path.replace("\\", "/").split("/")
    return (
        name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
        or any(folder in TEST_FOLDERS for folder in folders)
    )
