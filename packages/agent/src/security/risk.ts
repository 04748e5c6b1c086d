/** What the rules rate: the actions, the context they run in, every rule's id and risk, and how findings make one assessment. */
export type SecurityRisk = 'low' | 'medium' | 'high' | 'unknown';

export interface RiskAssessment {
  risk: SecurityRisk;
  /** Why, one entry per rule that fired: `<rule-id>: <words>` e.g. "destructive-delete: rm -rf of / or a path outside the working directory". Empty for plain low risk. */
  reasons: string[];
}

export interface AssessedAction {
  tool_name: string;
  /** The parsed arguments; null when the model sent something that is not a JSON object. */
  arguments: Record<string, unknown> | null;
  /** Set for MCP tools: the server's hints about the tool. */
  mcp?: {
    server: string;
    tool: string;
    annotations: { read_only?: boolean; destructive?: boolean; open_world?: boolean };
  };
}

export interface RuleContext {
  /** The sandbox working directory; paths under it are the agent's own. */
  workingDir: string;
  /** Hosts the agent may contact without that raising the risk (package registries, the git host of the conversation…). Matched exactly or as a parent domain ("github.com" covers "api.github.com"). */
  trustedHosts: readonly string[];
  /** Directories whose files are secrets (e.g. the git credential dir). */
  secretPaths: readonly string[];
}

export const DEFAULT_TRUSTED_HOSTS: readonly string[] = [
  'registry.npmjs.org',
  'registry.yarnpkg.com',
  'pypi.org',
  'files.pythonhosted.org',
  'proxy.golang.org',
  'crates.io',
  'github.com',
  'githubusercontent.com',
  'gitlab.com',
  'bitbucket.org',
  'deb.debian.org',
  'security.debian.org',
  'archive.ubuntu.com',
  'security.ubuntu.com',
  'localhost',
  '127.0.0.1',
  '::1',
];

/** Every rule, with the risk it sets when it fires. */
const RULES = {
  'destructive-delete': 'high',
  'disk-destroy': 'high',
  'fork-bomb': 'high',
  'system-permissions': 'high',
  'system-power': 'high',
  'download-exec': 'high',
  'git-destructive': 'high',
  'secret-read': 'high',
  'secret-exfiltration': 'high',
  'untrusted-upload': 'high',
  'reverse-shell': 'high',
  'system-write': 'high',
  'local-delete': 'medium',
  'git-discard': 'medium',
  'untrusted-network': 'medium',
  sudo: 'medium',
  'package-install': 'medium',
  persistence: 'medium',
  'run-downloaded': 'medium',
  container: 'medium',
  'hook-write': 'medium',
  'outside-write': 'medium',
  'mcp-destructive': 'high',
  'mcp-side-effects': 'medium',
  'mcp-secret-leak': 'high',
  'unknown-tool': 'unknown',
  'invalid-arguments': 'unknown',
} as const satisfies Record<string, SecurityRisk>;

type RuleId = keyof typeof RULES;

export const RULE_IDS: readonly string[] = Object.freeze(Object.keys(RULES));

export interface Finding {
  rule: RuleId;
  words: string;
}

const RANK: Record<SecurityRisk, number> = { unknown: -1, low: 0, medium: 1, high: 2 };

export function assessmentOf(findings: readonly Finding[], base: SecurityRisk = 'low'): RiskAssessment {
  let risk: SecurityRisk = base;
  const reasons: string[] = [];
  for (const f of findings) {
    const r = RULES[f.rule];
    if (RANK[r] > RANK[risk]) risk = r;
    const reason = `${f.rule}: ${f.words}`;
    if (!reasons.includes(reason)) reasons.push(reason);
  }
  return { risk, reasons };
}

export function highestRisk(assessments: readonly RiskAssessment[]): RiskAssessment {
  let risk: SecurityRisk = 'unknown';
  const reasons: string[] = [];
  for (const a of assessments) {
    if (RANK[a.risk] > RANK[risk]) risk = a.risk;
    for (const r of a.reasons) if (!reasons.includes(r)) reasons.push(r);
  }
  return { risk, reasons };
}
