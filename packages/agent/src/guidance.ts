/**
 * Repository guidance: what a repository tells agents about itself. Always-on instructions
 * (`AGENTS.md`, `.openhands/microagents/repo.md`, microagents without triggers) go into the
 * system prompt; knowledge files (`.openhands/microagents/*.md` with `triggers:` in their
 * front matter) are added to the user message whose words match one of their triggers.
 */
import type { KnowledgeFile } from '@acs/core/ports';

/** The most characters kept of one guidance file (the rest is cut with a note). */
const MAX_GUIDANCE_FILE_CHARS = 20_000;
/** The most guidance files read from `.openhands/microagents/`. */
export const MAX_MICROAGENT_FILES = 50;

export interface FrontMatter {
  name: string | null;
  type: string | null;
  triggers: string[];
  body: string;
}

const unquote = (value: string): string => {
  const v = value.trim();
  return (v.startsWith('"') && v.endsWith('"')) || (v.startsWith("'") && v.endsWith("'")) ? v.slice(1, -1) : v;
};

/**
 * Reads the small YAML subset microagent files use: `name:`, `type:` and `triggers:` as an
 * inline list (`[a, b]`) or a block list (`- a`). Files without front matter are all body.
 */
export function parseFrontMatter(text: string): FrontMatter {
  const normalized = text.replace(/^\uFEFF/, '').replace(/\r\n/g, '\n');
  const match = /^---\n([\s\S]*?)\n---[ \t]*(?:\n|$)/.exec(normalized);
  if (!match) return { name: null, type: null, triggers: [], body: normalized };
  const lines = match[1]!.split('\n');
  let name: string | null = null;
  let type: string | null = null;
  const triggers: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const field = /^([A-Za-z_]+):\s*(.*)$/.exec(line);
    if (!field) continue;
    const [, key, rest] = field as unknown as [string, string, string];
    if (key === 'name') name = unquote(rest) || null;
    else if (key === 'type') type = unquote(rest) || null;
    else if (key === 'triggers') {
      if (rest.trim().startsWith('[')) {
        triggers.push(...rest.trim().replace(/^\[/, '').replace(/\]$/, '').split(',').map(unquote));
      } else if (rest.trim() !== '') {
        triggers.push(unquote(rest));
      } else {
        while (i + 1 < lines.length && /^\s*-\s+/.test(lines[i + 1]!))
          triggers.push(unquote(lines[++i]!.replace(/^\s*-\s+/, '')));
      }
    }
  }
  return {
    name,
    type,
    triggers: [...new Set(triggers.map((t) => t.trim().toLowerCase()).filter((t) => t !== ''))],
    body: normalized.slice(match[0].length),
  };
}

/** Keeps a guidance file to a size the prompt can afford. */
export function clipGuidance(text: string, max = MAX_GUIDANCE_FILE_CHARS): string {
  return text.length <= max
    ? text
    : `${text.slice(0, max)}\n[… cut: the file has ${text.length} characters; read it in the repository for the rest]`;
}

const escapeRegExp = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Whether a message mentions a trigger: case-insensitive, as whole words (a trigger `git` does not match `github`). */
export function mentionsTrigger(text: string, trigger: string): boolean {
  if (!trigger) return false;
  return new RegExp(`(^|[^\\p{L}\\p{N}_])${escapeRegExp(trigger)}($|[^\\p{L}\\p{N}_])`, 'iu').test(text);
}

/** The knowledge files a message triggers, each at most once per conversation (`seen` is updated). */
export function triggeredKnowledge(
  text: string,
  knowledge: readonly KnowledgeFile[],
  seen: Set<string>,
): { file: KnowledgeFile; trigger: string }[] {
  const matched: { file: KnowledgeFile; trigger: string }[] = [];
  for (const file of knowledge) {
    if (seen.has(file.path)) continue;
    const trigger = file.triggers.find((t) => mentionsTrigger(text, t));
    if (trigger === undefined) continue;
    seen.add(file.path);
    matched.push({ file, trigger });
  }
  return matched;
}
