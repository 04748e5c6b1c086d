"""The OpenHands SDK against the service, as a user of it writes it: OpenHandsCloudWorkspace, a
Conversation whose agent runs in the sandbox's agent-server (with a scripted model), pause and
resume through the service's API, another user's attempts, cleanup. Asserts as it goes and
prints, last, one JSON line of what it saw for the test to check. Runs with the CLI's SDK (1.21,
workspace 1.11.1) and with the newest (1.58): with the newest, the model comes from the user's
settings on the service (`get_llm()`, secret values shown to the sandbox's key), its answer
streams to the conversation's token callbacks, and the secrets and MCP servers are read too.
The exposed URL is resolved as the machine resolves it: nothing here patches the resolver.

Environment: ACS_URL, ALICE_KEY, BOB_KEY, SPEC_ID (the sandbox spec), LLM_BASE_URL (the user's settings on the service name
the same model server)."""

import json
import os
import sys
import tempfile
import time

from importlib.metadata import version

import httpx
from pydantic import SecretStr

from openhands.sdk import LLM, Conversation
from openhands.tools.preset.default import get_default_agent
from openhands.workspace import OpenHandsCloudWorkspace

URL = os.environ["ACS_URL"]
ALICE = os.environ["ALICE_KEY"]
BOB = os.environ["BOB_KEY"]
report: dict = {"sdk": version("openhands-sdk")}
# get_llm(), get_secrets(), token_callbacks: the SDK and workspace of 1.58 have them, 1.21 not.
NEWEST = tuple(int(part) for part in report["sdk"].split(".")[:2]) >= (1, 58)


def step(text: str) -> None:
    print(f"step: {text}", file=sys.stderr, flush=True)


