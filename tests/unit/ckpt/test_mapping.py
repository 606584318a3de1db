"""Key mapping proposals: prefixes added or removed, renamed submodules, and no guessing."""

from __future__ import annotations

from torchdoctor.ckpt.mapping import propose_mapping

MODEL = {
    "encoder.0.weight": (8, 4),
    "encoder.0.bias": (8,),
    "encoder.2.weight": (8, 8),
    "encoder.2.bias": (8,),
    "head.weight": (3, 8),
    "head.bias": (3,),
}


def _prefixed(prefix: str, keys: dict) -> dict:
    return {prefix + key: shape for key, shape in keys.items()}


def test_ddp_and_compile_prefixes_are_stripped() -> None:
    for prefix in ("module.", "_orig_mod.", "module._orig_mod."):
        mapping = propose_mapping(_prefixed(prefix, MODEL), MODEL)
        assert [(r.old, r.new, r.keys) for r in mapping.rewrites] == [(prefix, "", 6)]
        assert str(mapping.rewrites[0]) == f"strip '{prefix}'"


def test_a_missing_wrapper_prefix_is_added() -> None:
    mapping = propose_mapping(MODEL, _prefixed("model.", MODEL))
    assert [(r.old, r.new) for r in mapping.rewrites] == [("", "model.")]
    assert mapping.apply("head.bias") == "model.head.bias"


def test_renamed_submodule_is_matched_by_names_and_shapes() -> None:
    checkpoint = {k.replace("encoder.", "backbone."): s for k, s in MODEL.items()}
    mapping = propose_mapping(checkpoint, MODEL)
    assert [(r.old, r.new, r.keys) for r in mapping.rewrites] == [("backbone.", "encoder.", 4)]
    assert mapping.apply("backbone.2.bias") == "encoder.2.bias"
    assert mapping.apply("head.bias") == "head.bias"


def test_matching_keys_need_no_mapping() -> None:
    assert not propose_mapping(MODEL, MODEL)


def test_a_different_shape_is_not_mapped() -> None:
    checkpoint = {"classifier.weight": (10, 8), "classifier.bias": (10,)}
    model = {"head.weight": (3, 8), "head.bias": (3,)}
    assert not propose_mapping(checkpoint, model)


def test_two_equally_good_destinations_are_not_guessed() -> None:
    checkpoint = {"block.weight": (4, 4)}
    model = {"left.weight": (4, 4), "right.weight": (4, 4)}
    assert not propose_mapping(checkpoint, model)


def test_unrelated_keys_stay_unmapped_beside_a_real_rename() -> None:
    checkpoint = {**_prefixed("module.", MODEL), "module.extra.weight": (5, 5)}
    mapping = propose_mapping(checkpoint, MODEL)
    assert mapping.apply("module.extra.weight") == "module.extra.weight"
    assert sum(r.keys for r in mapping.rewrites) == 6
