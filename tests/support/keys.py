"""A database made ready for an app a test starts: migrated, with a read key to call it with."""

from __future__ import annotations

import asyncio

from worker_automation.models.database import Database
from worker_automation.models.migrate import migrate
from worker_automation.resolvers.auth import SCOPE_READ, create_key
from worker_automation.settings import Settings


def migrated_with_read_key(settings: Settings) -> str:
    """Migrate the database of ``settings`` and return the secret of a new read key on it."""

    async def prepare() -> str:
        await migrate(settings.database_url)
        db = Database(settings)
        try:
            return (await create_key(db, name="t", perfil="funcionario", scopes=SCOPE_READ)).secret
        finally:
            await db.close()

    return asyncio.run(prepare())
