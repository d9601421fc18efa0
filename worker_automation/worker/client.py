"""The worker side of the protocol: an HTTP client that speaks only to the API, with its key."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from worker_automation.domain.limits import result_refusal
from worker_automation.domain.vocabulary import JobStatus
from worker_automation.worker.http import REQUEST_TIMEOUT_SECONDS, ApiUnreachable, HttpClient, HttpReply

log = logging.getLogger(__name__)

# Connection failures are retried (the API may be restarting); answers are never retried.
_RETRY_DELAYS = (0.2, 0.5, 1.0, 2.0, 4.0)


class ApiError(Exception):
    """The API answered with an error the worker cannot act on."""

    def __init__(self, status_code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{status_code}: {message}")
        self.status_code = status_code
        self.message = message
        self.data = data


@dataclass(frozen=True)
class Claim:
    """The outcome of a claim: the job (when claimed) or the refusal reason."""

    job: dict[str, Any] | None
    reason: str | None = None
    message: str | None = None

    @property
    def claimed(self) -> bool:
        return self.job is not None


class LostAnswer(StrEnum):
    """What the API did with a report of a lost run."""

    ENDED = "ended"  # the run was this machine's: ended or queued again
    NOTHING = "nothing"  # not this machine's run (or no such job): nothing to do
    # The job is still AGENDADO: nothing to do yet, but a claim of the dead process may still be
    # on its way through the API and land after this answer.
    UNCLAIMED = "unclaimed"


def still_unclaimed(response: HttpReply) -> bool:
    """Whether a 409 answer says the job is still AGENDADO (not claimed by anyone yet)."""
    if response.status_code != 409:
        return False
    try:
        data = response.json().get("data")
    except (ValueError, AttributeError):
        return False
    return isinstance(data, dict) and data.get("status") == JobStatus.AGENDADO.value


class WorkerApiClient:
    """``/api/v1/jobs`` calls authenticated with ``X-Worker-Api-Key``."""

    def __init__(
        self,
        api_url: str,
        api_key: str,
        *,
        timeout: float = REQUEST_TIMEOUT_SECONDS,
        max_result_bytes: int = 1024 * 1024,
    ) -> None:
        self._http = HttpClient(api_url, {"X-Worker-Api-Key": api_key}, timeout=timeout)
        self._max_result_bytes = max_result_bytes

    async def close(self) -> None:
        await self._http.close()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        on_sent: Callable[[], None] | None = None,
        retry: bool = True,
    ) -> HttpReply:
        for attempt, delay in enumerate((*(_RETRY_DELAYS if retry else ()), None)):
            try:
                return await self._http.request(method, path, params=params, json_body=json, on_sent=on_sent)
            except ApiUnreachable as exc:
                if delay is None:
                    raise
                log.warning("API unreachable (%s), retry %d in %.1fs", type(exc).__name__, attempt + 1, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")

    @staticmethod
    def _data(response: HttpReply) -> Any:
        try:
            body = response.json()
        except ValueError:
            raise ApiError(response.status_code, response.text[:200]) from None
        if response.status_code >= 400:
            raise ApiError(response.status_code, str(body.get("message")), body.get("data"))
        return body.get("data")

    async def pending(self, automation: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"limit": limit}
        if automation:
            params["automation"] = automation
        data = self._data(await self._call("GET", "/api/v1/jobs/pending", params=params))
        return list(data or [])

    async def claim(
        self, job_id: int, task_id: str | None = None, on_sent: Callable[[], None] | None = None
    ) -> Claim:
        """Claim ``job_id`` (its run ``task_id``). Tried once: callers wait for an unreachable API
        themselves (``patience.patiently``), so that a shutdown can end the wait. ``on_sent``:
        see HttpClient."""
        body = {"task_id": task_id} if task_id else {}
        response = await self._call(
            "POST", f"/api/v1/jobs/{job_id}/start", json=body, on_sent=on_sent, retry=False
        )
        if response.status_code == 409:
            payload = response.json()
            data = payload.get("data") or {}
            return Claim(None, data.get("reason", "not_claimable"), payload.get("message"))
        if response.status_code == 404:
            return Claim(None, "not_found", "job not found")
        return Claim(self._data(response))

    async def progress(self, job_id: int, percent: int, message: str | None = None) -> bool:
        """Report progress; False when the job is no longer ours (cancelled, moved)."""
        body: dict[str, Any] = {"progress": percent}
        if message:
            body["message"] = message
        # Tried once: a progress report lost to an outage is overtaken by the next one, and
        # retrying would hold back the job's completion (sent after the last progress).
        response = await self._call("POST", f"/api/v1/jobs/{job_id}/progress", json=body, retry=False)
        if response.status_code == 409:
            return False
        self._data(response)
        return True

    async def complete(
        self,
        job_id: int,
        result: Any,
        on_sent: Callable[[], None] | None = None,
        task_id: str | None = None,
    ) -> bool:
        """Report the job done; False when it is no longer ours (or, with ``task_id``, no longer
        in that run). ``on_sent``: see HttpClient. A result the API would refuse (over
        ``WA_MAX_RESULT_BYTES``, or text no database stores) is reported as the job's failure
        instead: a body that large might not even be read, and the job must not stay running."""
        refusal = result_refusal(result, self._max_result_bytes)
        if refusal is not None:
            failure: dict[str, Any] = {
                "error": refusal.message,
                "exc_type": "ResultRejected",
                "traceback": None,
            }
            if task_id is not None:  # as the completion would: only this run may be ended by it
                failure["task_id"] = task_id
            response = await self._call("POST", f"/api/v1/jobs/{job_id}/fail", json=failure, on_sent=on_sent)
            if response.status_code == 409:
                return False
            self._data(response)
            return True
        body: dict[str, Any] = {"result": result}
        if task_id is not None:
            body["task_id"] = task_id
        response = await self._call("POST", f"/api/v1/jobs/{job_id}/complete", json=body, on_sent=on_sent)
        if response.status_code == 409:
            return False
        self._data(response)
        return True

    async def fail(
        self,
        job_id: int,
        error: str,
        exc_type: str | None = None,
        traceback: str | None = None,
        task_id: str | None = None,
    ) -> bool:
        """Report the job failed; False when it is no longer ours. ``task_id`` names the run."""
        body: dict[str, Any] = {
            "error": error or "erro sem mensagem",
            "exc_type": exc_type,
            "traceback": traceback,
        }
        if task_id is not None:
            body["task_id"] = task_id
        response = await self._call("POST", f"/api/v1/jobs/{job_id}/fail", json=body)
        if response.status_code == 409:
            return False
        self._data(response)
        return True

    async def lost(self, job_id: int, fault: str, task_id: str | None = None) -> LostAnswer:
        """Say that this machine's run ``task_id`` of ``job_id`` ended without a report (its process
        died): the API ends or re-queues it. Nothing to do on 409 (this machine does not hold
        that run) or 404 (no such job); a 409 about a job still AGENDADO says so. Tried once, like
        :meth:`start`."""
        body: dict[str, Any] = {"fault": fault}
        if task_id is not None:
            body["task_id"] = task_id
        response = await self._call("POST", f"/api/v1/jobs/{job_id}/lost", json=body, retry=False)
        if response.status_code == 409:
            return LostAnswer.UNCLAIMED if still_unclaimed(response) else LostAnswer.NOTHING
        if response.status_code == 404:
            return LostAnswer.NOTHING
        self._data(response)
        return LostAnswer.ENDED
