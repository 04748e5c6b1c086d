import type { AgentConversationService } from '@acs/core';
import type { RouteDefinition } from './route.js';
import { defaultRouteContext, type RouteContext } from './route-context.js';
import { agentServerRoutes } from './routes/agent-server.js';
import { appConversationRoutes } from './routes/app-conversations.js';
import { browserRoutes } from './routes/browser.js';
import { conversationRoutesV0 } from './routes/conversations-v0.js';
import { healthRoutes } from './routes/health.js';
import { optionRoutes } from './routes/options.js';
import { panelRoutes } from './routes/panels.js';
import { sandboxRoutes } from './routes/sandboxes.js';
import { sandboxSpecRoutes } from './routes/sandbox-specs.js';
import { secretRoutes } from './routes/secrets.js';
import { settingsRoutes } from './routes/settings.js';

/**
 * Every route of the service, in registration order (literal paths before parameterised ones).
 * Each resource group's routes are a file of their own under `routes/`.
 */
export function buildRoutes(service: AgentConversationService, context: RouteContext = defaultRouteContext()): RouteDefinition[] {
  return [
    ...browserRoutes(context),
    ...optionRoutes(context),
    ...secretRoutes(service),
    ...agentServerRoutes(service),
    ...panelRoutes(service),
    ...healthRoutes(service),
    ...settingsRoutes(service),
    ...conversationRoutesV0(service, context),
    ...appConversationRoutes(service, context),
    ...sandboxRoutes(service, context.sandboxUrlHost),
    ...sandboxSpecRoutes(service),
  ];
}
