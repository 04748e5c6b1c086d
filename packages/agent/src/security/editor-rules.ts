/** The rules over one `str_replace_editor` call: which file it writes or reads. */
import {
  isProtectedWritePath,
  isSecretPath,
  isStartupFile,
  isStrictlyWithin,
  isWithin,
  normalizePath,
  resolvePath,
} from './paths.js';
import { assessmentOf, type Finding, type RiskAssessment, type RuleContext } from './risk.js';

const EDITOR_WRITES = new Set(['create', 'str_replace', 'insert', 'undo_edit']);

export function assessEditor(argumentsObject: Record<string, unknown>, context: RuleContext): RiskAssessment {
  const { command, path } = argumentsObject;
  if (
    typeof path !== 'string' ||
    path === '' ||
    typeof command !== 'string' ||
    (command !== 'view' && !EDITOR_WRITES.has(command))
  ) {
    return assessmentOf(
      [{ rule: 'invalid-arguments', words: 'str_replace_editor without a known command and a path' }],
      'unknown',
    );
  }
  const workingDir = normalizePath(context.workingDir);
  const resolved = resolvePath(path, workingDir);
  if (command === 'view') {
    return assessmentOf(
      isSecretPath(resolved, context)
        ? [{ rule: 'secret-read', words: `reads secret material (${path}) into the conversation` }]
        : [],
    );
  }
  return assessmentOf(editorWriteFindings(resolved, path, workingDir, context));
}

function editorWriteFindings(resolved: string, path: string, workingDir: string, context: RuleContext): Finding[] {
  if (
    isProtectedWritePath(resolved, context) ||
    (isStartupFile(resolved) && !isWithin(resolved, workingDir)) ||
    /^\/etc\/cron|^\/var\/spool\/cron/.test(resolved)
  ) {
    return [{ rule: 'system-write', words: `writes to a system or credential path (${path})` }];
  }
  const inside = isStrictlyWithin(resolved, workingDir);
  const relative = inside ? resolved.slice(workingDir.length) : resolved;
  const findings: Finding[] = [];
  if (/\/\.git\/hooks\/|\/\.git\/config$|\/\.github\/workflows\/|\/\.husky\//.test(relative)) {
    findings.push({ rule: 'hook-write', words: `writes a file that runs code later (${path})` });
  }
  if (!inside) findings.push({ rule: 'outside-write', words: `writes outside the working directory (${path})` });
  return findings;
}
