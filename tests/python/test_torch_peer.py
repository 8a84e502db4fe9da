"""Tests for scripts/peers/torch_sdpa.py. Most need no PyTorch: the config expansion must give
the C++ harness's shapes in the harness's order (checked against hand-written lists and
against `attnbench check`), and every record must carry every field of the harness's records
and load through attnbench_results. Where torch imports, the last tests time tiny cases on
the CPU (and on the GPU where there is one)."""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import json
import re
import subprocess
import sys
import time
import types
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import attnbench_results as ar
from binary import REPO, run_attnbench
from conftest import SCRIPTS_DIR

PEER_PATH = SCRIPTS_DIR / "peers" / "torch_sdpa.py"
spec = importlib.util.spec_from_file_location("torch_sdpa", PEER_PATH)
peer = importlib.util.module_from_spec(spec)
sys.modules["torch_sdpa"] = peer
spec.loader.exec_module(peer)

Shape = peer.Shape


def config_axes(name: str) -> dict:
    config, _ = peer.load_config(str(REPO / "configs" / name), [])
    return config["axes"]


# ---------------------------------------------------------------------------
# Expansion, against hand-written expectations


QUICK = """
name = "quick"
variants = "cpu"
[axes]
batch    = [1]
heads    = [8]
seq_len  = { from = 128, to = 1024, mul = 2 }
d_k      = [64]
causal   = [false, true]
"""

FA_SHAPES = """
name = "fa-shapes"
variants = "cuda"
[axes]
tokens    = [16384]
model_dim = [2048]
seq_len   = [512, 1024, 2048, 4096, 8192, 16384]
d_k       = [64, 128]
causal    = [false, true]
"""


def axes_of_text(tmp_path, text: str) -> dict:
    path = tmp_path / "config.toml"
    path.write_text(text)
    config, _ = peer.load_config(str(path), [])
    return config["axes"]


def test_quick_style_config_expands_to_the_harness_order(tmp_path):
    shapes = peer.expand_shapes(axes_of_text(tmp_path, QUICK))
    expected = [Shape(1, 8, 8, n, n, 64, 64, causal)
                for causal in (False, True) for n in (128, 256, 512, 1024)]
    assert shapes == expected


