"""Dump pydantic JSON schemas for every request/response model of the
OpenHands 1.11 app server V1 routes (plus /server_info etc).

Run with a Python 3.12 venv that has openhands-ai==1.11.0 installed, pinned to
that release's lockfile versions of fastapi and pydantic (see README.md here):

    python3.12 -m venv /tmp/oh-venv
    /tmp/oh-venv/bin/pip install openhands-ai==1.11.0 fastapi==0.135.3 pydantic==2.12.5
    mkdir -p /tmp/oh-run && cd /tmp/oh-run && HOME=/tmp/oh-run OH_PERSISTENCE_DIR=/tmp/oh-run/persist \
      SERVE_FRONTEND=false OPENHANDS_SUPPRESS_BANNER=1 /tmp/oh-venv/bin/python <this file>

Writes schemas/<Model>.json next to this file (serialization-mode schema, i.e.
what the server returns) and, for request models, schemas/<Model>.request.json
(validation-mode schema, i.e. what the server accepts). Also writes openapi.json
(FastAPI's own OpenAPI document for the whole app).
"""
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault('OH_PERSISTENCE_DIR', '/tmp/oh-run/persist')
os.environ.setdefault('SERVE_FRONTEND', 'false')
os.environ.setdefault('OPENHANDS_SUPPRESS_BANNER', '1')

from pydantic import BaseModel, TypeAdapter  # noqa: E402

# Importing the app registers every router / discriminated-union subclass.
from openhands.app_server.app import app  # noqa: E402
from openhands.agent_server.models import (  # noqa: E402
    ConversationInfo,
    EventPage,
    ImageContent,
    SendMessageRequest,
    StartConversationRequest,
    Success,
    TextContent,
)
from openhands.app_server.app_conversation.app_conversation_models import (  # noqa: E402
    AppConversation,
    AppConversationInfo,
    AppConversationPage,
    AppConversationStartRequest,
    AppConversationStartTask,
    AppConversationStartTaskPage,
    AppConversationUpdateRequest,
    AppSendMessageRequest,
    AppSendMessageResponse,
    GetHooksResponse,
    SkillResponse,
    SwitchAcpModelRequest,
    SwitchProfileRequest,
)
from openhands.app_server.config_api.config_models import LLMModelPage, ProviderPage  # noqa: E402
from openhands.app_server.git.git_models import (  # noqa: E402
    BranchPage,
    InstallationPage,
    RepositoryPage,
    SuggestedTaskPage,
)
from openhands.app_server.integrations.service_types import UserGitInfo  # noqa: E402
from openhands.app_server.pending_messages.pending_message_models import (  # noqa: E402
    PendingMessage,
    PendingMessageResponse,
)
from openhands.app_server.sandbox.sandbox_models import (  # noqa: E402
    SandboxInfo,
    SandboxPage,
    SecretNamesResponse,
)
from openhands.app_server.sandbox.sandbox_spec_models import (  # noqa: E402
    SandboxSpecInfo,
    SandboxSpecInfoPage,
)
from openhands.app_server.secrets.secrets_models import (  # noqa: E402
    CustomSecretCreate,
    CustomSecretPage,
    CustomSecretWithoutValue,
)
from openhands.app_server.settings.settings_models import (  # noqa: E402
    GETSettingsModel,
    MarketplaceRegistration,
    POSTProviderModel,
    Settings,
)
from openhands.app_server.settings.settings_router import (  # noqa: E402
    ActivateProfileResponse,
    ProfileDetailResponse,
    ProfileListResponse,
    ProfileMutationResponse,
    RenameProfileRequest,
    SaveProfileRequest,
)
from openhands.app_server.user.skills_router import (  # noqa: E402
    MarketplaceSkillsPreviewResponse,
    SkillPage,
)
from openhands.app_server.user.user_models import UserInfo  # noqa: E402
from openhands.app_server.utils.models import EditResponse  # noqa: E402
from openhands.app_server.web_client.web_client_models import WebClientConfig  # noqa: E402
from openhands.sdk import Event  # noqa: E402
from openhands.sdk.llm import LLM  # noqa: E402
from openhands.sdk.settings import (  # noqa: E402
    ACPAgentSettings,
    AgentSettingsConfig,
    ConversationSettings,
    OpenHandsAgentSettings,
    export_agent_settings_schema,
)

OUT = Path(__file__).resolve().parent / 'schemas'
OUT.mkdir(parents=True, exist_ok=True)

