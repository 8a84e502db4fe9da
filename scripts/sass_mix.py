#!/usr/bin/env python3
"""The instruction mix of flash_tc's key-tile loop, read from the SASS of a built binary: per
kernel instantiation, the HMMA (tensor-core mma) instructions in the loop body, the other
instructions beside them and their ratio, with the kernel's registers, spills, stack and static
shared memory. It is how the kernel's efficiency is judged without a GPU (its targets:
other instructions per HMMA in the unmasked bf16 loop).

The loop body is found from the control-flow graph, not from source lines: the SASS is split into
basic blocks at branch targets and after branches, and a loop is a strongly connected component
of that graph (every block in it reaches every other), so blocks ptxas moved out of line still
count and code before and after the loop does not. Each component holding an HMMA is reported.
Counts are static (instructions in the code, each once), NOPs left out; a predicated-off branch
counts as much as a taken one, which is the point: predicated mask code costs issue slots on
every tile. Subroutines reached by CALL are not followed.

Spills are the local-memory loads and stores (LDL, STL) anywhere in the kernel; --check exits 1
when any instantiation has one, or a stack frame, or no key-tile loop was found.

    python3 scripts/sass_mix.py build/attnbench            # the table
    python3 scripts/sass_mix.py build/attnbench --json     # the same rows as JSON
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

KERNEL_NAME = "flash_tc_kernel"
ARCH = "sm_90"

# `/*0540*/   @!P0 BRA 0xb50 ;` and the like: address, optional predicate, opcode, operands.
INSTRUCTION = re.compile(
    r"/\*(?P<address>[0-9a-f]+)\*/\s+(?P<predicate>@!?U?P[T0-9]\s+)?(?P<opcode>[A-Z][A-Z0-9_.]*)"
    r"(?P<operands>[^;]*);")
FUNCTION = re.compile(r"^\s*Function\s*:\s*(?P<name>\S+)", re.MULTILINE)
RESOURCES = re.compile(r"Function (?P<name>[^\s:]+):\s*\n\s*(?P<fields>REG:.*)")
BRANCHES = ("BRA",)        # direct jumps within the function; the last hex operand is the target
ENDS = ("EXIT", "RET", "KILL")  # no successor when unpredicated
LOCAL_MEMORY = ("LDL", "STL")
# Template arguments of flash_tc_kernel<Mma, D, kScaledFirst> in the mangled name.
TEMPLATE_ARGUMENTS = re.compile(r"(?P<mma>Bf16|Fp16)MmaELi(?P<d>\d+)ELb(?P<scaled_first>[01])E")


@dataclass
class Instruction:
    address: int
    opcode: str
    operands: str
    predicated: bool  # guarded by a predicate other than PT (always true)

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]


@dataclass
class LoopMix:
    """One row: one loop of one kernel instantiation."""

    kernel: str
    dtype: str | None
    d: int | None
    scaled_first: bool | None  # the second instantiation: scores scaled first
    masked: bool | None  # None: the kernel's one loop runs masked and unmasked tiles alike
    loop: int            # 0, 1, ... in address order, when a kernel has more than one
    first_address: int
    last_address: int
    hmma: int
    other: int
    other_per_hmma: float
    registers: int | None
    spills: int
    stack_bytes: int | None
    local_bytes: int | None
    shared_bytes: int | None  # static; the tiles are dynamic shared memory, sized at launch


def parse_functions(sass: str) -> dict[str, list[Instruction]]:
    """The instructions of each function in `cuobjdump -sass` output, by mangled name."""
    functions: dict[str, list[Instruction]] = {}
    headers = list(FUNCTION.finditer(sass))
    for index, header in enumerate(headers):
        end = headers[index + 1].start() if index + 1 < len(headers) else len(sass)
        body = sass[header.end():end]
        functions[header["name"]] = [
            Instruction(int(m["address"], 16), m["opcode"], m["operands"].strip(),
                        bool(m["predicate"]) and m["predicate"].strip() not in ("@PT",))
            for m in INSTRUCTION.finditer(body)]
    return functions


def branch_target(instruction: Instruction) -> int | None:
    if instruction.base not in BRANCHES:
        return None
    targets = re.findall(r"0x([0-9a-f]+)", instruction.operands)
    return int(targets[-1], 16) if targets else None


def basic_blocks(instructions: list[Instruction]) -> tuple[list[list[Instruction]], list[set[int]]]:
    """The function's basic blocks in address order and each one's successors (block indices)."""
    if not instructions:
        return [], []
    leaders = {instructions[0].address}
    for i, instruction in enumerate(instructions):
        target = branch_target(instruction)
        if target is not None:
            leaders.add(target)
        if (target is not None or instruction.base in ENDS) and i + 1 < len(instructions):
            leaders.add(instructions[i + 1].address)
    blocks: list[list[Instruction]] = []
    for instruction in instructions:
        if instruction.address in leaders or not blocks:
            blocks.append([])
        blocks[-1].append(instruction)
    block_at = {block[0].address: index for index, block in enumerate(blocks)}
    successors: list[set[int]] = []
    for index, block in enumerate(blocks):
        last = block[-1]
        following: set[int] = set()
        target = branch_target(last)
        if target is not None and target in block_at:
            following.add(block_at[target])
        falls_through = last.predicated or (target is None and last.base not in ENDS)
        if falls_through and index + 1 < len(blocks):
            following.add(index + 1)
        successors.append(following)
    return blocks, successors


def loops(successors: list[set[int]]) -> list[list[int]]:
    """The strongly connected components that are loops (more than one block, or a block that
    branches to itself), each as its block indices in order; Tarjan's algorithm, iteratively."""
    index_of: dict[int, int] = {}
    low: dict[int, int] = {}
    on_stack: set[int] = set()
    stack: list[int] = []
    components: list[list[int]] = []
    counter = 0
    for root in range(len(successors)):
        if root in index_of:
            continue
        work = [(root, iter(sorted(successors[root])))]
        index_of[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index_of:
                    index_of[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(successors[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index_of[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index_of[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in successors[node]:
                    components.append(sorted(component))
    return sorted(components)


def parse_resources(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump -res-usage`'s REG, STACK, SHARED, LOCAL ... fields, by mangled function name."""
    resources = {}
    for match in RESOURCES.finditer(text):
        fields = dict(re.findall(r"(\w+(?:\[\d+\])?):(\d+)", match["fields"]))
        resources[match["name"]] = {key: int(value) for key, value in fields.items()}
    return resources


def describe(name: str) -> tuple[str, str | None, int | None, bool | None]:
    """(kernel, dtype, d, scaled_first) from a mangled flash_tc_kernel name; None where not found."""
    arguments = TEMPLATE_ARGUMENTS.search(name)
    if not arguments:
        return KERNEL_NAME, None, None, None
    return (KERNEL_NAME, arguments["mma"].lower(), int(arguments["d"]),
            arguments["scaled_first"] == "1")


def mix(sass: str, resource_text: str = "") -> list[LoopMix]:
    """The rows for every flash_tc kernel in the SASS (and its resources, when given)."""
    resources = parse_resources(resource_text)
    rows = []
    for name, instructions in parse_functions(sass).items():
        if KERNEL_NAME not in name:
            continue
        kernel, dtype, d, scaled_first = describe(name)
        usage = resources.get(name, {})
        spills = sum(instruction.base in LOCAL_MEMORY for instruction in instructions)
        blocks, successors = basic_blocks(instructions)
        number = 0
        for component in loops(successors):
            body = [instruction for b in component for instruction in blocks[b]
                    if instruction.base != "NOP"]
            hmma = sum(instruction.base == "HMMA" for instruction in body)
            if hmma == 0:
                continue
            rows.append(LoopMix(
                kernel=kernel, dtype=dtype, d=d, scaled_first=scaled_first, masked=None, loop=number,
                first_address=min(i.address for i in body),
                last_address=max(i.address for i in body), hmma=hmma, other=len(body) - hmma,
                other_per_hmma=round((len(body) - hmma) / hmma, 2),
                registers=usage.get("REG"), spills=spills, stack_bytes=usage.get("STACK"),
                local_bytes=usage.get("LOCAL"), shared_bytes=usage.get("SHARED")))
            number += 1
        tell_masked_apart(rows[len(rows) - number:])
        if number == 0:  # a kernel whose loop was not found still shows, so --check can fail it
            rows.append(LoopMix(kernel, dtype, d, scaled_first, None, -1, 0, 0, 0, 0, 0.0,
                                usage.get("REG"), spills, usage.get("STACK"), usage.get("LOCAL"),
                                usage.get("SHARED")))
    return sorted(rows, key=lambda r: (r.dtype or "", r.d or 0, bool(r.scaled_first), r.loop))


def tell_masked_apart(kernel_rows: list[LoopMix]) -> None:
    """A kernel with two key-tile loops runs masked tiles through one and unmasked tiles through
    the other; the masked one is the larger, its body being the unmasked body
    plus the per-warp tile test and the per-element mask. One loop: `masked` stays None (both)."""
    if len(kernel_rows) != 2:
        return
    larger = max(kernel_rows, key=lambda row: row.other)
    for row in kernel_rows:
        row.masked = row is larger


def problems(rows: list[LoopMix]) -> list[str]:
    """What --check fails on: spills, a stack frame, local memory, no kernel, no loop found."""
    if not rows:
        return [f"no {KERNEL_NAME} instantiation for {ARCH} in the binary"]
    found = []
    for row in rows:
        label = f"{row.kernel}<{row.dtype}, d {row.d}, scaled first {row.scaled_first}>"
        if row.loop < 0:
            found.append(f"{label}: no loop holding HMMA instructions")
        if row.spills:
            found.append(f"{label}: {row.spills} local-memory loads/stores (spills)")
        if row.stack_bytes or row.local_bytes:
            found.append(f"{label}: stack {row.stack_bytes} bytes, local {row.local_bytes} bytes")
    return sorted(set(found))


def table(rows: list[LoopMix]) -> str:
    columns = [("kernel", "kernel"), ("dtype", "dtype"), ("d", "d"), ("scaled_first", "scaled first"), ("masked", "masked"),
               ("loop", "loop"), ("hmma", "hmma"), ("other", "other"),
               ("other_per_hmma", "other/hmma"), ("registers", "registers"), ("spills", "spills"),
               ("stack_bytes", "stack"), ("shared_bytes", "static shared")]
    cells = [[str("both" if r.masked is None and key == "masked" else getattr(r, key))
              for key, _ in columns] for r in rows]
    widths = [max(len(title), *(len(c[i]) for c in cells)) if cells else len(title)
              for i, (_, title) in enumerate(columns)]
    lines = ["  ".join(title.rjust(w) for (_, title), w in zip(columns, widths))]
    lines += ["  ".join(cell.rjust(w) for cell, w in zip(c, widths)) for c in cells]
    return "\n".join(lines)


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, the CUDA toolkit, or PyPI's nvidia-cuda-cuobjdump package."""
    found = shutil.which("cuobjdump")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and Path(root, "bin", "cuobjdump").is_file():
            return str(Path(root, "bin", "cuobjdump"))
    try:
        import nvidia  # namespace package of NVIDIA's PyPI wheels
    except ImportError:
        return None
    for base in getattr(nvidia, "__path__", []):
        for candidate in sorted(Path(base).glob("cu*/bin/cuobjdump")):
            return str(candidate)
    return None


def dump(cuobjdump: str, binary: Path, what: str) -> str:
    # cuobjdump -sass runs nvdisasm, found on PATH or NVDISASM_PATH: a toolkit without it (or
    # PyPI's cuobjdump alone) fails, so point at the one beside cuobjdump (nvidia-cuda-nvdisasm
    # installs it there) when there is one.
    env = dict(os.environ)
    beside = Path(cuobjdump).parent / "nvdisasm"
    if beside.is_file() and "NVDISASM_PATH" not in env and not shutil.which("nvdisasm"):
        env["NVDISASM_PATH"] = str(beside.parent)
    result = subprocess.run([cuobjdump, what, "-arch", ARCH, str(binary)], capture_output=True,
                            text=True, env=env)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()
        raise RuntimeError(f"cuobjdump {what} {binary} failed: {detail[-1] if detail else '?'}")
    return result.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="sass_mix.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("binary", type=Path, nargs="?", default=Path("build/attnbench"),
                        help="the attnbench binary or flash_tc.cu.o (default: build/attnbench)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--check", action="store_true",
                        help="exit 1 on spills, a stack frame, or no loop found")
    args = parser.parse_args(argv)
    if not args.binary.is_file():
        print(f"sass_mix.py: error: no such file: {args.binary}", file=sys.stderr)
        return 2
    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        print("sass_mix.py: error: cuobjdump not found (CUDA toolkit, or pip install "
              "nvidia-cuda-cuobjdump)", file=sys.stderr)
        return 2
    try:
        rows = mix(dump(cuobjdump, args.binary, "-sass"),
                   dump(cuobjdump, args.binary, "-res-usage"))
    except RuntimeError as error:
        print(f"sass_mix.py: error: {error}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([asdict(row) for row in rows], indent=2))
    else:
        print(table(rows))
    if args.check:
        for problem in problems(rows):
            print(f"sass_mix.py: {problem}", file=sys.stderr)
        return 1 if problems(rows) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
