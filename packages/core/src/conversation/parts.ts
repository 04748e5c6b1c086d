import type { EgressPolicy } from '../settings/egress.js';
import type { ConversationRecords } from './records.js';
import type { ConversationServiceDeps } from './service-contract.js';
import type { StartPipeline } from './start-pipeline.js';

/**
 * What every operation of the conversation service works over, made once in `service.ts`:
 * `records.ts` (shared steps: settings checks, transitions, start tasks, records with their
 * sandboxes) and `start-pipeline.ts` (storing a start, all of it or none of it, and running it);
 * the request readers are in `requests.ts`.
 */
export interface ConversationParts {
  readonly deps: ConversationServiceDeps;
  readonly records: ConversationRecords;
  readonly pipeline: StartPipeline;
  /** The operator's allow-lists, resolved once (a V0 create's `mcp_config` is checked against them). */
  readonly egress: EgressPolicy;
}