def api(method: str, path: str, key: str) -> httpx.Response:
    return httpx.request(method, URL + path, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def sandbox(sandbox_id: str, key: str = ALICE):
    response = api("GET", f"/api/v1/sandboxes?id={sandbox_id}", key)
    assert response.status_code == 200, response.text
    return response.json()[0]


def until_status(sandbox_id: str, status: str, deadline_s: float = 120) -> dict:
    end = time.time() + deadline_s
    seen = None
    while time.time() < end:
        seen = sandbox(sandbox_id)
        if seen and seen["status"] == status:
            return seen
        time.sleep(0.5)
    raise AssertionError(f"sandbox {sandbox_id} is not {status} after {deadline_s} s: {seen}")


SPEC_ID = os.environ["SPEC_ID"]
step(f"OpenHandsCloudWorkspace (POST /api/v1/sandboxes?sandbox_spec_id={SPEC_ID}, readiness loop)")
started = time.time()
workspace = OpenHandsCloudWorkspace(cloud_api_url=URL, cloud_api_key=ALICE, sandbox_spec_id=SPEC_ID)
report["ready_seconds"] = round(time.time() - started, 1)
report["host"] = workspace.host
sandbox_id = workspace._sandbox_id
report["sandbox_id"] = sandbox_id
info = sandbox(sandbox_id)
report["sandbox"] = info
key = info["session_api_key"]

step("a Conversation in the sandbox's agent-server, with the scripted model")
scripted = dict(usage_id="agent", native_tool_calling=True, num_retries=0)
token_pieces: list[str] = []


def on_token(chunk) -> None:
    for choice in chunk.choices or ():
        content = getattr(choice.delta, "content", None)
        if isinstance(content, str):
            token_pieces.append(content)


if NEWEST:
    # As a user of the newest SDK writes it: the model, its URL and key from their settings.
    llm = workspace.get_llm(stream=True, **scripted)
    report["llm"] = {"model": llm.model, "base_url": llm.base_url, "key_shown": llm.api_key is not None}
    report["secrets"] = sorted(workspace.get_secrets())
    report["secrets_of_profile"] = sorted(workspace.get_secrets(agent_profile_id="default"))
    report["mcp_config"] = workspace.get_mcp_config()
else:
    llm = LLM(
        model="openai/scripted-model",
        base_url=os.environ["LLM_BASE_URL"],
        api_key=SecretStr("sk-scripted-not-a-real-key"),
        **scripted,
    )
agent = get_default_agent(llm=llm, cli_mode=True)
streamed: list[str] = []
conversation = Conversation(
    agent=agent,
    workspace=workspace,
    callbacks=[lambda event: streamed.append(type(event).__name__)],
    visualizer=None,
    **({"token_callbacks": [on_token]} if NEWEST else {}),
)
report["conversation_id"] = str(conversation.id)
conversation.send_message("[script:sdk] Write the marker file, then finish.")
conversation.run()
report["status_after_run"] = str(conversation.state.execution_status.value)
report["streamed_kinds"] = sorted(set(streamed))
report["token_pieces"] = len(token_pieces)
report["streamed_text"] = "".join(token_pieces)
marker = workspace.execute_command("cat /workspace/project/marker.txt")
report["marker"] = marker.stdout.strip()

step("files both ways through the workspace")
with tempfile.TemporaryDirectory() as scratch:
    sent = os.path.join(scratch, "sent.txt")
    with open(sent, "w") as f:
        f.write("uploaded by the SDK\n")
    upload = workspace.file_upload(sent, "/workspace/project/uploaded.txt")
    report["upload_ok"] = upload.success
    report["uploaded_seen"] = workspace.execute_command("cat /workspace/project/uploaded.txt").stdout.strip()
    back = os.path.join(scratch, "marker.txt")
    download = workspace.file_download("/workspace/project/marker.txt", back)
    report["download_ok"] = download.success
    with open(back) as f:
        report["downloaded"] = f.read().strip()

agent_server = httpx.Client(base_url=workspace.host, headers={"X-Session-API-Key": key}, timeout=60)
before = agent_server.get(f"/api/conversations/{conversation.id}/events/search", params={"limit": 100}).json()["items"]
report["events_before_pause"] = len(before)
report["stored_kinds"] = sorted({e.get("kind", "?") for e in before})
report["observations"] = [json.dumps(e.get("observation", {}))[:400] for e in before if e.get("kind") == "ObservationEvent"]

if NEWEST:
    step("the agent-server 1.58 session socket through the proxy: history, then resume by after_seq")
    from websockets.sync.client import connect as ws_connect

    def session_frames(after_seq: int, first_frame_auth: bool) -> dict:
        url = f"{workspace.host.replace('http://', 'ws://')}/sockets/session/{conversation.id}?after_seq={after_seq}"
        headers = None if first_frame_auth else {"X-Session-API-Key": key}
        with ws_connect(url, additional_headers=headers, open_timeout=30) as socket:
            if first_frame_auth:
                socket.send(json.dumps({"type": "auth", "session_api_key": key}))
            sync = json.loads(socket.recv(timeout=30))
            seqs: list[int] = []
            through = sync.get("through_seq")
            while through is not None and (not seqs or seqs[-1] < through):
                frame = json.loads(socket.recv(timeout=30))
                if frame.get("type") == "durable":
                    seqs.append(frame["seq"])
        return {"sync": sync, "seqs": seqs}

    whole = session_frames(-1, first_frame_auth=False)
    last = whole["sync"]["through_seq"]
    report["session_socket"] = {"whole": whole, "resumed": session_frames(last - 2, first_frame_auth=True)}

step("pause through the service: the agent-server answers 503 meanwhile")
assert api("POST", f"/api/v1/sandboxes/{sandbox_id}/pause", ALICE).status_code == 200
until_status(sandbox_id, "PAUSED")
paused_health = httpx.get(f"{workspace.host}/health", timeout=10)
report["paused_health_status"] = paused_health.status_code
report["paused_info"] = sandbox(sandbox_id)

step("resume through the service: the same conversation is there, and goes on")
assert api("POST", f"/api/v1/sandboxes/{sandbox_id}/resume", ALICE).status_code == 200
until_status(sandbox_id, "RUNNING")
after = agent_server.get(f"/api/conversations/{conversation.id}/events/search", params={"limit": 100}).json()["items"]
report["events_after_resume"] = len(after)
report["same_events"] = [e["id"] for e in before] == [e["id"] for e in after[: len(before)]]
conversation.send_message("And once more, please.")
conversation.run()
report["status_after_second_run"] = str(conversation.state.execution_status.value)

step("bob, another user, tries alice's agent-server")
bob_attempts = {
    "bob_api_key_bearer": httpx.get(f"{workspace.host}/api/conversations/search", headers={"Authorization": f"Bearer {BOB}"}).status_code,
    "bob_api_key_header": httpx.get(f"{workspace.host}/api/conversations/search", headers={"X-Session-API-Key": BOB}).status_code,
    "no_key": httpx.get(f"{workspace.host}/api/conversations/search").status_code,
    "bob_sandbox_listing": api("GET", f"/api/v1/sandboxes?id={sandbox_id}", BOB).json(),
    "bob_delete": api("DELETE", f"/api/v1/sandboxes?sandbox_id={sandbox_id}", BOB).status_code,
}
try:
    from websockets.sync.client import connect

    with connect(f"{workspace.host.replace('http://', 'ws://')}/sockets/events/{conversation.id}?session_api_key={BOB}", open_timeout=10) as socket:
        socket.recv(timeout=5)
    bob_attempts["bob_websocket"] = "opened"
except Exception as error:  # the handshake is refused
    bob_attempts["bob_websocket"] = type(error).__name__ + ": " + str(error)[:120]
report["bob"] = bob_attempts

step("workspace.cleanup() deletes the sandbox")
agent_server.close()
conversation.close()
workspace.cleanup()
report["after_cleanup"] = sandbox(sandbox_id)
print(json.dumps(report), flush=True)
