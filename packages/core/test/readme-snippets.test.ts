/**
 * Every TypeScript block in the READMEs (the root's, the packages' and the examples') and in the
 * pages of docs/ compiles against the workspace
 * sources, as `npm run typecheck` compiles the code: the options of the root tsconfig.json, so
 * `@acs/*` imports resolve through the npm workspace links in node_modules to each package's
 * `exports`, with the `@acs/source` condition picking `src/` (no build needed).
 *
 * One program for all blocks; each block is its own ES module, a file that exists only in memory
 * next to its document (so the package's package.json and node_modules apply to it).
 *
 * A block that uses something the reader's program already has (their store, their session
 * lookup) may declare it in an HTML comment right above the fence, which GitHub does not show:
 *
 *     <!-- snippet-context: declare const storage: import('@acs/adapter-postgres').PostgresStorage; -->
 *     ```ts
 *
 * Only `declare` statements are accepted there, so the context can name things, never run code.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { beforeAll, describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../../', import.meta.url));

/** Fence languages compiled here. */
const TYPESCRIPT = new Set(['ts', 'typescript']);
/** Fence languages that are not TypeScript; any other language fails the test rather than being skipped. */
const NOT_TYPESCRIPT = new Set([
  'sh',
  'bash',
  'shell',
  'console',
  'text',
  'json',
  'jsonc',
  'yaml',
  'mermaid',
  'http',
  'diff',
  'python',
]);

const CONTEXT = /^<!--\s*snippet-context:([\s\S]*?)-->$/;

interface Snippet {
  /** The README, relative to the repository root. */
  readme: string;
  /** 1-based line of the opening fence in the README. */
  fenceLine: number;
  code: string;
  /** `declare` statements from a snippet-context comment, prepended to the code. */
  context: string;
  /** 1-based line of the snippet-context comment. */
  contextLine: number | null;
  /** The in-memory module file compiled for this block. */
  fileName: string;
}

function readmes(): string[] {
  return [
    join(root, 'README.md'),
    ...['packages', 'examples'].flatMap((group) =>
      readdirSync(join(root, group))
        .map((name) => join(root, group, name, 'README.md'))
        .filter((path) => statSync(path, { throwIfNoEntry: false })?.isFile() ?? false)
        .sort(),
    ),
    ...docsPages(),
  ];
}

/** The pages of docs/, its folders included: what moved out of the root README is held to the same check. */
function docsPages(): string[] {
  return readdirSync(join(root, 'docs'), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.md'))
    .map((name) => join(root, 'docs', name))
    .sort();
}

/** The fenced blocks of a README; throws on an unclosed fence or a language this test does not know. */
function extract(path: string): Snippet[] {
  const readme = relative(root, path);
  const lines = readFileSync(path, 'utf8').split(/\r?\n/);
  const snippets: Snippet[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[i] ?? '');
    if (!open) continue;
    const [, fence = '', info = ''] = open;
    const language = info.toLowerCase();
    const start = i;
    const body: string[] = [];
    for (i++; i < lines.length; i++) {
      const line = lines[i] ?? '';
      if (line.trimStart().startsWith(fence) && line.trim().replaceAll(fence[0] ?? '`', '') === '') break;
      body.push(line);
    }
    if (i >= lines.length) throw new Error(`${readme}:${start + 1}: the code block opened here is never closed`);
    if (NOT_TYPESCRIPT.has(language)) continue;
    if (!TYPESCRIPT.has(language)) {
      throw new Error(
        `${readme}:${start + 1}: code block in language "${info}": tag it \`ts\` to have it compiled, or add the language to NOT_TYPESCRIPT in ${relative(root, fileURLToPath(import.meta.url))}`,
      );
    }
    const { context, contextLine } = contextAbove(lines, start, readme);
    snippets.push({
      readme,
      fenceLine: start + 1,
      code: body.join('\n'),
      context,
      contextLine,
      fileName: resolve(path, '..', `${basename(path)}.line-${start + 1}.snippet.ts`),
    });
  }
  return snippets;
}