# name -> (type, is_request, is_response)
MODELS: dict[str, tuple[Any, bool, bool]] = {
    # app-conversations
    'AppConversationStartRequest': (AppConversationStartRequest, True, True),
    'AppConversationUpdateRequest': (AppConversationUpdateRequest, True, False),
    'AppSendMessageRequest': (AppSendMessageRequest, True, False),
    'SwitchProfileRequest': (SwitchProfileRequest, True, False),
    'SwitchAcpModelRequest': (SwitchAcpModelRequest, True, False),
    'AppConversation': (AppConversation, False, True),
    'AppConversationInfo': (AppConversationInfo, False, True),
    'AppConversationPage': (AppConversationPage, False, True),
    'AppConversationStartTask': (AppConversationStartTask, False, True),
    'AppConversationStartTaskPage': (AppConversationStartTaskPage, False, True),
    'AppSendMessageResponse': (AppSendMessageResponse, False, True),
    'GetHooksResponse': (GetHooksResponse, False, True),
    'SkillResponse': (SkillResponse, False, True),
    'Success': (Success, False, True),
    'SendMessageRequest': (SendMessageRequest, True, True),
    'TextContent': (TextContent, True, True),
    'ImageContent': (ImageContent, True, True),
    # events
    'EventPage': (EventPage, False, True),
    'Event': (TypeAdapter(Event), True, True),
    # pending messages
    'PendingMessage': (PendingMessage, True, False),
    'PendingMessageResponse': (PendingMessageResponse, False, True),
    # sandboxes
    'SandboxInfo': (SandboxInfo, False, True),
    'SandboxPage': (SandboxPage, False, True),
    'SecretNamesResponse': (SecretNamesResponse, False, True),
    'SandboxSpecInfo': (SandboxSpecInfo, False, True),
    'SandboxSpecInfoPage': (SandboxSpecInfoPage, False, True),
    # settings
    'Settings': (Settings, True, True),
    'GETSettingsModel': (GETSettingsModel, False, True),
    'ProfileListResponse': (ProfileListResponse, False, True),
    'ProfileDetailResponse': (ProfileDetailResponse, False, True),
    'ProfileMutationResponse': (ProfileMutationResponse, False, True),
    'ActivateProfileResponse': (ActivateProfileResponse, False, True),
    'SaveProfileRequest': (SaveProfileRequest, True, False),
    'RenameProfileRequest': (RenameProfileRequest, True, False),
    'LLM': (LLM, True, True),
    'ConversationSettings': (ConversationSettings, True, True),
    'OpenHandsAgentSettings': (OpenHandsAgentSettings, True, True),
    'ACPAgentSettings': (ACPAgentSettings, True, True),
    'AgentSettingsConfig': (TypeAdapter(AgentSettingsConfig), True, True),
    'MarketplaceRegistration': (MarketplaceRegistration, True, True),
    # secrets
    'POSTProviderModel': (POSTProviderModel, True, False),
    'CustomSecretCreate': (CustomSecretCreate, True, False),
    'CustomSecretWithoutValue': (CustomSecretWithoutValue, True, True),
    'CustomSecretPage': (CustomSecretPage, False, True),
    'EditResponse': (EditResponse, False, True),
    # users / skills
    'UserInfo': (UserInfo, False, True),
    'UserGitInfo': (UserGitInfo, False, True),
    'SkillPage': (SkillPage, False, True),
    'MarketplaceSkillsPreviewResponse': (MarketplaceSkillsPreviewResponse, False, True),
    # webhooks (sandbox -> app server)
    'ConversationInfo': (ConversationInfo, True, True),
    'StartConversationRequest': (StartConversationRequest, True, True),
    # web client / git / config
    'WebClientConfig': (WebClientConfig, False, True),
    'InstallationPage': (InstallationPage, False, True),
    'RepositoryPage': (RepositoryPage, False, True),
    'BranchPage': (BranchPage, False, True),
    'SuggestedTaskPage': (SuggestedTaskPage, False, True),
    'LLMModelPage': (LLMModelPage, False, True),
    'ProviderPage': (ProviderPage, False, True),
}


def schema_of(tp: Any, mode: str) -> dict:
    if isinstance(tp, TypeAdapter):
        return tp.json_schema(mode=mode)
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_json_schema(mode=mode)
    return TypeAdapter(tp).json_schema(mode=mode)


failures = []
for name, (tp, is_req, is_resp) in MODELS.items():
    try:
        if is_resp or not is_req:
            (OUT / f'{name}.json').write_text(
                json.dumps(schema_of(tp, 'serialization'), separators=(',', ':'), sort_keys=True)
            )
        if is_req:
            fname = f'{name}.request.json' if is_resp else f'{name}.json'
            (OUT / fname).write_text(json.dumps(schema_of(tp, 'validation'), separators=(',', ':'), sort_keys=True))
    except Exception as e:  # pragma: no cover - diagnostic
        failures.append((name, repr(e)))

# Dynamic (non-pydantic-model) response bodies, dumped as produced:
(OUT / 'AgentSettingsSchema.example.json').write_text(
    json.dumps(export_agent_settings_schema().model_dump(mode='json'), separators=(',', ':'), sort_keys=True)
)
(OUT / 'ConversationSettingsSchema.example.json').write_text(
    json.dumps(ConversationSettings.export_schema().model_dump(mode='json'), separators=(',', ':'), sort_keys=True)
)

# The full OpenAPI document as FastAPI generates it.
(OUT.parent / 'openapi.json').write_text(json.dumps(app.openapi(), separators=(',', ':'), sort_keys=True))

print(f'wrote {len(list(OUT.glob("*.json")))} files to {OUT}')
for name, err in failures:
    print('FAILED', name, err, file=sys.stderr)
