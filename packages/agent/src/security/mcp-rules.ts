/** MCP tools are rated by what their server says of them (annotations). */
import { SECRET_TOKEN } from './bash-rules.js';
import type { AssessedAction, Finding } from './risk.js';

const MAX_SCANNED_STRINGS = 10_000;

function stringsIn(value: unknown, out: string[], depth: number): void {
  if (out.length >= MAX_SCANNED_STRINGS || depth > 20) return;
  if (typeof value === 'string') out.push(value);
  else if (Array.isArray(value)) for (const v of value) stringsIn(v, out, depth + 1);
  else if (value !== null && typeof value === 'object')
    for (const v of Object.values(value)) stringsIn(v, out, depth + 1);
}

export function mcpFindings(
  annotations: NonNullable<AssessedAction['mcp']>['annotations'],
  argumentsObject: Record<string, unknown>,
): Finding[] {
  const findings: Finding[] = [];
  // MCP's defaults: a tool not marked read-only is destructive unless it says otherwise.
  if (annotations.destructive === true)
    findings.push({ rule: 'mcp-destructive', words: 'the server marks this tool as destructive' });
  else if (annotations.read_only !== true && annotations.destructive === undefined) {
    findings.push({
      rule: 'mcp-destructive',
      words: 'the server does not say the tool is read-only or harmless, so MCP counts it as destructive',
    });
  } else if (annotations.read_only !== true)
    findings.push({ rule: 'mcp-side-effects', words: 'an external tool with side effects we cannot see' });
  const strings: string[] = [];
  stringsIn(argumentsObject, strings, 0);
  if (strings.some((s) => SECRET_TOKEN.test(s)))
    findings.push({ rule: 'mcp-secret-leak', words: 'secrets sent to an external tool' });
  return findings;
}