def test_fa_shapes_style_config_keeps_tokens_and_model_dim_in_lockstep(tmp_path):
    shapes = peer.expand_shapes(axes_of_text(tmp_path, FA_SHAPES))
    seqs = (512, 1024, 2048, 4096, 8192, 16384)
    expected = [Shape(16384 // n, 2048 // d, 2048 // d, n, n, d, d, causal)
                for d in (64, 128) for causal in (False, True) for n in seqs]
    assert shapes == expected
    assert all(s.batch * s.seq_q == 16384 and s.heads * s.d_k == 2048 for s in shapes)


@pytest.mark.parametrize("config", sorted(p.name for p in (REPO / "configs").glob("*.toml")))
def test_every_shipped_config_expands(config):
    assert peer.expand_shapes(config_axes(config))


def test_masks_toml_expands_to_the_masks_the_peer_times():
    axes = config_axes("masks.toml")
    shapes = peer.expand_shapes(axes)
    assert {s.causal for s in shapes} == {False, True}
    assert len(shapes) == 2 * 2  # none and causal, at two sequence lengths
    assert peer.left_out(axes) == ["mask window:32", "mask prefix:64", "mask documents:8", "alibi",
                                   "softcap 30"]
    with pytest.raises(peer.ConfigError, match="either causal or mask"):
        peer.expand_shapes({**axes, "causal": [True]})


def test_decode_toml_sweeps_seq_kv_with_one_query():
    shapes = peer.expand_shapes(config_axes("decode.toml"))
    assert len(shapes) > 1 and all(s.seq_q == 1 and s.kv_heads == s.heads for s in shapes)
    assert [s.seq_kv for s in shapes] == sorted({s.seq_kv for s in shapes})  # seq innermost


def test_gpu_edge_toml_puts_kv_heads_innermost_and_d_v_apart():
    shapes = peer.expand_shapes(config_axes("gpu-edge.toml"))
    assert len(shapes) == 2 * 2 * 2 * 6 * 2  # d_k, d_v, causal, seq pairs, kv_heads
    assert shapes[:4] == [Shape(2, 4, 4, 1, 130, 40, 40, False), Shape(2, 4, 2, 1, 130, 40, 40, False),
                          Shape(2, 4, 4, 1, 257, 40, 40, False), Shape(2, 4, 2, 1, 257, 40, 40, False)]
    assert any(s.d_k != s.d_v for s in shapes)
    assert any(s.causal and s.seq_q < s.seq_kv for s in shapes)


@pytest.mark.parametrize("value, expected", [
    (512, [512]),
    ([3, 1, 2], [3, 1, 2]),
    ({"from": 128, "to": 1024, "mul": 2}, [128, 256, 512, 1024]),
    ({"from": 100, "to": 1000, "mul": 3}, [100, 300, 900]),
    ({"from": 1, "to": 10, "step": 4}, [1, 5, 9]),
])
def test_axis_forms(value, expected):
    assert peer.parse_axis(value, "axes.seq_len") == expected


@pytest.mark.parametrize("axes, message", [
    ({"tokens": [1000], "seq_len": [512], "d_k": [64]}, "axes.tokens: 1000 is not a multiple of seq_q 512"),
    ({"model_dim": [100], "seq_len": [8], "d_k": [64]}, "axes.model_dim: 100 is not a multiple of d_k 64"),
    ({"seq_q": [9], "seq_kv": [8], "causal": True}, "causal attention needs seq_q <= seq_kv"),
    ({"heads": [6], "kv_heads": [4], "seq_len": [8]}, "heads (6) must be a multiple of kv_heads (4)"),
    ({"seq_len": [8], "seq_q": [8]}, "give either seq_len or seq_q/seq_kv"),
    ({"seq_q": [8]}, "needs seq_len, or both seq_q and seq_kv"),
    ({"seq_len": []}, "axes.seq_len: axis is empty"),
    ({"seq_len": [0]}, "must be positive"),
    ({"seq_len": {"from": 8, "to": 4, "mul": 2}}, "is below 'from'"),
    ({"seq_len": [8], "sequence": [8]}, "axes.sequence: unknown key"),
])
def test_impossible_axes_are_refused_like_the_harness(axes, message):
    with pytest.raises(peer.ConfigError, match=re.escape(message)):
        peer.expand_shapes(axes)


def test_set_overrides_apply_before_expansion(tmp_path):
    config, _ = peer.load_config(str(REPO / "configs" / "gpu-scaling.toml"),
                                 ["axes.seq_len=[64, 128]", "axes.causal=[false]", "measure.warmup=0"])
    assert [s.seq_q for s in peer.expand_shapes(config["axes"])] == [64, 128, 64, 128]
    assert config["measure"]["warmup"] == 0
    with pytest.raises(peer.ConfigError, match="expected key=value"):
        peer.load_config(str(REPO / "configs" / "quick.toml"), ["axes.seq_len"])


# ---------------------------------------------------------------------------
# Expansion, against the binary itself


CHECK_SHAPE = re.compile(r"^naive\s+(b\d+ h\d+/\d+ q\d+ kv\d+ dk\d+ dv\d+(?: causal)?)\s+(ok|failed|skipped)")


@pytest.mark.parametrize("config, overrides", [
    ("fa-shapes.toml", ["axes.tokens=[16]", "axes.model_dim=[32]", "axes.seq_len=[2, 4, 8]",
                        "axes.d_k=[8, 16]"]),
    ("gpu-edge.toml", ["axes.seq_q=[1, 3]", "axes.seq_kv=[3, 5]", "axes.d_k=[4]", "axes.d_v=[4, 6]",
                       "axes.batch=[1]"]),
])
def test_expansion_matches_attnbench_check(config, overrides):
    args = ["check", f"configs/{config}", "--variants", "naive"]
    for assignment in overrides:
        args += ["--set", assignment]
    result = run_attnbench(*args, check=True, timeout=300)
    from_binary = [m[1] for m in map(CHECK_SHAPE.match, result.stdout.splitlines()) if m]
    loaded, _ = peer.load_config(str(REPO / "configs" / config), overrides)
    assert from_binary == [peer.describe(s) for s in peer.expand_shapes(loaded["axes"])]


# ---------------------------------------------------------------------------
# Records and the results folder


def record_fields_in_harness() -> tuple[str, ...]:
    source = (REPO / "harness" / "record.cpp").read_text()
    body = source[source.index("record_fields()"):]
    body = body[body.index("{"):body.index("};")]
    return tuple(re.findall(r'"([a-z_0-9]+)"', body))


def test_record_fields_are_the_harness_fields():
    assert peer.RECORD_FIELDS == record_fields_in_harness()


def test_ok_record_counts_like_the_harness():
    shape = Shape(2, 4, 2, 3, 7, 8, 6, True)
    record = peer.make_record(5, "torch_math", "cuda", shape,
                              timing=peer.Timing([2.0, 1.0, 3.0]), workspace_bytes=1024,
                              peak_gflops=100.0, oracle={"max_abs_err": 1e-7, "rel_l2_err": 1e-8,
                                                         "sampled": False})
    assert tuple(record) == peer.RECORD_FIELDS
    pairs = sum(min(7, 7 - 3 + i + 1) for i in range(3))  # end-aligned: row i sees i + 5 keys
    assert record["flops"] == 2 * 2 * 4 * pairs * (8 + 6)
    assert record["flop_convention"] == "causal: unmasked pairs only"
    assert record["bytes"] == 4 * 2 * (4 * 3 * 8 + 2 * 7 * 8 + 2 * 7 * 6 + 4 * 3 * 6)
    assert record["time_ms_median"] == 2.0 and record["time_ms_min"] == 1.0 and record["time_ms_max"] == 3.0
    assert record["gflops"] == pytest.approx(record["flops"] / 2e-3 / 1e9)
    assert record["percent_of_peak"] == pytest.approx(record["gflops"])  # peak 100 GFLOP/s
    assert record["repetitions"] == 3 and record["iterations"] == 1
    assert record["noisy"] is True  # cv 0.5
    assert record["case_id"] == "torch_math|b2|h4|kv2|q3|k7|dk8|dv6|causal"


def test_skipped_record_has_no_timing():
    record = peer.make_record(0, "torch_flash", "cuda", Shape(1, 1, 1, 4, 4, 8, 8, False),
                              status="skipped", reason="fp16/bf16 only")
    assert tuple(record) == peer.RECORD_FIELDS
    assert record["status"] == "skipped" and record["reason"] == "fp16/bf16 only"
    for key in ("time_ms_median", "gflops", "gbps", "cv", "noisy", "percent_of_peak", "oracle_rel_l2_err"):
        assert record[key] is None


def fake_torch(device_count: int = 0):
    """Just enough of torch's surface for manifest_for on the CPU."""
    return SimpleNamespace(__version__="0.0-test", version=SimpleNamespace(cuda=None),
                           backends=SimpleNamespace(cudnn=SimpleNamespace(version=lambda: None)),
                           get_num_threads=lambda: 2)


def test_results_folder_loads_through_attnbench_results(tmp_path):
    args = SimpleNamespace(device="cpu", set=["axes.seq_len=[4]"], backends=["math", "flash"])
    config, text = peer.load_config(str(REPO / "configs" / "quick.toml"), args.set)
    settings = {"found": {"torch.backends.cuda.matmul.allow_tf32": False}, "used": {}}
    manifest = peer.manifest_for(fake_torch(), args, config, text, None, settings, 50.0)
    writer = peer.ResultsWriter(tmp_path / "run", manifest)
    shapes = peer.expand_shapes(config["axes"])
    writer.append(peer.make_record(0, "torch_math", "cpu", shapes[0], timing=peer.Timing([1.0, 1.1]),
                                   peak_gflops=50.0, threads=2,
                                   oracle={"max_abs_err": 1e-7, "rel_l2_err": 1e-8, "sampled": False}))
    writer.append(peer.make_record(1, "torch_flash", "cpu", shapes[0], status="skipped",
                                   reason="the flash backend needs CUDA, \"quoted\""))
    run = ar.load_run(tmp_path / "run")
    assert run.name == "torch-quick" and run.gpu_name is None
    assert [c["status"] for c in run.cases] == ["ok", "skipped"]
    assert run.manifest["peer"]["tf32_settings_found"] == {"torch.backends.cuda.matmul.allow_tf32": False}

    with open(tmp_path / "run" / "summary.csv", newline="") as summary:
        rows = list(csv.reader(summary))
    assert tuple(rows[0]) == peer.RECORD_FIELDS
    row = dict(zip(rows[0], rows[1]))
    assert row["causal"] == "false" and row["oracle_after_rel_l2_err"] == "" and row["noisy"] == "false"
    assert dict(zip(rows[0], rows[2]))["reason"] == 'the flash backend needs CUDA, "quoted"'
    lines = (tmp_path / "run" / "cases.jsonl").read_text().splitlines()
    assert [tuple(json.loads(line)) for line in lines] == [peer.RECORD_FIELDS] * 2

    with pytest.raises(peer.ConfigError, match="already exists"):
        peer.ResultsWriter(tmp_path / "run", manifest)


# ---------------------------------------------------------------------------
# The command line


def run_peer(*args, env_path: Path | None = None) -> subprocess.CompletedProcess:
    env = None
    if env_path is not None:
        import os
        env = dict(os.environ, PYTHONPATH=str(env_path))
    return subprocess.run([sys.executable, str(PEER_PATH), *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=600)


def test_help():
    result = run_peer("--help")
    assert result.returncode == 0 and "usage:" in result.stdout and "is_causal" in result.stdout


def test_without_torch_it_exits_2_with_one_line(tmp_path):
    broken = tmp_path / "site" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('no torch in this test')\n")
    result = run_peer("configs/quick.toml", "--device", "cpu", "--out", tmp_path / "out",
                      env_path=tmp_path / "site")
    assert result.returncode == 2
    assert result.stderr == "torch_sdpa.py: error: cannot import torch (no torch in this test)\n"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("args, message", [
    (["configs/absent.toml"], "configs/absent.toml: cannot open config file"),
    (["configs/quick.toml", "--set", "axes.seq_len=[0]"], "axes.seq_len: must be positive, got 0"),
])
def test_bad_config_exits_2_with_one_line(args, message):
    result = run_peer(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr


# ---------------------------------------------------------------------------
# The timing code, on a stand-in for torch (numpy underneath), so that it is exercised here too:
# the stand-in's math backend computes SDPA as PyTorch documents it (is_causal aligned to the
# top-left), and every other backend refuses with a warning, as PyTorch's do on fp32.


class FakeTensor:
    def __init__(self, array):
        self.a = np.asarray(array)

    def double(self):
        return FakeTensor(self.a.astype(np.float64))

    def repeat_interleave(self, repeats, dim):
        return FakeTensor(np.repeat(self.a, repeats, axis=dim))

    def unsqueeze(self, dim):
        return FakeTensor(np.expand_dims(self.a, dim))

    def __getitem__(self, index):
        return FakeTensor(self.a[index])

    def __setitem__(self, index, value):
        self.a[index] = value

    def __matmul__(self, other):
        return FakeTensor(self.a @ other.a)

    def __mul__(self, factor):
        return FakeTensor(self.a * factor)

    def __add__(self, other):
        return FakeTensor(self.a + (other.a if isinstance(other, FakeTensor) else other))

    def __sub__(self, other):
        return FakeTensor(self.a - other.a)

    def __le__(self, other):
        return FakeTensor(self.a <= (other.a if isinstance(other, FakeTensor) else other))

    def abs(self):
        return FakeTensor(np.abs(self.a))

    def transpose(self, first, second):
        return FakeTensor(np.swapaxes(self.a, first, second))

    def masked_fill(self, mask, value):
        return FakeTensor(np.where(mask.a, value, self.a))

    def logical_not(self):
        return FakeTensor(np.logical_not(self.a))

    def max(self):
        return FakeTensor(self.a.max())

    def all(self):
        return FakeTensor(self.a.all())

    def item(self):
        return self.a.item()

    def tolist(self):
        return self.a.tolist()

    def numel(self):
        return self.a.size

    def element_size(self):
        return self.a.itemsize


class FakeEvent:
    def __init__(self, enable_timing=False):
        self.when = None

    def record(self):
        self.when = time.perf_counter()

    def elapsed_time(self, end):
        return (end.when - self.when) * 1e3


def fake_cuda():
    properties = SimpleNamespace(name="Stand-in GPU", multi_processor_count=1, major=9, minor=0,
                                 total_memory=2**30)
    return SimpleNamespace(
        is_available=lambda: True, OutOfMemoryError=type("OutOfMemoryError", (RuntimeError,), {}),
        Event=FakeEvent, synchronize=lambda: None, reset_peak_memory_stats=lambda: None,
        memory_allocated=lambda: 4096, max_memory_allocated=lambda: 4096 + 10**6,
        empty_cache=lambda: None, get_device_properties=lambda index: properties,
        get_device_name=lambda index: properties.name)


def make_fake_torch(new_tf32_api=False):
    state = SimpleNamespace(backend=None, refuse_gqa=False, corrupt=False, calls=0)
    backend = SimpleNamespace(MATH="MATH", EFFICIENT_ATTENTION="EFFICIENT", FLASH_ATTENTION="FLASH",
                              CUDNN_ATTENTION="CUDNN")

    @contextlib.contextmanager
    def sdpa_kernel(which):
        previous, state.backend = state.backend, which
        try:
            yield
        finally:
            state.backend = previous

    def sdpa(q, k, v, attn_mask=None, is_causal=False, enable_gqa=False):
        state.calls += 1
        if state.backend != backend.MATH:
            warnings.warn(f"stand-in: {state.backend} takes fp16 and bf16 only")
            raise RuntimeError("No available kernel. Aborting execution.")
        keys, values = k.a, v.a
        if keys.shape[1] != q.a.shape[1]:
            if not enable_gqa or state.refuse_gqa:
                warnings.warn("stand-in: no GQA here")
                raise RuntimeError("No available kernel. Aborting execution.")
            group = q.a.shape[1] // keys.shape[1]
            keys, values = np.repeat(keys, group, axis=1), np.repeat(values, group, axis=1)
        scores = q.a @ keys.swapaxes(-1, -2) / np.sqrt(q.a.shape[-1])
        seq_q, seq_kv = scores.shape[-2:]
        mask = np.tril(np.ones((seq_q, seq_kv), bool)) if is_causal else (
            None if attn_mask is None else attn_mask.a)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        out = (weights / weights.sum(axis=-1, keepdims=True)) @ values
        return FakeTensor(out.astype(q.a.dtype) + (1.0 if state.corrupt else 0.0))

    class Generator:
        def __init__(self, device=None):
            self.rng = np.random.default_rng(0)

        def manual_seed(self, seed):
            self.rng = np.random.default_rng(seed)
            return self

    def randn(*shape, device=None, generator=None):
        return FakeTensor((generator or Generator()).rng.standard_normal(shape).astype(np.float32))

    def softmax(x, dim):
        e = np.exp(x.a - x.a.max(axis=dim, keepdims=True))
        return FakeTensor(e / e.sum(axis=dim, keepdims=True))

    torch = types.ModuleType("torch")
    matmul = SimpleNamespace(allow_tf32=True)
    if new_tf32_api:
        matmul.fp32_precision = "tf32"
    torch.__dict__.update(
        __version__="0.0-stand-in", version=SimpleNamespace(cuda=None), Generator=Generator, randn=randn,
        randint=lambda high, size, generator: FakeTensor(generator.rng.integers(0, high, size)),
        arange=lambda n, device=None: FakeTensor(np.arange(n)), softmax=softmax,
        stack=lambda tensors: FakeTensor(np.stack([t.a for t in tensors])),
        isfinite=lambda x: FakeTensor(np.isfinite(x.a)), mm=lambda a, b: FakeTensor(a.a @ b.a),
        linalg=SimpleNamespace(vector_norm=lambda x: FakeTensor(np.linalg.norm(x.a.ravel()))),
        get_num_threads=lambda: 1, get_float32_matmul_precision=lambda: "high",
        set_float32_matmul_precision=lambda value: None,
        backends=SimpleNamespace(cuda=SimpleNamespace(matmul=matmul),
                                 cudnn=SimpleNamespace(allow_tf32=True, version=lambda: None)),
        cuda=SimpleNamespace(is_available=lambda: False,
                             OutOfMemoryError=type("OutOfMemoryError", (RuntimeError,), {})),
        fake_state=state)
    attention = types.ModuleType("torch.nn.attention")
    attention.SDPBackend, attention.sdpa_kernel = backend, sdpa_kernel
    nn = types.ModuleType("torch.nn")
    nn.attention, nn.functional = attention, SimpleNamespace(scaled_dot_product_attention=sdpa)
    torch.nn = nn
    return torch, {"torch": torch, "torch.nn": nn, "torch.nn.attention": attention}


@pytest.fixture
def fake_torch_module(monkeypatch):
    torch, modules = make_fake_torch()
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    return torch


EDGE_TINY = ["--set", "axes.seq_q=[1, 5]", "--set", "axes.seq_kv=[5, 33]", "--set", "axes.d_k=[8]",
             "--set", "axes.d_v=[8, 12]", "--set", "oracle.full_check_max_n=16",
             "--set", "measure.min_time_s=0.001", "--repeats", "2"]


def test_stand_in_run_checks_masks_gqa_and_sampled_rows(fake_torch_module, tmp_path, capsys):
    out = tmp_path / "edge"
    code = peer.main(["configs/gpu-edge.toml", "--device", "cpu", "--out", str(out), *EDGE_TINY])
    assert code == 0, capsys.readouterr()
    run = ar.load_run(out)
    math_cases = [c for c in run.cases if c["variant"] == "torch_math"]
    assert len(math_cases) == 2 * 2 * 4 * 2  # d_v, causal, seq pairs, kv_heads
    # The end-aligned mask for seq_q < seq_kv agrees with the float64 reference; so does GQA.
    assert all(c["status"] == "ok" and c["oracle_rel_l2_err"] < 1e-5 for c in math_cases)
    assert any(c["causal"] and c["seq_q"] < c["seq_kv"] for c in math_cases)
    assert {c["oracle_sampled"] for c in math_cases} == {True, False}  # seq_kv 33 > 16: sampled
    gqa = [c for c in math_cases if c["kv_heads"] != c["heads"]]
    assert gqa and all("enable_gqa=True" in c["reason"] for c in gqa)
    masked = [c for c in math_cases if c["causal"] and c["seq_q"] != c["seq_kv"]]
    assert all("end-aligned boolean mask" in c["reason"] for c in masked)
    assert all(c["status"] == "skipped" and "needs CUDA" in c["reason"]
               for c in run.cases if c["variant"] != "torch_math")
    assert run.manifest["peer"]["tf32_settings_found"]["torch.backends.cuda.matmul.allow_tf32"] is True
    assert run.manifest["peer"]["tf32_settings_used"]["torch.backends.cuda.matmul.allow_tf32"] is False
    assert run.manifest["build"]["torch"] == "0.0-stand-in"


def test_stand_in_falls_back_to_repeat_interleave_and_reports_refusals(fake_torch_module):
    config, _ = peer.load_config(str(REPO / "configs" / "gpu-edge.toml"), [])
    timer = peer.Peer(fake_torch_module, "cpu", config)
    shape = Shape(1, 4, 2, 3, 5, 8, 8, True)
    q, k, v = timer.inputs(shape, 0)
    fake_torch_module.fake_state.refuse_gqa = True
    call, note = timer.sdpa_call("math", shape, q, k, v)
    assert call is not None and "repeat_interleave" in note
    assert timer.check(shape, q, k, v, call())["rel_l2_err"] < 1e-6
    call, reason = timer.sdpa_call("efficient", shape, q, k, v)
    assert call is None and "stand-in: EFFICIENT takes fp16 and bf16 only" in reason


def test_stand_in_wrong_output_fails_the_oracle(fake_torch_module, tmp_path):
    fake_torch_module.fake_state.corrupt = True
    out = tmp_path / "bad"
    assert peer.main(["configs/quick.toml", "--device", "cpu", "--out", str(out), "--backends", "math",
                      "--set", "axes.seq_len=[4]", "--set", "axes.causal=[false]", "--repeats", "2"]) == 1
    [case] = ar.load_run(out).cases
    assert case["status"] == "failed" and case["reason"].startswith("oracle: rel L2")


def test_stand_in_gpu_path_times_with_events_and_counts_workspace(fake_torch_module, tmp_path, monkeypatch):
    monkeypatch.setitem(peer.SGEMM_SIZE, "cuda", 256)  # numpy underneath: keep the peak quick
    fake_torch_module.cuda = fake_cuda()
    fake_torch_module.version.cuda = "13.0"
    out = tmp_path / "gpu"
    assert peer.main(["configs/gpu-scaling.toml", "--out", str(out), "--set", "axes.seq_len=[8, 16]",
                      "--set", "axes.d_k=[8]", "--set", "axes.heads=[2]", "--repeats", "3",
                      "--set", "measure.min_time_s=0.001"]) == 0
    run = ar.load_run(out)
    assert run.gpu_name == "Stand-in GPU" and run.manifest["gpu"]["sgemm_gflops"] > 0
    assert run.manifest["peer"]["timing"].startswith("CUDA events")
    math_cases = [c for c in run.cases if c["variant"] == "torch_math"]
    assert len(math_cases) == 4 and all(c["status"] == "ok" for c in math_cases)
    # 10^6 bytes above the baseline at the peak, less the output's bytes.
    assert [c["workspace_bytes"] for c in math_cases] == [10**6 - 4 * 2 * n * 8 for n in (8, 16, 8, 16)]
    assert all(c["threads"] == 0 and c["device"] == "cuda" for c in run.cases)
    flash = [c for c in run.cases if c["variant"] == "torch_flash"]
    assert all(c["status"] == "skipped" and "FLASH takes fp16 and bf16 only" in c["reason"] for c in flash)


def test_stand_in_with_the_new_tf32_switches(monkeypatch):
    torch, modules = make_fake_torch(new_tf32_api=True)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    config, _ = peer.load_config(str(REPO / "configs" / "quick.toml"), [])
    settings = peer.Peer(torch, "cpu", config).strict_fp32()
    assert settings["found"]["torch.backends.cuda.matmul.fp32_precision"] == "tf32"
    assert settings["used"]["torch.backends.cuda.matmul.fp32_precision"] == "ieee"


# ---------------------------------------------------------------------------
# With PyTorch (the GPU machine has it; this one may not)


TINY = ["--set", "axes.seq_len=[16, 33]", "--set", "axes.heads=[2]", "--set", "axes.d_k=[8]",
        "--set", "measure.min_time_s=0.001", "--set", "measure.warmup=1", "--repeats", "3"]


def test_cpu_run_times_math_and_skips_the_rest(tmp_path):
    pytest.importorskip("torch")
    result = run_peer("configs/quick.toml", "--device", "cpu", "--out", tmp_path / "cpu", *TINY)
    assert result.returncode == 0, result.stderr
    run = ar.load_run(tmp_path / "cpu")
    math_cases = [c for c in run.cases if c["variant"] == "torch_math"]
    assert len(math_cases) == 4 and all(c["status"] == "ok" for c in math_cases)
    assert all(c["oracle_rel_l2_err"] < 1e-5 for c in math_cases)
    others = [c for c in run.cases if c["variant"] != "torch_math"]
    assert others and all(c["status"] == "skipped" and "needs CUDA" in c["reason"] for c in others)


def test_gpu_run_records_every_backend(tmp_path):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    result = run_peer("configs/gpu-edge.toml", "--out", tmp_path / "gpu",
                      "--set", "axes.seq_q=[1, 37]", "--set", "axes.seq_kv=[130]",
                      "--set", "axes.d_k=[40]", "--set", "axes.d_v=[72]", "--repeats", "3",
                      "--set", "measure.min_time_s=0.001")
    assert result.returncode == 0, result.stdout + result.stderr
    run = ar.load_run(tmp_path / "gpu")
    by_variant = ar.group_by(run.cases, lambda c: c["variant"])
    assert set(by_variant) == {"torch_math", "torch_efficient", "torch_cudnn", "torch_flash"}
    assert all(c["status"] == "ok" for c in by_variant["torch_math"])
    assert all(c["status"] == "skipped" and c["reason"] for c in by_variant["torch_flash"])
    assert run.manifest["gpu"]["sgemm_gflops"] > 0
