"""Tests for scripts/sass_mix.py's reading of SASS, on small excerpts in cuobjdump's format, so the
loop finding and the counts are checked on machines without CUDA too."""

from __future__ import annotations

import importlib.util
import json
import sys

import pytest

from conftest import SCRIPTS_DIR

_SPEC = importlib.util.spec_from_file_location("sass_mix", SCRIPTS_DIR / "sass_mix.py")
sass_mix = importlib.util.module_from_spec(_SPEC)
sys.modules["sass_mix"] = sass_mix  # its dataclasses look their module up there
_SPEC.loader.exec_module(sass_mix)

NAME = "_ZN9attnbench15flash_tc_kernelINS_7kernels7Bf16MmaELi128ELb0EEEvNS_15AttentionParamsE"


def function(name: str, code: list[str]) -> str:
    """cuobjdump -sass text of one function: one instruction per 16 bytes, each with the encoding
    lines cuobjdump prints beside it."""
    lines = [f"\t\tFunction : {name}", '\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"']
    for index, text in enumerate(code):
        lines.append(f"        /*{16 * index:04x}*/                   {text} ;"
                     "                 /* 0x00000a00ff017b82 */")
        lines.append("                                                     /* 0x000fe40000000800 */")
    return "\n".join(lines) + "\n"


def kernel_code() -> tuple[list[str], dict[str, int]]:
    """A prologue, a loop with 4 HMMA whose tail sits out of line after the EXIT, an inner loop
    without HMMA after it, and an epilogue; returns the code and the counts the loop holds."""
    code = [
        "LDC R1, c[0x0][0x28]",           # 0 prologue
        "ISETP.GE.AND P0, PT, R2, R3, PT",
        "@P0 BRA 0xa0",                   # 2: skip the loop
        "HMMA.16816.F32.BF16 R8, R4, R6, RZ",  # 3: loop head
        "HMMA.16816.F32.BF16 R12, R4, R7, R8",
        "FMUL R8, R8, R9",
        "@P1 BRA 0xf0",                   # 6: to the out-of-line tail
        "HMMA.16816.F32.BF16 R16, R4, R6, R12",  # 7
        "HMMA.16816.F32.BF16 R20, R4, R7, R16",
        "@P3 BRA 0x30",                   # 9: the latch
        "IADD3 R2, R2, 0x1, RZ",          # 10 after the loop: an inner loop, no HMMA
        "ISETP.LT.AND P2, PT, R2, R3, PT",
        "@P2 BRA 0xa0",                   # 12 back to 10
        "STL [R1], R2",                   # 13 a spill
        "EXIT",                           # 14
        "FADD R9, R9, R9",                # 15 out of line, part of the loop
        "NOP",
        "BRA 0x70",                       # 17 back into the loop
        "BRA 0x120",                      # 18 padding loop after the end, as ptxas emits
    ]
    # In the loop: instructions 3-9 and 15-17; others without the NOP: FMUL, 3 BRA, FADD.
    return code, {"hmma": 4, "other": 5, "first": 0x30, "last": 0x110}


