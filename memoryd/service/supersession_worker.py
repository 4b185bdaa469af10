"""The 'supersede' worker: an LLM decides, after ``memory.add`` answered, what a memory replaces.

The add queued a durable job in its own transaction (``store/supersession.py``), so a restart
loses nothing and the model's latency never reaches the caller.  For each job the worker reads
the candidates (same scope and subjects; the same attribute key, or cosine >= ``similarity``
once the memory's vector exists), asks ``knowledge.decide_with_llm`` about each (structural
rules first; any model failure falls back to the offline rules), and applies the rulings in one
transaction that re-checks that the memory is still live.
"""

from __future__ import annotations

import logging

import trio

from memoryd.knowledge import decide_with_llm
from memoryd.knowledge.conflict import CompleteJson, LlmConflictAnswer
from memoryd.log import fields
from memoryd.service.supersession import Supersession, ruling_of, statement_of
from memoryd.service.wakeup import Wakeup
from memoryd.store.supersession_records import Ruling, SupersedeJob, learned_scope

log = logging.getLogger("memoryd.supersession")

#: Jobs claimed at once.
BATCH = 16
#: A job waits for its memory's vector (the candidates by meaning) this many tries, then goes
#: on with the attribute candidates alone (an embedder that stays down must not stall it).
VECTOR_WAITS = 5


class SupersessionWorker:
    def __init__(self, supersession: Supersession, complete_json: CompleteJson[LlmConflictAnswer] | None) -> None:
        """``complete_json`` is the LLM (``LlmClient.complete_json``); None: the offline rules
        decide the jobs (left over from a run that had an LLM)."""
        self.supersession = supersession
        self.complete_json = complete_json
        self.decided_total = 0
        self._wakeup = Wakeup()

    def notify(self) -> None:
        self._wakeup.notify()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        store = self.supersession.supersessions
        while True:
            self._wakeup.arm()
            jobs = await store.claim_jobs(BATCH)
            if not jobs:
                await self._wakeup.sleep(await store.next_due_ms())
                continue
            for job in jobs:
                await self._decide(job)

    async def _decide(self, job: SupersedeJob) -> None:
        store, settings = self.supersession.supersessions, self.supersession.settings
        found = await store.job_candidates(
            job,
            similarity=settings.similarity,
            limit=settings.max_candidates,
            wait_for_vector=job.attempts < VECTOR_WAITS,
        )
        if found is None:
            await store.fail_job(job, "waiting for the memory's embedding")
            return
        new, candidates = found
        rulings: list[tuple[int, Ruling]] = []
        resolve = await self.supersession.resolver(learned_scope(new))
        rules = self.supersession.judge(resolve)
        for old_rowid, old in candidates:
            if self.complete_json is None:
                ruling = rules(old, new)
            else:
                decision = await decide_with_llm(statement_of(old), statement_of(new), self.complete_json, resolve)
                ruling = ruling_of(decision)
            rulings.append((old_rowid, ruling))
        replaced = await store.complete_job(job, rulings)
        self.decided_total += 1
        if replaced:
            log.info("memory.superseded", extra=fields(id=new.id, replaced=len(replaced)))
