"""One worker of the multi-worker fault test (run as a subprocess by test_multi_worker_faults.py).

Reads tasks from stdin, one JSON object a line (``{"conv": ..., "turn": ..., "turn_id": ...}``),
answers each through a ChatSession on the shared store, and prints ``{"ack": turn_id}`` once
``send`` returned (the turn is then durable). Side queries sleep 50–200 ms and fail 30 % of the
time; every side query that produces a summary is logged (one O_APPEND line) before it returns.
The worker SIGKILLs itself at named points with seeded probabilities: mid-append and mid-commit
(inside the store's transaction, before it commits), mid-side-query, mid-attempt-record.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time

from autocompact.chat import ChatSession
from autocompact.errors import ProviderTimeoutError
from autocompact.providers.base import ChatRequest
from autocompact.sessions.stores import open_store
from autocompact.testing import FakeProvider, FakeReply

WINDOW = 100_000
USER_CHARS = 14_000
REPLY_CHARS = 1_000


def main() -> None:
    """Serve tasks until stdin closes."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", required=True)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--lease-seconds", type=float, default=0.12)
    ap.add_argument("--kill", default="{}", help="JSON: step name -> probability")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    kill = json.loads(args.kill)
    counter = [0]

    def maybe_die(step: str) -> None:
        if rng.random() < kill.get(step, 0.0):
            log({"event": "kill", "step": step, "worker": args.worker})
            os.kill(os.getpid(), signal.SIGKILL)

    def log(record: dict[str, object]) -> None:
        line = (json.dumps(record) + "\n").encode()
        fd = os.open(args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    current = {"conv": ""}

    def respond(request: ChatRequest) -> FakeReply:
        if request.purpose != "side_query":
            last = request.messages[-1].text
            return FakeReply(text=f"reply to {last[:24]} " + "r" * REPLY_CHARS)
        time.sleep(rng.uniform(0.05, 0.2))
        maybe_die("side_query")
        if rng.random() < 0.3:
            log({"event": "side_query_failed", "worker": args.worker, "conv": current["conv"]})
            return FakeReply(error=ProviderTimeoutError("injected", provider="fake"))
        counter[0] += 1
        nonce = f"nonce-{args.worker}-{counter[0]}"
        log({"event": "side_query", "nonce": nonce, "worker": args.worker, "conv": current["conv"]})
        return FakeReply(
            text=f"<state_snapshot>\n<overall_goal>{nonce}</overall_goal>\n</state_snapshot>"
        )

    store = open_store(args.store, lease_seconds=args.lease_seconds, on_step=maybe_die)
    provider = FakeProvider(responder=respond)
    sessions: dict[str, ChatSession] = {}
    for line in sys.stdin:
        task = json.loads(line)
        conv = current["conv"] = task["conv"]
        session = sessions.get(conv)
        if session is None:
            session = sessions[conv] = ChatSession(
                provider,
                context_window=WINDOW,
                store=store,
                session_id=conv,
                store_owner=args.worker,
            )
        maybe_die("before_turn")
        text = f"{task['turn_id']} " + chr(97 + task["turn"] % 26) * USER_CHARS
        session.send(text, turn_id=task["turn_id"])
        sys.stdout.write(json.dumps({"ack": task["turn_id"]}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
