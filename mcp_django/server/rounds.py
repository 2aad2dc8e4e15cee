"""Questions to the client in 2026-07-28: input-required results and their retries (MRTR).

In this revision the server sends no requests of its own. A tool that calls ``ctx.elicit``,
``ctx.sample`` or ``ctx.list_roots`` is run until it asks something the client has not answered
yet; the request is then answered with ``resultType: "input_required"``, the questions in
``inputRequests`` and the answers so far sealed in ``requestState``. The client retries the same
request with ``inputResponses``, and the tool runs again from the start: each question it asks
in the same order is answered from the answers, until it finishes or asks something new. A tool
is written once for both eras; only what it asks before its last question runs more than once.
"""

from __future__ import annotations

import asyncio
from typing import Any

#: Params a retry adds; they are not part of what the original request asked.
ROUND_PARAMS = ("inputResponses", "requestState")


class InputRequired(BaseException):
    """Raised in a tool at a question its client has not answered yet.

    A BaseException, like ``asyncio.CancelledError``: a tool's ``except Exception`` must not
    turn "ask the client first" into a failure.
    """


class InputRounds:
    """The answers a retried request brings, and the questions this round asks."""

    def __init__(
        self, answers: dict[str, Any] | None = None, notes: dict[str, Any] | None = None
    ) -> None:
        #: Every answer so far, by question key (from requestState and inputResponses).
        self.answers: dict[str, Any] = dict(answers or {})
        #: What the server keeps between rounds besides answers (a URL elicitation's page),
        #: sealed in requestState with them.
        self.notes: dict[str, Any] = dict(notes or {})
        #: Questions asked in this round and not answered yet, by key.
        self.asked: dict[str, dict[str, Any]] = {}
        self._count = 0

    async def ask(
        self, method: str, params: dict[str, Any], key: str | None = None
    ) -> dict[str, Any]:
        """The client's answer to ``method`` as a JSON-RPC response body (``result``), or raise
        :class:`InputRequired` once the questions asked beside this one are known too.

        ``key`` names the question in ``inputRequests``; by default it is the method's kind and
        the question's place in the tool (``elicitation-2``), the same on every retry.
        """
        key = self.key_for(method, key)
        answer = self.answers.get(key)
        if well_formed(method, answer):
            return {"result": answer}
        # Unanswered, or answered with something that is no answer to it: asked (again).
        self.answers.pop(key, None)
        self.asked[key] = {"method": method, "params": params}
        # Questions asked at once (asyncio.gather) all get into this round's inputRequests.
        await asyncio.sleep(0)
        raise InputRequired(key)

    def key_for(self, method: str, key: str | None = None) -> str:
        """The key of the next question: ``key``, or the method's kind and the question's place
        among those without one (the same on every retry, as the tool asks in the same order)."""
        if key is not None:
            return key
        self._count += 1
        return f"{method.rsplit('/', 1)[0]}-{self._count}"


def well_formed(method: str, answer: Any) -> bool:
    """Whether ``answer`` can be the client's result for ``method`` (the tool then checks the
    rest, as for an answer in a session): an object, and for elicitation a known action."""
    if not isinstance(answer, dict):
        return False
    if method == "elicitation/create":
        return answer.get("action") in ("accept", "decline", "cancel")
    return True


class StartTask(BaseException):
    """Raised by ``ctx.start_task()`` in the request of a task tool declared with ``prelude=True``:
    what came before it is done (its questions answered), and the rest runs as a task.

    A BaseException, for the same reason as :class:`InputRequired`.
    """
