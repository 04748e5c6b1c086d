"""The OpenHands CLI's cloud agent (`openhands acp --cloud`) against the service: initialize,
session/new (which starts a sandbox with POST /api/v1/sandboxes, no spec named, and opens its
agent-server), then one prompt. Speaks ACP (JSON-RPC over stdio) to the CLI, skipping the
non-JSON lines it prints there, and prints one JSON line of the answers last.

Environment: ACS_URL (the service), OPENHANDS_BIN (the CLI), HOME (seeded with the CLI's API
key and agent_settings.json), PROMPT."""

import json
import os
import subprocess
import sys
import threading
import time

cli = subprocess.Popen(
    [os.environ["OPENHANDS_BIN"], "acp", "--cloud", "--cloud-url", os.environ["ACS_URL"], "--always-approve"],
    stdin=subprocess.PIPE,
    stdout=subprocess.PIPE,
    stderr=sys.stderr,
    text=True,
    bufsize=1,
)
answers: dict[int, dict] = {}
updates: list[str] = []


def read() -> None:
    assert cli.stdout is not None
    for line in cli.stdout:
        try:
            message = json.loads(line)
        except ValueError:
            continue  # the CLI's own printing
        if not isinstance(message, dict):
            continue
        if message.get("method") == "session/update":
            updates.append(message["params"]["update"].get("sessionUpdate", "?"))
        elif message.get("method") == "session/request_permission":
            options = message["params"].get("options", [])
            chosen = next((o["optionId"] for o in options if o.get("kind", "").startswith("allow")), None)
            send({"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": {"outcome": "selected", "optionId": chosen}}})
        elif "id" in message and ("result" in message or "error" in message):
            answers[message["id"]] = message


def send(message: dict) -> None:
    assert cli.stdin is not None
    cli.stdin.write(json.dumps(message) + "\n")
    cli.stdin.flush()


def answer(request_id: int, deadline_s: float) -> dict:
    end = time.time() + deadline_s
    while time.time() < end and cli.poll() is None:
        if request_id in answers:
            return answers[request_id]
        time.sleep(0.2)
    return answers.get(request_id, {"error": f"no answer to request {request_id} within {deadline_s} s (exit {cli.poll()})"})


threading.Thread(target=read, daemon=True).start()
report: dict = {}
try:
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}}})
    report["initialize"] = answer(1, 120)
    started = time.time()
    send({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": os.getcwd(), "mcpServers": []}})
    report["session_new"] = answer(2, 420)
    report["session_new_seconds"] = round(time.time() - started, 1)
    session_id = report["session_new"].get("result", {}).get("sessionId")
    if session_id:
        send({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {"sessionId": session_id, "prompt": [{"type": "text", "text": os.environ["PROMPT"]}]}})
        report["prompt"] = answer(3, 240)
    report["updates"] = sorted(set(updates))
finally:
    cli.terminate()
    try:
        cli.wait(15)
    except subprocess.TimeoutExpired:
        cli.kill()
print(json.dumps(report), flush=True)
