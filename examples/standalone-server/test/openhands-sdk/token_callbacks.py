"""A RemoteConversation of the OpenHands SDK on an agent-server sandbox, through the service's
proxy, with a model that streams (LLM(stream=True)): the agent-server sends each piece of the
answer on its event socket as a StreamingDeltaEvent, and the SDK hands it to the conversation's
token callbacks (SDK >= 1.56; older ones drop token_callbacks, but their event callbacks still
see the StreamingDeltaEvent frames). Prints, last, one JSON line of what it saw.

Environment: AGENT_SERVER_URL (the sandbox's exposed URL on the service), SESSION_API_KEY (the
sandbox's key), LLM_BASE_URL, PROMPT."""

import json
import os
import sys
from importlib.metadata import version

import httpx
from pydantic import SecretStr

from openhands.sdk import LLM, Agent, Conversation
from openhands.sdk.event import MessageEvent, StreamingDeltaEvent
from openhands.sdk.workspace import RemoteWorkspace

HOST = os.environ["AGENT_SERVER_URL"]
KEY = os.environ["SESSION_API_KEY"]
report: dict = {"sdk": version("openhands-sdk")}
token_pieces: list[str] = []
delta_frames: list[dict] = []


def step(text: str) -> None:
    print(f"step: {text}", file=sys.stderr, flush=True)


def on_token(chunk) -> None:
    # A litellm ModelResponseStream, one choice per delta the agent-server sent.
    for choice in chunk.choices or ():
        content = getattr(choice.delta, "content", None)
        if isinstance(content, str):
            token_pieces.append(content)


def on_event(event) -> None:
    if isinstance(event, StreamingDeltaEvent):
        delta_frames.append({"content": event.content, "reasoning_content": event.reasoning_content})


step(f"a RemoteConversation on {HOST} (openhands-sdk {report['sdk']}), its model streaming")
workspace = RemoteWorkspace(host=HOST, api_key=KEY, working_dir="/workspace/project")
llm = LLM(
    model="openai/scripted-model",
    base_url=os.environ["LLM_BASE_URL"],
    api_key=SecretStr("sk-scripted-not-a-real-key"),
    usage_id="agent",
    stream=True,
    num_retries=0,
)
conversation = Conversation(
    agent=Agent(llm=llm, tools=[]),
    workspace=workspace,
    callbacks=[on_event],
    token_callbacks=[on_token],
    visualizer=None,
)
conversation.send_message(os.environ["PROMPT"])
conversation.run()
report["status"] = str(conversation.state.execution_status.value)

step("the final message, and what the agent-server stored")
answers = [e for e in conversation.state.events if isinstance(e, MessageEvent) and e.source == "agent"]
report["final"] = "".join(getattr(c, "text", "") for c in answers[-1].llm_message.content) if answers else None
report["token_pieces"] = token_pieces
report["delta_frames"] = delta_frames
with httpx.Client(base_url=HOST, headers={"X-Session-API-Key": KEY}, timeout=60) as agent_server:
    stored = agent_server.get(f"/api/conversations/{conversation.id}/events/search", params={"limit": 100})
    stored.raise_for_status()
    report["stored_kinds"] = sorted({e.get("kind", "?") for e in stored.json()["items"]})
conversation.close()
print(json.dumps(report), flush=True)
