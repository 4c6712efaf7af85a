"""The latency ``autocompact serve`` adds per request, and requests per second per worker.

One run, three series interleaved request by request (so machine noise hits all three alike),
for a request of about 100K tokens (by the engine's estimate) to a local upstream that answers
at once:

- **direct**: sent straight to the upstream;
- **proxy, nothing to do**: through the proxy with a window large enough that the request is
  below *auto* (the proxy converts, hashes, measures, then forwards the bytes unchanged);
- **proxy, stored substitution**: through the proxy after the conversation was compacted once:
  the full raw history comes in, the stored replacement is spliced in, a small request goes out.

Added latency = the proxy series minus the faster of the round's two direct requests, round
by round (p50 / p99). Then requests
per second through one worker for a small (1K-token) request, beside direct.

Controls (the run fails loudly when one does not hold): the substitution series must have been
substituted on every request (``X-Autocompact-Action``) and every substituted body must carry the
very same replacement bytes (the prompt-cache claim); a "direct vs direct" series gives the noise
floor, which must be far below the proxy's added latency for the figure to mean anything.

    python benchmarks/serve.py            # 60 requests per series
    python benchmarks/serve.py --quick    # 10
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from autocompact.serve import ServeApp, ServeConfig

SNAPSHOT = (
    "<state_snapshot><overall_goal>benchmark</overall_goal><constraints>none</constraints>"
    "<key_knowledge>none</key_knowledge><file_system_state>none</file_system_state><code_state>"
    "none</code_state><errors_and_fixes>none</errors_and_fixes><recent_actions>none"
    "</recent_actions><current_plan>1. [TODO] go on</current_plan><next_step>go on</next_step>"
    "</state_snapshot>"
)


class Upstream:
    """Answers every chat request at once; keeps the bodies it received."""

    def __init__(self) -> None:
        self.received: list[bytes] = []

    async def chat(self, request: Request) -> Response:
        raw = await request.body()
        self.received.append(raw)
        text = SNAPSHOT if b"structured state snapshot" in raw[:20000] else "ok"
        message = {"role": "assistant", "content": text}
        return JSONResponse(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(raw) // 4, "completion_tokens": 1},
            }
        )

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"])])


@contextmanager
def running(app: Any) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(5)


def history(tokens: int) -> list[dict[str, Any]]:
    """A tool-free conversation of about ``tokens`` tokens (4 characters per token)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    turn = 0
    while sum(len(json.dumps(m)) for m in messages) < tokens * 4:
        words = " ".join(f"w{turn}_{i}" for i in range(300))
        messages.append({"role": "user", "content": f"step {turn}: {words}"})
        messages.append({"role": "assistant", "content": f"done {turn}: {words[:400]}"})
        turn += 1
    messages.append({"role": "user", "content": "next"})
    return messages


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--requests", type=int, default=60)
    args = parser.parse_args()
    n = 10 if args.quick else args.requests
    upstream = Upstream()
    big = history(100_000)
    body = json.dumps({"model": "m", "messages": big}).encode()
    small = json.dumps({"model": "m", "messages": history(1_000)}).encode()
    tmp = Path(tempfile.mkdtemp())
    with running(upstream.app()) as up:
        idle = ServeApp(
            ServeConfig(
                upstreams={"openai": up + "/v1"},
                store=f"sqlite:///{tmp / 'idle.db'}",
                context_window=1_000_000,
            )
        )
        busy = ServeApp(
            ServeConfig(
                upstreams={"openai": up + "/v1"},
                store=f"sqlite:///{tmp / 'busy.db'}",
                context_window=120_000,
            )
        )
        with (
            running(idle.asgi) as p_idle,
            running(busy.asgi) as p_busy,
            httpx.Client(timeout=120) as client,
        ):
            url = "/v1/chat/completions"
            first = client.post(p_busy + url, content=body)
            if first.headers.get("x-autocompact-action") != "compacted":
                print(f"control failed: first request was {first.headers}", file=sys.stderr)
                return 1
            for _ in range(3):  # warm-up
                client.post(up + url, content=body)
                client.post(p_idle + url, content=body)
                client.post(p_busy + url, content=body)
            series: dict[str, list[float]] = {"direct": [], "direct2": [], "idle": [], "sub": []}
            actions = set()
            mark = len(upstream.received)
            order = [("direct", up), ("idle", p_idle), ("sub", p_busy), ("direct2", up)]
            for i in range(n):
                # The order rotates from round to round (each series goes first as often).
                for name, base in order[i % 4 :] + order[: i % 4]:
                    start = time.perf_counter()
                    reply = client.post(base + url, content=body)
                    series[name].append(time.perf_counter() - start)
                    if name == "sub":
                        actions.add(reply.headers.get("x-autocompact-action"))
            sub_bodies = {
                json.dumps(json.loads(b)["messages"][:3])
                for b in upstream.received[mark:]
                if len(b) < len(body) // 2
            }
            # Throughput through one worker, small requests, sequential.
            rps = {}
            for name, base in (("direct", up), ("proxy", p_idle)):
                count, start = 0, time.perf_counter()
                while time.perf_counter() - start < (1.0 if args.quick else 3.0):
                    client.post(base + url, content=small)
                    count += 1
                rps[name] = count / (time.perf_counter() - start)
        idle.store.close()
        busy.store.close()

    # The baseline of a round is the faster of its two direct requests (the two differ by a
    # few tens of ms on a loaded machine): the added figure errs on the high side.
    floor = [min(a, b) for a, b in zip(series["direct"], series["direct2"], strict=True)]

    def added(name: str) -> list[float]:
        return [(a - b) * 1000 for a, b in zip(series[name], floor, strict=True)]

    print(f"## autocompact serve: added latency ({n} requests per series, ~100K tokens, "
          f"{len(body) / 1e6:.1f} MB body)\n")  # fmt: skip
    print("| series | p50 ms | p99 ms | added p50 ms | added p99 ms |")
    print("|---|---|---|---|---|")
    for name, label in (
        ("direct", "direct to upstream"),
        ("direct2", "direct again (noise floor)"),
        ("idle", "proxy, nothing to do"),
        ("sub", "proxy, stored substitution"),
    ):
        ms = [s * 1000 for s in series[name]]
        extra = added(name)
        print(
            f"| {label} | {statistics.median(ms):.1f} | {pct(ms, 0.99):.1f} | "
            f"{statistics.median(extra):.1f} | {pct(extra, 0.99):.1f} |"
        )
    print(f"\nrequests/s, 1K-token request, one worker: direct {rps['direct']:.0f}, "
          f"through the proxy {rps['proxy']:.0f}")  # fmt: skip
    ok = actions == {"substituted"} and len(sub_bodies) == 1
    print(f"control: every substitution request substituted: {actions == {'substituted'}}; "
          f"distinct replacement prefixes sent: {len(sub_bodies)} (must be 1)")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
