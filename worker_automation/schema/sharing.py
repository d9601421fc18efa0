"""One execution per event for all the subscribers that asked the same thing.

A subscription payload is executed against the subscriber's selection set once per subscriber,
and that execution dominates the cost of pushing an event (about 120 us per subscriber). Most
subscribers of a screen send the very same document, so a payload built once per event and marked
with :func:`shareable` keeps the result of each distinct operation (document text, operation name,
variable values) and every other subscriber with that operation receives it as is.

Only payloads whose fields do not depend on who asks may be marked: the result computed for the
first subscriber is handed to the others. Permissions are checked when a subscription starts, on
the root field, never inside payload types.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final, TypeVar

from graphql.language import OperationType

from worker_automation.schema.plain_fields import PlainFieldsExecutionContext

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

_RESULTS: Final = "_shared_results"
# Results kept per payload. Subscribers with the same operation share one; past this many distinct
# operations a payload keeps no more (each of those runs its own execution, as it would anyway):
# thousands of distinct subscriptions would otherwise keep thousands of results per recent event.
MAX_SHARED_OPERATIONS: Final = 32


def shareable(payload: T) -> T:
    """Mark ``payload`` as built once and handed to many subscribers (see module doc)."""
    setattr(payload, _RESULTS, {})
    return payload


class SharedPayloads:
    """The payloads built for the most recent events, so every subscriber gets the same object."""

    def __init__(self, keep: int = 64) -> None:
        self._keep = keep
        self._payloads: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: K, build: Callable[[], T]) -> T:
        """The payload for ``key``, built (and marked shareable) by the first subscriber asking."""
        payload = self._payloads.get(key)
        if payload is None:
            payload = self._payloads[key] = shareable(build())
            if len(self._payloads) > self._keep:
                self._payloads.popitem(last=False)
        result: T = payload
        return result


class SharedExecutionContext(PlainFieldsExecutionContext):
    """graphql-core's executor, reusing results kept on shareable subscription payloads (and
    resolving plain scalar fields directly: :mod:`worker_automation.schema.plain_fields`)."""

    _share_key: Hashable | None = None

    def build_per_event_executor(self, payload: Any) -> Any:
        if self._share_key is None and self.operation.operation is OperationType.SUBSCRIPTION:
            self._share_key = self._operation_key()
        results: dict[Hashable, Any] | None = getattr(payload, _RESULTS, None)
        if results is not None and self._share_key in results:
            # Already executed for this operation: no per-event executor to build at all.
            return _Executed(results[self._share_key])
        executor = super().build_per_event_executor(payload)
        # graphql-core copies the subscription's executor for each event, memo of collected
        # subfields included, and that memo is keyed by field lists made afresh for each event:
        # shared, it gained entries on every event for as long as the subscription lived (about
        # 4 kB per event for a job event). Each event's executor gets a memo of its own.
        executor._relevant_sub_fields = {}
        return executor

    def _operation_key(self) -> Hashable:
        operation = self.operation
        document = operation.loc.source.body if operation.loc is not None else id(operation)
        name = operation.name.value if operation.name is not None else None
        variables = json.dumps(self.variable_values.coerced, sort_keys=True, default=repr)
        return (id(self.schema), document, name, variables)

    def execute_operation(self, serially: bool | None = None) -> Any:
        results: dict[Hashable, Any] | None = getattr(self.root_value, _RESULTS, None)
        if results is None or self._share_key is None:
            return super().execute_operation(serially)
        found = results.get(self._share_key)
        if found is None:
            found = super().execute_operation(serially)
            if len(results) >= MAX_SHARED_OPERATIONS:
                return found
            if self.is_awaitable(found):
                # A task of its own: one subscriber leaving must not cancel it for the others.
                found = asyncio.ensure_future(found)
            results[self._share_key] = found
        return _Executed(found).execute_operation(serially)


class _Executed:
    """Stands in for a per-event executor when the result is already known."""

    __slots__ = ("result",)

    def __init__(self, result: Any) -> None:
        self.result = result

    def execute_operation(self, serially: bool | None = None) -> Any:
        if isinstance(self.result, asyncio.Future):
            return asyncio.shield(self.result)
        return self.result
