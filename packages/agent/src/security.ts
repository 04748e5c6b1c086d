import { SECURITY_ANALYZERS, type SecurityAnalyzerName, type StoredSettings } from '@acs/core/schemas';
import {
  highestRisk,
  type AssessedAction,
  type RiskAssessment,
  type RuleContext,
  type SecurityRisk,
} from './security/risk.js';
import { assessByRules } from './security/rules.js';

/**
 * When actions wait for the user: `never` (confirmation mode off), `always` (on, no analyzer:
 * every response that does more than think or finish), `risky` (on, with an analyzer: only
 * responses with a high-risk action, or one nothing could rate).
 */
export interface SecurityPolicy {
  analyzer: SecurityAnalyzerName | null;
  confirm: 'never' | 'always' | 'risky';
}

/** The name of the argument through which the model rates its own calls. */
export const SECURITY_RISK_ARGUMENT = 'security_risk';

/** Tools that change nothing: never rated, never confirmed. */
const HARMLESS_TOOLS = new Set(['think', 'finish']);

export function securityPolicyOf(
  settings: Pick<StoredSettings, 'confirmation_mode' | 'security_analyzer'> | null,
): SecurityPolicy {
  const named = settings?.security_analyzer?.trim().toLowerCase() || null;
  // A stored name we no longer know (written by an older version) gets the strictest analyzer.
  const analyzer =
    named === null
      ? null
      : (SECURITY_ANALYZERS as readonly string[]).includes(named)
        ? (named as SecurityAnalyzerName)
        : 'ensemble';
  const confirm = settings?.confirmation_mode === true ? (analyzer === null ? 'always' : 'risky') : 'never';
  return { analyzer, confirm };
}

/** The model's rating of one call, from its `security_risk` argument (any case); unknown when absent or not a level. */
function modelRisk(args: Record<string, unknown> | null): RiskAssessment {
  const raw = args?.[SECURITY_RISK_ARGUMENT];
  const level = typeof raw === 'string' ? raw.trim().toLowerCase() : '';
  if (level === 'low' || level === 'medium' || level === 'high')
    return { risk: level, reasons: [`model: rated ${level}`] };
  return {
    risk: 'unknown',
    reasons: raw === undefined ? [] : [`model: gave no usable rating (${JSON.stringify(raw).slice(0, 40)})`],
  };
}

/** How risky one action is under the policy's analyzer; null when no analyzer is configured. */
export function assessAction(
  policy: SecurityPolicy,
  action: AssessedAction,
  context: RuleContext,
): RiskAssessment | null {
  if (policy.analyzer === null) return null;
  if (HARMLESS_TOOLS.has(action.tool_name)) return { risk: 'low', reasons: [] };
  switch (policy.analyzer) {
    case 'llm':
      return modelRisk(action.arguments);
    case 'rules':
      return assessByRules(action, context);
    case 'ensemble':
      return highestRisk([modelRisk(action.arguments), assessByRules(action, context)]);
  }
}

/** Whether a model response's actions wait for the user. A response that only thinks or finishes never does. */
export function needsConfirmation(
  policy: SecurityPolicy,
  actions: readonly { tool_name: string; risk: SecurityRisk | null }[],
): boolean {
  const consequential = actions.filter((a) => !HARMLESS_TOOLS.has(a.tool_name));
  if (policy.confirm === 'never' || consequential.length === 0) return false;
  if (policy.confirm === 'always') return true;
  return consequential.some((a) => a.risk === null || a.risk === 'high' || a.risk === 'unknown');
}

/** The `security_risk` parameter added to the schema of tools the model rates. */
export const SECURITY_RISK_PARAMETER = {
  type: 'string',
  enum: ['LOW', 'MEDIUM', 'HIGH'],
  description:
    'How risky this call is. LOW: reads or changes only the work in the sandbox. MEDIUM: installs software, reaches other hosts, or changes files outside the working directory. HIGH: may destroy data, leak secrets, or affect systems outside the sandbox.',
} as const;

/** What the system prompt says when the model rates its calls. */
export const SECURITY_RISK_GUIDANCE = [
  'Rate every execute_bash and str_replace_editor call with the security_risk argument:',
  '- LOW: reads files, runs tests or builds, edits the work in the working directory.',
  '- MEDIUM: installs packages, contacts hosts other than package registries and the repository host, edits files outside the working directory, rewrites git history locally.',
  '- HIGH: deletes data outside the work, touches credentials or secrets, sends data out of the sandbox, force-pushes, changes system files.',
  'Rate honestly: risky calls may wait for the user to confirm them.',
].join('\n');