/** The snippet-context comment ending on the line right above the fence, if any. */
function contextAbove(lines: string[], fence: number, readme: string): { context: string; contextLine: number | null } {
  const above = (lines[fence - 1] ?? '').trim();
  if (!above.endsWith('-->')) return { context: '', contextLine: null };
  let first = fence - 1;
  while (first > 0 && !(lines[first] ?? '').trimStart().startsWith('<!--')) first--;
  const match = CONTEXT.exec(lines.slice(first, fence).join('\n').trim());
  if (!match) return { context: '', contextLine: null };
  const context = (match[1] ?? '').trim();
  const parsed = ts.createSourceFile('context.ts', context, ts.ScriptTarget.Latest, false, ts.ScriptKind.TS);
  for (const statement of parsed.statements) {
    const declared =
      ts.canHaveModifiers(statement) &&
      (ts.getModifiers(statement) ?? []).some((m) => m.kind === ts.SyntaxKind.DeclareKeyword);
    if (!declared) {
      throw new Error(
        `${readme}:${first + 1}: a snippet-context may only hold \`declare\` statements, not \`${statement.getText(parsed)}\``,
      );
    }
  }
  return { context, contextLine: first + 1 };
}

/** The repository's compiler options (tsconfig.json), for modules that exist only in memory. */
function compilerOptions(): ts.CompilerOptions {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error('cannot read tsconfig.json');
  return { ...parsed.options, noEmit: true, moduleDetection: ts.ModuleDetectionKind.Force };
}

interface Failure {
  snippet: Snippet;
  text: string;
}

/** Compiles every snippet in one program; returns the problems, each located in its README. */
function compile(snippets: Snippet[]): { failures: Failure[]; global: string[] } {
  const options = compilerOptions();
  const sources = new Map(snippets.map((s) => [s.fileName, s.context ? `${s.context}\n${s.code}` : s.code]));
  const disk = ts.createCompilerHost(options, true);
  const host: ts.CompilerHost = {
    ...disk,
    fileExists: (name) => sources.has(name) || disk.fileExists(name),
    readFile: (name) => sources.get(name) ?? disk.readFile(name),
    getSourceFile: (name, language, onError, fresh) => {
      const text = sources.get(name);
      return text === undefined
        ? disk.getSourceFile(name, language, onError, fresh)
        : ts.createSourceFile(name, text, language, true);
    },
  };
  const program = ts.createProgram({ rootNames: [...sources.keys()], options, host });
  const format = (d: ts.Diagnostic) => `TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  const failures: Failure[] = [];
  for (const snippet of snippets) {
    const file = program.getSourceFile(snippet.fileName);
    if (!file) {
      failures.push({ snippet, text: `${snippet.readme}:${snippet.fenceLine}: the block was not compiled` });
      continue;
    }
    const contextLines = snippet.context ? snippet.context.split('\n').length : 0;
    for (const d of [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]) {
      const { line, character } = file.getLineAndCharacterOfPosition(d.start ?? 0);
      const where =
        line < contextLines
          ? `${snippet.readme}:${snippet.contextLine} (snippet-context of the block at line ${snippet.fenceLine})`
          : `${snippet.readme}:${snippet.fenceLine + 1 + line - contextLines}:${character + 1} (block at line ${snippet.fenceLine})`;
      failures.push({ snippet, text: `${where}: ${format(d)}` });
    }
  }
  const global = [...program.getOptionsDiagnostics(), ...program.getGlobalDiagnostics()].map(format);
  return { failures, global };
}

const files = readmes();
const snippetsByReadme = new Map(files.map((path) => [relative(root, path), extract(path)]));
const allSnippets = [...snippetsByReadme.values()].flat();
let result: ReturnType<typeof compile>;

beforeAll(() => {
  result = compile(allSnippets);
}, 120_000);

describe('README code blocks', () => {
  it('finds a README in every package and example', () => {
    expect(files.length).toBeGreaterThanOrEqual(9);
  });

  it('compiles with the repository options, without global errors', () => {
    expect(result.global).toEqual([]);
  });

  it.each([...snippetsByReadme.keys()])('%s: every TypeScript block compiles', (readme) => {
    const snippets = snippetsByReadme.get(readme) ?? [];
    // Every package README shows its use in code: finding no block means the extraction broke.
    if (readme.startsWith('packages/') || readme === 'README.md')
      expect(snippets.length, `${readme}: no \`\`\`ts block found`).toBeGreaterThan(0);
    const problems = result.failures.filter((f) => f.snippet.readme === readme).map((f) => f.text);
    expect(problems, `${readme}: a code block does not compile:\n${problems.join('\n')}`).toEqual([]);
  });
});
