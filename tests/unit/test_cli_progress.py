"""A long command says what it is doing at once, then how long it has taken, on stderr."""

from __future__ import annotations

import asyncio

import pytest

from worker_automation.cli.progress import ticking


async def test_ticking_says_it_started_then_how_long_until_the_block_ends(
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with ticking("counting", every=0.05):
        await asyncio.sleep(0.18)
    await asyncio.sleep(0.1)  # nothing more once the block is over
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == ""
    assert lines[0] == "counting..."
    assert 2 <= len(lines) - 1 <= 4
    assert all(line.startswith("  still counting (") and line.endswith(" s)") for line in lines[1:])
