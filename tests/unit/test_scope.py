from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from consolidator.memory.blocks import Block, Memory, Task, ThreadCitation
from consolidator.memory.scope import (
    applicable_blocks,
    blocks_for_cwd,
    nearest_scope,
    normalise_cwd,
)


def _block(block_id: str, cwd: str | None) -> Block:
    citation = ThreadCitation("th", "rollout_summaries/th.md", cwd, "/r/th.jsonl", "2025-05-01")
    return Block(block_id, block_id, "", cwd, "", (Task("t1", "x", (citation,)),))


MEMORY = Memory(
    (
        _block("home", "/home/dev"),
        _block("shop", "/home/dev/shop"),
        _block("shop-tools", "/home/dev/shop/tools/"),
        _block("shop-old", "/home/dev/shop-old"),
        _block("anywhere", None),
        _block("starred", "*"),
    )
)


def _ids(memory: Memory) -> list[str]:
    return [block.block_id for block in memory.blocks]


def test_a_project_sees_its_own_block_and_user_wide_ones_only() -> None:
    assert _ids(blocks_for_cwd(MEMORY, "/home/dev/shop")) == ["shop", "anywhere", "starred"]
    assert _ids(blocks_for_cwd(MEMORY, "/home/dev/shop/")) == ["shop", "anywhere", "starred"]


def test_a_nested_project_does_not_see_its_parent_and_the_parent_not_its_child() -> None:
    assert _ids(blocks_for_cwd(MEMORY, "/home/dev/shop/tools")) == [
        "shop-tools",
        "anywhere",
        "starred",
    ]
    assert _ids(blocks_for_cwd(MEMORY, "/home/dev")) == ["home", "anywhere", "starred"]


def test_a_folder_without_a_block_gets_the_nearest_block_above_it() -> None:
    assert [b.block_id for b in applicable_blocks(MEMORY, "/home/dev/shop/src/a")] == ["shop"]
    assert [b.block_id for b in applicable_blocks(MEMORY, "/home/dev/tickets")] == ["home"]
    assert [b.block_id for b in applicable_blocks(MEMORY, "/home/dev/shop/tools/x")] == [
        "shop-tools"
    ]


def test_a_sibling_with_a_common_prefix_is_not_a_parent() -> None:
    assert [b.block_id for b in applicable_blocks(MEMORY, "/home/dev/shop-old/x")] == ["shop-old"]
    assert [b.block_id for b in applicable_blocks(MEMORY, "/home/dev/shop-older")] == ["home"]


def test_outside_every_block_or_unknown_cwd_only_user_wide_blocks_apply() -> None:
    assert _ids(blocks_for_cwd(MEMORY, "/opt/x")) == ["anywhere", "starred"]
    assert _ids(blocks_for_cwd(MEMORY, None)) == ["anywhere", "starred"]
    assert _ids(blocks_for_cwd(MEMORY, "")) == ["anywhere", "starred"]


def test_several_blocks_of_one_folder_all_apply_and_a_root_block_is_a_parent() -> None:
    memory = Memory((_block("a", "/w"), _block("root", "/"), _block("b", "/w/./")))
    assert _ids(blocks_for_cwd(memory, "/w/x")) == ["a", "b"]
    assert _ids(blocks_for_cwd(memory, "/elsewhere")) == ["root"]


def test_paths_are_normalised_textually() -> None:
    assert normalise_cwd(" /a//b/../c/ ") == "/a/c"
    assert normalise_cwd("//a") == "/a"
    assert normalise_cwd("  ") == ""


@given(
    st.lists(st.sampled_from(["/", "/a", "/a/b", "/a/bc", "/a/b/c", "/d"]), unique=True),
    st.sampled_from(["/a/b/c/d", "/a/b", "/a/bcd", "/d/e", "/x"]),
)
def test_the_nearest_scope_contains_the_cwd_and_no_deeper_one_does(
    scopes: list[str], cwd: str
) -> None:
    nearest = nearest_scope(scopes, cwd)
    containing = [s for s in scopes if cwd == s or cwd.startswith(s.rstrip("/") + "/")]
    if not containing:
        assert nearest is None
    else:
        assert nearest == max(containing, key=len)