RESOURCES = f""" Function {NAME}:
  REG:254 STACK:0 SHARED:1024 LOCAL:0 CONSTANT[2]:48 CONSTANT[0]:728 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def test_the_loop_is_the_component_holding_the_hmma_with_its_out_of_line_block():
    code, expected = kernel_code()
    (row,) = sass_mix.mix(function(NAME, code), RESOURCES)
    assert (row.hmma, row.other) == (expected["hmma"], expected["other"])
    assert (row.first_address, row.last_address) == (expected["first"], expected["last"])
    assert row.other_per_hmma == pytest.approx(expected["other"] / expected["hmma"], abs=0.005)


def test_the_instantiation_and_resources_are_read():
    code, _ = kernel_code()
    (row,) = sass_mix.mix(function(NAME, code), RESOURCES)
    assert (row.kernel, row.dtype, row.d, row.scaled_first) == ("flash_tc_kernel", "bf16", 128, False)
    assert (row.registers, row.stack_bytes, row.local_bytes, row.shared_bytes) == (254, 0, 0, 1024)
    assert row.masked is None


def test_spills_are_counted_over_the_whole_kernel_and_fail_the_check():
    code, _ = kernel_code()
    rows = sass_mix.mix(function(NAME, code), RESOURCES)
    assert rows[0].spills == 1
    assert any("spills" in problem for problem in sass_mix.problems(rows))
    code[13] = "IMAD.MOV.U32 R2, RZ, RZ, RZ"
    assert sass_mix.problems(sass_mix.mix(function(NAME, code), RESOURCES)) == []


def test_an_unconditional_branch_does_not_fall_through():
    # Without the branch back (17), the out-of-line block ends the path: no loop goes through it.
    code, expected = kernel_code()
    code[17] = "EXIT"
    (row,) = sass_mix.mix(function(NAME, code), RESOURCES)
    assert row.hmma == expected["hmma"] and row.other == expected["other"] - 2  # FADD, BRA gone
    code[9] = "@PT BRA 0x30"  # @PT is always true: still a loop, and 10-14 are not in it
    (row,) = sass_mix.mix(function(NAME, code), RESOURCES)
    assert row.hmma == expected["hmma"]


def test_a_kernel_without_a_loop_holding_hmma_fails_the_check_and_others_are_ignored():
    straight = ["HMMA.16816.F32.BF16 R8, R4, R6, RZ", "EXIT"]
    other = function("_Z12other_kernelv", ["@P0 BRA 0x0", "EXIT"])
    rows = sass_mix.mix(function(NAME, straight) + other)
    assert len(rows) == 1 and rows[0].loop == -1
    assert any("no loop" in problem for problem in sass_mix.problems(rows))
    assert sass_mix.problems([]) and "no flash_tc_kernel" in sass_mix.problems([])[0]


def test_two_loops_with_hmma_are_two_rows_in_address_order():
    code = ["HMMA.16816.F32.BF16 R8, R4, R6, RZ", "@P0 BRA 0x0",
            "HMMA.16816.F32.BF16 R8, R4, R6, RZ", "HMMA.16816.F32.BF16 R8, R4, R6, RZ",
            "@P1 BRA 0x20", "EXIT"]
    rows = sass_mix.mix(function(NAME, code))
    assert [(r.loop, r.hmma, r.other) for r in rows] == [(0, 1, 1), (1, 2, 1)]


def test_of_two_loops_the_larger_is_the_masked_one_wherever_it_lies():
    hmma = "HMMA.16816.F32.BF16 R8, R4, R6, RZ"
    small_first = [hmma, "@P0 BRA 0x0", hmma, "FSEL R8, R8, -INF, P2", "FMNMX R8, R8, R9, !PT",
                   "@P1 BRA 0x20", "EXIT"]
    rows = sass_mix.mix(function(NAME, small_first))
    assert [(r.loop, r.other, r.masked) for r in rows] == [(0, 1, False), (1, 3, True)]
    large_first = [hmma, "FSEL R8, R8, -INF, P2", "FMNMX R8, R8, R9, !PT", "@P0 BRA 0x0", hmma,
                   "@P1 BRA 0x40", "EXIT"]
    rows = sass_mix.mix(function(NAME, large_first))
    assert [(r.loop, r.other, r.masked) for r in rows] == [(0, 3, True), (1, 1, False)]


def test_the_table_and_json_carry_every_row(capsys, monkeypatch, tmp_path):
    code, expected = kernel_code()
    sass = function(NAME, code)
    binary = tmp_path / "attnbench"
    binary.write_bytes(b"")
    monkeypatch.setattr(sass_mix, "find_cuobjdump", lambda: "cuobjdump")
    monkeypatch.setattr(sass_mix, "dump", lambda _tool, _binary, what:
                        sass if what == "-sass" else RESOURCES)
    assert sass_mix.main([str(binary), "--json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert {"kernel", "dtype", "d", "masked", "hmma", "other", "other_per_hmma", "registers",
            "spills"} <= set(record)
    assert record["hmma"] == expected["hmma"]
    assert sass_mix.main([str(binary), "--check"]) == 1  # the STL
    captured = capsys.readouterr()
    header, line = captured.out.splitlines()
    assert "other/hmma" in header and str(expected["other"]) in line.split()
    assert "spills" in captured.err


def test_a_missing_binary_is_one_line_and_exit_2(capsys, tmp_path):
    assert sass_mix.main([str(tmp_path / "nothing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sass_mix.py: error: no such file") and err.count("\n") == 1
