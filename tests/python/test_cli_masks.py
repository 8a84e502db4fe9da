"""Masks and score modifiers end to end: `attend --mask` (with --doc-lens, --alibi, --softcap)
against an independent numpy float64 reference written from the definitions, skip reasons for
variants that do not declare a mask, and `attnbench check` of a config with masks."""

import json

import numpy as np
import pytest

from binary import run_attnbench, REPO


def visible_mask(mask, seq_q, seq_kv, doc_lens=None):
    """[seq_q, seq_kv] booleans from the definitions, end-aligned: p(i) = i + seq_kv - seq_q."""
    i = np.arange(seq_q)[:, None]
    j = np.arange(seq_kv)[None, :]
    p = i + seq_kv - seq_q
    kind, _, length = mask.partition(":")
    if kind == "none":
        return np.ones((seq_q, seq_kv), dtype=bool)
    if kind == "causal":
        return j <= p
    if kind == "window":
        return (p - int(length) <= j) & (j <= p)
    if kind == "prefix":
        return (j < int(length)) | (j <= p)
    if kind == "documents":
        document = np.repeat(np.arange(len(doc_lens)), doc_lens)
        return (document[:, None] == document[None, :]) & (j <= i)
    raise ValueError(mask)


def reference(q, k, v, scale, mask, doc_lens=None, alibi=False, softcap=0.0):
    """float64 attention with soft-capping, then ALiBi, then the mask (FlashAttention's order)."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    heads, seq_q, _ = q.shape
    seq_kv = k.shape[1]
    scores = np.einsum("hqd,hkd->hqk", q, k) * scale
    if softcap > 0:
        scores = softcap * np.tanh(scores / softcap)
    if alibi:
        slopes = 2.0 ** (-8.0 * (np.arange(heads) + 1) / heads)
        distance = np.abs(np.arange(seq_q)[:, None] + seq_kv - seq_q - np.arange(seq_kv)[None, :])
        scores = scores - slopes[:, None, None] * distance[None]
    scores = np.where(visible_mask(mask, seq_q, seq_kv, doc_lens)[None], scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    return weights @ v, weights


def save_inputs(tmp_path, heads, seq_q, seq_kv, d):
    rng = np.random.default_rng()
    q = rng.standard_normal((heads, seq_q, d)).astype(np.float32)
    k = rng.standard_normal((heads, seq_kv, d)).astype(np.float32)
    v = rng.standard_normal((heads, seq_kv, d)).astype(np.float32)
    for name, array in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", array)
    return q, k, v


def attend(tmp_path, *options, variant="naive", check=True):
    return run_attnbench("attend", "--variant", variant, "--q", tmp_path / "q.npy", "--k",
                         tmp_path / "k.npy", "--v", tmp_path / "v.npy", "--scale", 0.3, "--out",
                         tmp_path / "o.npy", "--weights", tmp_path / "w.npy", *options, check=check)


@pytest.mark.parametrize("mask, seq_q, seq_kv, doc_lens", [
    ("window:3", 17, 17, None),
    ("window:0", 5, 23, None),
    ("prefix:6", 19, 19, None),
    ("prefix:20", 7, 20, None),
    ("documents", 16, 16, [3, 1, 7, 5]),
    ("documents:2", 9, 9, [4, 5]),
])
@pytest.mark.parametrize("alibi, softcap", [(False, 0.0), (True, 0.0), (False, 2.0), (True, 2.0)])
def test_attend_mask_matches_numpy(tmp_path, mask, seq_q, seq_kv, doc_lens, alibi, softcap):
    q, k, v = save_inputs(tmp_path, 4, seq_q, seq_kv, 8)
    options = ["--mask", mask]
    if doc_lens:
        options += ["--doc-lens", ",".join(map(str, doc_lens))]
    if alibi:
        options.append("--alibi")
    if softcap:
        options += ["--softcap", softcap]
    attend(tmp_path, *options)
    out, weights = np.load(tmp_path / "o.npy"), np.load(tmp_path / "w.npy")
    expected, expected_weights = reference(q, k, v, 0.3, mask, doc_lens, alibi, softcap)
    assert np.linalg.norm(out - expected) / np.linalg.norm(expected) < 1e-5
    np.testing.assert_allclose(weights, expected_weights, atol=1e-6)
    assert np.all(weights[:, ~visible_mask(mask, seq_q, seq_kv, doc_lens)] == 0)


@pytest.mark.parametrize("switch, alibi", [("--alibi", True), ("--alibi=true", True), ("--alibi=false", False)])
def test_attend_reads_a_switch_as_given(tmp_path, switch, alibi):
    """--alibi is the axes table's switch: --alibi=false is no ALiBi, as the config's false is."""
    q, k, v = save_inputs(tmp_path, 4, 6, 6, 8)
    attend(tmp_path, "--mask", "causal", switch)
    expected, _ = reference(q, k, v, 0.3, "causal", alibi=alibi)
    out = np.load(tmp_path / "o.npy")
    assert np.linalg.norm(out - expected) / np.linalg.norm(expected) < 1e-5


@pytest.mark.parametrize("options, message", [
    (["--mask", "documents"], "needs --doc-lens"),
    (["--mask", "documents", "--doc-lens", "3,4"], "sum to 7, not seq 8"),
    (["--mask", "documents:3", "--doc-lens", "4,4"], "names 3 documents but --doc-lens gives 2"),
    (["--mask", "window:2", "--doc-lens", "4,4"], "only for --mask documents"),
    (["--mask", "sliding:2"], "unknown mask 'sliding:2'"),
    (["--mask", "prefix:9"], "prefix length must be in [0, seq_kv = 8]"),
    (["--mask", "window:2", "--causal"], "disagree"),
])
def test_attend_rejects_bad_masks(tmp_path, options, message):
    save_inputs(tmp_path, 1, 8, 8, 4)
    result = attend(tmp_path, *options, check=False)
    assert result.returncode != 0
    assert message in result.stderr


def test_attend_refuses_a_query_with_no_visible_key(tmp_path):
    save_inputs(tmp_path, 1, 8, 5, 4)  # seq_q > seq_kv: rows 0..2 sit before the first key
    result = attend(tmp_path, "--mask", "window:1", check=False)
    assert result.returncode != 0
    assert "query rows 0 to 2 see no key under the window:1 mask" in result.stderr


def test_attend_names_what_a_variant_does_not_take(tmp_path):
    save_inputs(tmp_path, 1, 8, 8, 4)
    result = attend(tmp_path, "--mask", "window:2", variant="blocked", check=False)
    assert result.returncode != 0
    assert "blocked does not support the window mask" in result.stderr


MASKS_SWEEP = """
name = "masks-e2e"
variants = ["naive", "blocked"]
[axes]
heads = [2]
seq_len = [24, 40]
d_k = [8]
mask = ["none", "causal", "window:5", "prefix:9", "documents:3"]
alibi = [false, true]
softcap = [0, 30]
[measure]
warmup = 0
repetitions = 2
min_time_s = 0.001
"""


def test_check_a_config_with_masks(tmp_path):
    config = tmp_path / "masks.toml"
    config.write_text(MASKS_SWEEP)
    result = run_attnbench("check", config, "--json", check=True)
    report = json.loads(result.stdout)
    assert report["failed"] == 0 and report["passed"] == 2 * 5 * 2 * 2 + 4
    by_variant = {}
    for case in report["records"]:
        by_variant.setdefault(case["variant"], []).append(case)
    # A record per case and input distribution checked; a skipped case one record.
    assert len(by_variant["naive"]) == 2 * 5 * 2 * 2 * 4
    assert all(c["status"] == "ok" for c in by_variant["naive"]), by_variant["naive"]
    # blocked takes none and causal without modifiers: 4 cases; every other one is skipped, named.
    ok = [c for c in by_variant["blocked"] if c["status"] == "ok"]
    skipped = [c for c in by_variant["blocked"] if c["status"] == "skipped"]
    assert len(ok) == 2 * 2 * 4 and len(skipped) == 2 * 5 * 2 * 2 - 4
    assert all("does not support" in c["reason"] for c in skipped)


def test_run_records_masks_documents_and_density(tmp_path):
    config = tmp_path / "masks.toml"
    config.write_text(MASKS_SWEEP.replace('["naive", "blocked"]', '["naive"]')
                      .replace("alibi = [false, true]", "alibi = [true]"))
    run_attnbench("run", config, "--out", tmp_path / "run", check=True)
    rows = [json.loads(line) for line in (tmp_path / "run" / "cases.jsonl").read_text().splitlines()]
    assert all(r["status"] == "ok" for r in rows)
    assert all(r["alibi"] for r in rows)
    documents = [r for r in rows if r["mask"] == "documents:3"]
    assert documents and all(len(r["doc_lens"]) == 3 and sum(r["doc_lens"]) == r["seq_q"]
                             for r in documents)
    for r in rows:
        assert r["density"] == pytest.approx(r["flops"] / r["dense_flops"])
        assert (r["density"] == 1) == (r["mask"] == "none")
    causal = [r for r in rows if r["mask"] == "causal"]
    assert all(r["causal"] and r["flop_convention"] == "causal: unmasked pairs only" for r in causal)


def test_committed_masks_config_plans(tmp_path):
    plan = json.loads(run_attnbench("plan", REPO / "configs" / "masks.toml", "--json",
                                    check=True).stdout)
    flash = [c for c in plan["cases"] if c["variant"] == "flash_cpu"]
    naive = [c for c in plan["cases"] if c["variant"] == "naive"]
    # Both take every mask and modifier the config sweeps.
    assert naive and all(c["unsupported_reason"] == "" for c in naive)
    assert flash and all(c["unsupported_reason"] == "" for c in flash)
    assert {c["mask"] for c in flash} == {"none", "causal", "window:32", "prefix:64", "documents:8"}
