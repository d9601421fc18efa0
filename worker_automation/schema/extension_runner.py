"""Strawberry's extension runner, minus the per-result work for hooks no extension defines.

A subscription payload reaches each subscriber through ``get_extensions_results`` and an
``on_stream_result`` context; Strawberry walks every extension for both on every payload. With
thousands of subscribers an event pays that walk thousands of times, for hooks none of this
schema's extensions overrides. This runner asks once per extension class, and skips the walk when
nothing would answer.
"""

from __future__ import annotations

from typing import Any

from strawberry.extensions import SchemaExtension
from strawberry.extensions.context import StreamResultContextManager
from strawberry.extensions.runner import SchemaExtensionsRunner
from strawberry.types import ExecutionContext
from strawberry.types.execution import StreamExecutionResult


def _overrides(extension: SchemaExtension, hook: str) -> bool:
    return getattr(type(extension), hook) is not getattr(SchemaExtension, hook)


class _NoHooks(StreamResultContextManager):
    """An ``on_stream_result`` context with nothing to run (no exit stack to build and unwind)."""

    def __init__(self, result: StreamExecutionResult) -> None:
        self.result = result
        self.hooks = []

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_exc_info: object) -> None:
        return None


class LeanExtensionsRunner(SchemaExtensionsRunner):
    """Same results as Strawberry's runner; hooks that no extension overrides are not walked."""

    def __init__(
        self, execution_context: ExecutionContext, extensions: list[SchemaExtension] | None = None
    ) -> None:
        super().__init__(execution_context, extensions)
        self._stream_hooks = any(_overrides(e, "on_stream_result") for e in self.extensions)
        self._result_hooks = any(_overrides(e, "get_results") for e in self.extensions)

    def on_stream_result(self, result: StreamExecutionResult) -> StreamResultContextManager:
        if self._stream_hooks:
            return super().on_stream_result(result)
        return _NoHooks(result)

    async def get_extensions_results(self, ctx: ExecutionContext) -> dict[str, Any]:
        if self._result_hooks:
            return await super().get_extensions_results(ctx)
        return dict(ctx.extensions_results)
