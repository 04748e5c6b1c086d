/**
 * A rule-based security analyzer for the agent's actions: pure functions, no I/O.
 *
 * The bash analysis is a small tolerant shell lexer (quotes, operators, redirects,
 * `$(…)`, backticks, process substitution, heredocs, `sh -c` bodies) followed by rules
 * over the simple commands it finds. It is a heuristic: it errs towards flagging,
 * and it never executes or expands anything beyond `~`/`$HOME`.
 *
 * This file is the entry: one action in, its risk and the reasons out. The pieces are one idea
 * per file: core's `lexShell` → `shell-commands` (with `shell-arguments`) → `bash-rules`, which use
 * `paths` and `hosts`; `editor-rules` and `mcp-rules` for the other tools; `risk` for the rules'
 * ids and how findings combine.
 */
import { assessBash } from './bash-rules.js';
import { assessEditor } from './editor-rules.js';
import { mcpFindings } from './mcp-rules.js';
import { assessmentOf, type AssessedAction, type RiskAssessment, type RuleContext } from './risk.js';

export function assessByRules(action: AssessedAction, context: RuleContext): RiskAssessment {
  if (action.arguments === null || typeof action.arguments !== 'object' || Array.isArray(action.arguments)) {
    return assessmentOf([{ rule: 'invalid-arguments', words: 'the arguments are not a JSON object' }], 'unknown');
  }
  if (action.mcp) return assessmentOf(mcpFindings(action.mcp.annotations, action.arguments));
  switch (action.tool_name) {
    case 'execute_bash':
      return assessBash(action.arguments, context);
    case 'str_replace_editor':
      return assessEditor(action.arguments, context);
    case 'think':
    case 'finish':
      return { risk: 'low', reasons: [] };
    default:
      return assessmentOf([{ rule: 'unknown-tool', words: `no rules for the tool "${action.tool_name}"` }], 'unknown');
  }
}
