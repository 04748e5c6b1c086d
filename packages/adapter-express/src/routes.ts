import type { AgentConversationService } from '@acs/core';
import type { RouteDefinition } from './route.js';
import { defaultRouteContext, type RouteContext } from './route-context.js';
import { agentServerRoutes } from './routes/agent-server.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { deviceAuthorizationRoutes } from './routes/device-authorization.js';
import { userRoutes } from './routes/users.js';
import { appConversationRoutes } from './routes/app-conversations.js';
import { appConversationWorkspaceRoutes } from './routes/app-conversation-workspace.js';
import { openHandsV1Routes } from './routes/openhands-v1.js';
import { browserRoutes } from './routes/browser.js';
import { conversationRoutesV0 } from './routes/conversations-v0.js';
import { configRoutesV1 } from './routes/config-v1.js';
import { gitRoutes } from './routes/git.js';
import { healthRoutes } from './routes/health.js';
import { optionRoutes } from './routes/options.js';
import { panelRoutes } from './routes/panels.js';
import { sandboxRoutes } from './routes/sandboxes.js';
import { sandboxSpecRoutes } from './routes/sandbox-specs.js';
import { secretRoutes } from './routes/secrets.js';
import { secretRoutesV1 } from './routes/secrets-v1.js';
import { settingsRoutes } from './routes/settings.js';
import { settingsRoutesV1 } from './routes/settings-v1.js';

/**
 * Every route of the service, in registration order (literal paths before parameterised ones).
 * Each resource group's routes are a file of their own under `routes/`.
 */
export function buildRoutes(
  service: AgentConversationService,
  context: RouteContext = defaultRouteContext(),
): RouteDefinition[] {
  return [
    ...browserRoutes(context),
    ...optionRoutes(context),
    ...secretRoutes(service),
    ...agentServerRoutes(service),
    ...panelRoutes(service),
    ...healthRoutes(service, context),
    ...settingsRoutes(service),
    ...settingsRoutesV1(service),
    ...secretRoutesV1(service),
    ...configRoutesV1(context),
    ...apiKeyRoutes(service),
    ...deviceAuthorizationRoutes(service, context),
    ...userRoutes(service, context.ownSandboxKey),
    ...conversationRoutesV0(service, context),
    ...appConversationRoutes(service, context),
    ...appConversationWorkspaceRoutes(service, context),
    ...openHandsV1Routes(service),
    ...sandboxRoutes(service, context),
    ...sandboxSpecRoutes(service),
    ...gitRoutes(service),
  ];
}
