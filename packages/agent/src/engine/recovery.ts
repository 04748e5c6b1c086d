import type { DomainError } from '@acs/core';
import type { ActionEvent } from '@acs/core/schemas';
import { storeUnavailable, type AgentPort, type RecoveryReport } from '@acs/core/ports';
import { ResultAsync } from 'neverthrow';
import type { Actions } from './actions.js';
import type { EngineBase } from './base.js';
import { decisionOn, pendingConfirmation } from './log-reading.js';
import type { Recording } from './recording.js';

/** Recovery after a restart: the log says which conversations were running and which tool calls never got an observation. */
export function createRecovery(kit: EngineBase & Recording & Actions & Pick<AgentPort, 'wake'>) {
  const { conversations, runners, append, catchUp, errorEvent, interruptedObservation, wake } = kit;

  /** After a restart: closes the tool calls the crash cut short and resumes the conversations that were running. */
  const recover = (): ResultAsync<RecoveryReport, DomainError> =>
    conversations
      .listByExecutionStatus(['running', 'waiting_for_confirmation'])
      .andThen((records) =>
        ResultAsync.fromPromise(
          (async () => {
            let interrupted = 0;
            for (const record of records) {
              const r = runners.runnerFor(record.user_id, record.id);
              if (r.loop) continue;
              await catchUp(r);
              // Waiting for the user: nothing was cut short; a decision recorded just before the stop is acted on now.
              if (record.execution_status === 'waiting_for_confirmation') {
                wake(record.user_id, record.id);
                continue;
              }
              const answered = new Set(r.events.flatMap((e) => (e.kind === 'observation' ? [e.tool_call_id] : [])));
              // Actions still waiting for the user never started: they wait again rather than count as interrupted.
              const awaiting = pendingConfirmation(r.events);
              const undecided = new Set(decisionOn(r.events, awaiting) ? [] : awaiting.map((a) => a.tool_call_id));
              const open = r.events.filter((e): e is ActionEvent => e.kind === 'action' && !answered.has(e.tool_call_id) && !undecided.has(e.tool_call_id));
              if (open.length > 0) {
                interrupted += open.length;
                await append(r, [
                  ...open.map((a) =>
                    interruptedObservation(a, 'Interrupted: the service restarted while this call was running; it may or may not have completed. Check its effects before repeating it.'),
                  ),
                  errorEvent('restart_interrupted', `The service restarted while ${open.length} tool call(s) ran; they are recorded as interrupted and the agent goes on.`),
                ]);
              }
              wake(record.user_id, record.id);
            }
            return { resumed: records.length, interrupted_calls: interrupted };
          })(),
          (error): DomainError => storeUnavailable('resume running conversations', error),
        ),
      );

  return { recover };
}
