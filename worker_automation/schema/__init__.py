"""The GraphQL schema: Strawberry types, Query, Mutation and Subscription over the shared resolvers."""

from __future__ import annotations

from graphql import GraphQLError
from strawberry import Schema
from strawberry.schema.config import StrawberryConfig
from strawberry.types import ExecutionContext
from strawberry.utils.logging import StrawberryLogger

from worker_automation.overrides.plain_fields import Budget, PlainFieldsExecutionContext
from worker_automation.schema.context import GraphQLContext, OperationScopeExtension
from worker_automation.schema.errors import is_expected, translate_in_place
from worker_automation.schema.limits import MAX_DOCUMENT_BYTES, guard_extension, without_suggestions
from worker_automation.schema.mutation import Mutation
from worker_automation.schema.query import Query
from worker_automation.schema.response_budget import current_budget
from worker_automation.schema.scalars import SCALAR_MAP
from worker_automation.schema.subscription import Subscription
from worker_automation.settings import Settings

__all__ = ["MAX_DOCUMENT_BYTES", "GraphQLContext", "WorkerAutomationSchema", "build_schema"]


class WorkerAutomationSchema(Schema):
    """Strawberry's schema: unexpected errors logged, then every error given its code (and
    unexpected ones masked) before the result leaves; with introspection off, no error suggests
    names (graphql-core adds "Did you mean ..." in validation and in variable coercion alike, and
    Strawberry passes no option to turn it off)."""

    hide_suggestions = False

    def process_errors(
        self, errors: list[GraphQLError], execution_context: ExecutionContext | None = None
    ) -> None:
        for error in errors:
            if not is_expected(error):
                StrawberryLogger.error(error, execution_context)
        translate_in_place(errors)
        if self.hide_suggestions:
            without_suggestions(errors)


class BudgetedExecutionContext(PlainFieldsExecutionContext):
    """The executor with its shortcut for plain fields, charging the answer's size budget."""

    @staticmethod
    def current_budget() -> Budget | None:
        return current_budget()


def build_schema(
    settings: Settings, *, max_document_bytes: int = MAX_DOCUMENT_BYTES
) -> WorkerAutomationSchema:
    """The schema with the guards ``settings`` ask for (the SDL itself never depends on them)."""
    schema = WorkerAutomationSchema(
        query=Query,
        mutation=Mutation,
        subscription=Subscription,
        extensions=[
            OperationScopeExtension,
            guard_extension(settings, max_document_bytes),
        ],
        config=StrawberryConfig(scalar_map=SCALAR_MAP),
        execution_context_class=BudgetedExecutionContext,
    )
    schema.hide_suggestions = not settings.introspection
    return schema
