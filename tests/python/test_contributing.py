"""CONTRIBUTING.md cannot drift from the code it describes: its example variant is the file the
test binary compiles and checks, and its table of rooms is the one the include check enforces."""

import re

from conftest import REPO

GUIDE = (REPO / "CONTRIBUTING.md").read_text()


def test_the_guides_example_is_the_variant_the_tests_check():
    blocks = re.findall(r"```cpp\n(.*?)```", GUIDE, flags=re.S)
    example = [block for block in blocks if block.startswith("// example:")]
    assert len(example) == 1, "CONTRIBUTING.md should hold one ```cpp block opening '// example:'"
    assert example[0] == (REPO / "tests" / "example_variant.cpp").read_text(), (
        "CONTRIBUTING.md's example differs from tests/example_variant.cpp: copy the file in")


def rooms_in_guide():
    rooms = {}
    for room, includes in re.findall(r"^\| `((?:harness|variants)/\w+)` \|.*\| ([^|]+) \|$", GUIDE,
                                     flags=re.M):
        rooms[room] = set() if includes.strip() == "—" else {
            f"harness/{name.strip()}" for name in includes.split(",")}
    return rooms


def rooms_in_check():
    script = (REPO / "tests" / "build_checks" / "include_rooms.sh").read_text()
    return {room: set(includes.split())
            for room, includes in re.findall(r'\[((?:harness|variants)/\w+)\]="([^"]*)"', script)}


def test_the_guides_rooms_are_the_ones_the_include_check_enforces():
    guide, check = rooms_in_guide(), rooms_in_check()
    assert len(guide) >= 10
    assert guide == check


def test_every_folder_is_a_room_of_the_guide():
    folders = {f"{p.parent.name}/{p.name}" for top in ("harness", "variants")
               for p in (REPO / top).iterdir() if p.is_dir()}
    assert folders == set(rooms_in_guide())
