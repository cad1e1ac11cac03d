"""Test set-up: the package is imported from src/ (no install needed), and every test gets an empty
registry so that the methods one test decorates are not seen by another."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "src"))

from wasmrpc_guest import registry  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch):
    """A new, empty registry in place of the module's, for the length of one test."""
    fresh = registry.Registry()
    monkeypatch.setattr(registry, "REGISTRY", fresh)
    return fresh
