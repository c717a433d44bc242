"""The compile caches' layers: reads fall through to the shared layer, writes stay in the evaluation's
own, promotion keeps only the evaluation's own namespace and never follows a planted link."""

import json
import os

from skillbase.toolchain import layered_cache


def test_a_layer_is_read_through_and_promoted_into_its_own_namespace_only(tmp_path, monkeypatch):
    from skillbase.toolchain.triton_cache import LayeredCacheManager

    shared, upper = tmp_path / "shared", tmp_path / "upper"
    for key, value in layered_cache.layer_env(shared, upper, "ns1").items():
        monkeypatch.setenv(key, value)
    m = LayeredCacheManager("KEY")
    path = m.put(b"cubin", "k.cubin")
    m.put_group("k.json", {"k.cubin": path})
    assert m.get_file("k.cubin") == path and path.startswith(str(upper))
    # a write under another namespace's name, and a link to a host file, planted in the writable layer
    (upper / "triton" / "ns2" / "KEY").mkdir(parents=True)
    (upper / "triton" / "ns2" / "KEY" / "k.cubin").write_bytes(b"poison")
    secret = tmp_path / "host-secret"
    secret.write_text("s")
    (upper / "triton" / "ns1" / "KEY" / "link").symlink_to(secret)

    assert layered_cache.promote(upper, shared, "ns1") > 0
    assert not (upper / "triton").exists()  # every writable layer is emptied
    assert not (shared / "triton" / "ns2").exists() and not (shared / "triton" / "ns1" / "KEY" / "link").exists()
    fresh = LayeredCacheManager("KEY")  # the next evaluation of the same candidate
    assert fresh.get_file("k.cubin") == str(shared / "triton" / "ns1" / "KEY" / "k.cubin")
    group = fresh.get_group("k.json")
    assert group == {"k.cubin": str(shared / "triton" / "ns1" / "KEY" / "k.cubin")}
    assert json.loads((shared / "triton" / "ns1" / "KEY" / "__grp__k.json").read_text())["child_paths"]


def test_a_layer_over_the_size_limit_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(layered_cache, "MAX_PROMOTED_BYTES", 10)
    (tmp_path / "upper" / "triton" / "ns" / "K").mkdir(parents=True)
    (tmp_path / "upper" / "triton" / "ns" / "K" / "big").write_bytes(b"x" * 11)
    assert layered_cache.promote(tmp_path / "upper", tmp_path / "shared", "ns") == 0
    assert not (tmp_path / "shared" / "triton" / "ns").exists()
