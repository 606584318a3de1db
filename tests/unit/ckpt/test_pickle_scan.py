"""The pickle scan names what a pickle imports without importing or running anything."""

from __future__ import annotations

import argparse
import collections
import io
import pickle

import pytest

from torchdoctor.ckpt.pickle_scan import scan_pickle, scan_pickles


class Exploding:
    def __reduce__(self):
        return (exec, ("raise SystemExit('the scan ran the pickle')",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_names_every_global_in_order_for_old_and_new_protocols(protocol: int) -> None:
    data = pickle.dumps(
        {"args": argparse.Namespace(lr=0.1), "call": Exploding(), "od": collections.OrderedDict()},
        protocol=protocol,
    )
    scan = scan_pickle(io.BytesIO(data))
    assert scan.globals[:2] == ("argparse.Namespace", "builtins.exec")
    assert "collections.OrderedDict" in scan.globals
    assert not scan.holds_module


def test_python2_names_are_mapped_to_python3() -> None:
    data = pickle.dumps({1, 2}, protocol=2)  # protocol 2 pickles sets as __builtin__.set
    assert scan_pickle(io.BytesIO(data)).globals == ("builtins.set",)


def test_plain_containers_reference_no_globals() -> None:
    data = pickle.dumps({"epoch": 3, "losses": [0.5, 0.25], "name": "run"}, protocol=2)
    scan = scan_pickle(io.BytesIO(data))
    assert scan.globals == () and not scan.holds_module


def test_module_state_keys_mark_a_pickled_module() -> None:
    whole = {"_parameters": {}, "_buffers": {}, "_modules": {}}
    partial = {"_parameters": {}, "weight": 1}
    assert scan_pickle(io.BytesIO(pickle.dumps(whole, protocol=2))).holds_module
    assert not scan_pickle(io.BytesIO(pickle.dumps(partial, protocol=2))).holds_module


def test_consecutive_pickles_are_scanned_like_the_legacy_format() -> None:
    stream = io.BytesIO(pickle.dumps(1) + pickle.dumps(argparse.Namespace()))
    assert scan_pickles(stream, 2).globals == ("argparse.Namespace",)


@pytest.mark.parametrize("data", [b"hello world\n", pickle.dumps({"a": [1, 2]})[:9]])
def test_garbage_and_truncated_streams_raise_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        scan_pickle(io.BytesIO(data))
