import { resolveSandboxPath, type LlmToolDefinition } from '@acs/core/ports';
import { z } from 'zod';
import { failure, outcome, runtimeFailure, type AgentTool, type ToolContext, type ToolOutcome } from './tool.js';

/** The largest file the editor reads (and so the most of a file it holds in memory). */
const MAX_FILE_BYTES = 10 * 1024 * 1024;
/** The most characters a view returns; the model is told how to see the rest. */
const MAX_VIEW_CHARS = 16_000;
const SNIPPET_LINES = 4;
const UNDO_DEPTH = 10;

const lineNumber = z.union([
  z.int(),
  z
    .string()
    .trim()
    .regex(/^-?\d+$/)
    .transform(Number),
]);

const EditorArguments = z.discriminatedUnion('command', [
  z.object({
    command: z.literal('view'),
    path: z.string().min(1),
    view_range: z.tuple([lineNumber, lineNumber]).optional(),
  }),
  // overwrite: internal (not offered to the model): a replayed OpenHands `write` replaces the file.
  z.object({
    command: z.literal('create'),
    path: z.string().min(1),
    file_text: z.string(),
    overwrite: z.boolean().optional(),
  }),
  z.object({
    command: z.literal('str_replace'),
    path: z.string().min(1),
    old_str: z.string().min(1),
    new_str: z.string().optional().default(''),
  }),
  z.object({
    command: z.literal('insert'),
    path: z.string().min(1),
    insert_line: lineNumber.pipe(z.int().min(0)),
    new_str: z.string(),
  }),
  z.object({ command: z.literal('undo_edit'), path: z.string().min(1) }),
]);
type EditorArgs = z.output<typeof EditorArguments>;

const decoder = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

const numbered = (lines: readonly string[], firstLine: number) =>
  lines.map((line, i) => `${String(firstLine + i).padStart(6)}\t${line}`).join('\n');

const clipView = (text: string, path: string): string =>
  text.length <= MAX_VIEW_CHARS
    ? text
    : `${text.slice(0, MAX_VIEW_CHARS)}\n[… the view was cut at ${MAX_VIEW_CHARS} characters. Find what you need with \`grep -n\` on ${path} and view that range with view_range.]`;

type Loaded = { ok: true; text: string } | { ok: false; outcome: ToolOutcome; missing: boolean };

async function load(context: ToolContext, path: string): Promise<Loaded> {
  // No more than the editor handles is read: a larger file (even of gigabytes) costs the server nothing.
  const read = await context.runtime.readFile(context.sandboxId, path, { maxBytes: MAX_FILE_BYTES });
  if (read.isErr()) {
    if (read.error.type === 'not_found') {
      return { ok: false, missing: true, outcome: failure(`${path} does not exist.`) };
    }
    if (read.error.type === 'is_directory')
      return { ok: false, missing: false, outcome: failure(`${path} is a directory; view it to see its files.`) };
    return { ok: false, missing: false, outcome: runtimeFailure(`could not read ${path}`, read.error) };
  }
  if (read.value.truncated) {
    return {
      ok: false,
      missing: false,
      outcome: failure(
        `${path} is ${read.value.size} bytes, more than the editor handles (${MAX_FILE_BYTES}); use execute_bash (sed, head, grep).`,
      ),
    };
  }
  const text = textOf(read.value.bytes);
  if (text === null)
    return {
      ok: false,
      missing: false,
      outcome: failure(`${path} is not a UTF-8 text file; inspect it with execute_bash (file, xxd).`),
    };
  return { ok: true, text };
}

/** The bytes as text, or null when they are not UTF-8 (the decoder is fatal) or hold a NUL (a binary file). */
function textOf(bytes: Uint8Array): string | null {
  let text: string;
  try {
    text = decoder.decode(bytes);
  } catch {
    return null; // TextDecoder's only way of saying "not UTF-8"
  }
  return text.includes('\u0000') ? null : text;
}

async function save(
  context: ToolContext,
  path: string,
  before: string | null,
  after: string,
): Promise<ToolOutcome | null> {
  const written = await context.runtime.writeFile(context.sandboxId, path, encoder.encode(after));
  if (written.isErr()) return runtimeFailure(`could not write ${path}`, written.error);
  if (before !== null) {
    const history = context.editHistory.get(path) ?? [];
    history.push(before);
    if (history.length > UNDO_DEPTH) history.shift();
    context.editHistory.set(path, history);
  }
  return null;
}

/** A few numbered lines around an edit, so the model can check it. */
const snippet = (text: string, fromLine: number, toLine: number): string => {
  const lines = text.split('\n');
  const start = Math.max(1, fromLine - SNIPPET_LINES);
  const end = Math.min(lines.length, toLine + SNIPPET_LINES);
  return numbered(lines.slice(start - 1, end), start);
};

async function view(
  context: ToolContext,
  path: string,
  range: readonly [number, number] | undefined,
): Promise<ToolOutcome> {
  const listing = await context.runtime.listDirectory(context.sandboxId, path);
  if (listing.isOk()) {
    if (range) return failure('view_range applies to files; this is a directory.');
    const lines: string[] = [];
    for (const entry of listing.value.filter((e) => !e.name.startsWith('.'))) {
      lines.push(entry.type === 'directory' ? `${entry.path}/` : entry.path);
      if (entry.type !== 'directory') continue;
      const inner = await context.runtime.listDirectory(context.sandboxId, entry.path);
      if (inner.isOk())
        for (const child of inner.value.filter((e) => !e.name.startsWith('.')))
          lines.push(child.type === 'directory' ? `${child.path}/` : child.path);
    }
    const body = lines.length > 0 ? lines.join('\n') : '(empty)';
    return outcome(
      clipView(`Files and directories up to 2 levels deep in ${path}, hidden ones left out:\n${body}`, path),
      { details: { path, kind: 'directory' } },
    );
  }
  const file = await load(context, path);
  if (!file.ok) return file.outcome;
  const lines = file.text.split('\n');
  if (lines.length > 1 && lines[lines.length - 1] === '') lines.pop();
  let start = 1;
  let end = lines.length;
  if (range) {
    [start, end] = range;
    if (end === -1) end = lines.length;
    if (start < 1 || start > Math.max(lines.length, 1))
      return failure(`view_range start ${start} is outside the file's lines 1–${lines.length}.`);
    if (end < start || end > lines.length)
      return failure(`view_range end ${range[1]} must be -1 or between ${start} and ${lines.length}.`);
  }
  const shown = numbered(lines.slice(start - 1, end), start);
  return outcome(clipView(`Here is the result of running \`cat -n\` on ${path}:\n${shown}`, path), {
    details: { path, kind: 'file', lines: lines.length },
  });
}

async function edit(
  context: ToolContext,
  args: Exclude<EditorArgs, { command: 'view' }>,
  path: string,
): Promise<ToolOutcome> {
  switch (args.command) {
    case 'create': {
      const existing = await load(context, path);
      if (args.overwrite === true && (existing.ok || !existing.missing)) {
        const replaced = await save(context, path, existing.ok ? existing.text : null, args.file_text);
        if (replaced) return replaced;
        return outcome(`File written successfully at: ${path} (it existed and was overwritten)`, {
          details: { path, new_content_chars: args.file_text.length, overwritten: true },
        });
      }
      if (existing.ok || !existing.missing) {
        return failure(
          `${path} already exists; change it with str_replace or insert, or remove it with execute_bash first.`,
        );
      }
      const saved = await save(context, path, null, args.file_text);
      if (saved) return saved;
      context.editHistory.set(path, []);
      return outcome(`File created successfully at: ${path}`, {
        details: { path, new_content_chars: args.file_text.length },
      });
    }
    case 'str_replace': {
      const file = await load(context, path);
      if (!file.ok) return file.outcome;
      let oldStr = args.old_str;
      let count = file.text.split(oldStr).length - 1;
      if (count === 0 && oldStr.trim() !== oldStr && oldStr.trim() !== '') {
        oldStr = oldStr.trim();
        count = file.text.split(oldStr).length - 1;
      }
      if (count === 0)
        return failure(
          `No replacement was performed: old_str does not appear verbatim in ${path}. View the file and copy the text exactly, including whitespace.`,
        );
      if (count > 1) {
        const lines: number[] = [];
        for (let at = file.text.indexOf(oldStr); at !== -1; at = file.text.indexOf(oldStr, at + 1))
          lines.push(file.text.slice(0, at).split('\n').length);
        return failure(
          `No replacement was performed: old_str appears ${count} times in ${path} (lines ${lines.join(', ')}). Include more context so it is unique.`,
        );
      }
      const at = file.text.indexOf(oldStr);
      const after = file.text.slice(0, at) + args.new_str + file.text.slice(at + oldStr.length);
      const saved = await save(context, path, file.text, after);
      if (saved) return saved;
      const firstLine = file.text.slice(0, at).split('\n').length;
      const lastLine = firstLine + args.new_str.split('\n').length - 1;
      return outcome(
        `The file ${path} has been edited. A snippet of the result:\n${snippet(after, firstLine, lastLine)}\nCheck that the change is as intended; edit again if not.`,
        {
          details: { path },
        },
      );
    }
    case 'insert': {
      const file = await load(context, path);
      if (!file.ok) return file.outcome;
      const lines = file.text.split('\n');
      const trailingNewline = file.text.endsWith('\n');
      if (trailingNewline) lines.pop();
      if (args.insert_line > lines.length)
        return failure(
          `insert_line ${args.insert_line} is past the end of ${path}, which has ${lines.length} lines (0 inserts at the top).`,
        );
      const inserted = args.new_str.replace(/\n$/, '').split('\n');
      lines.splice(args.insert_line, 0, ...inserted);
      const after = lines.join('\n') + (trailingNewline || file.text === '' ? '\n' : '');
      const saved = await save(context, path, file.text, after);
      if (saved) return saved;
      return outcome(
        `The file ${path} has been edited. A snippet of the result:\n${snippet(after, args.insert_line + 1, args.insert_line + inserted.length)}\nCheck that the change is as intended; edit again if not.`,
        { details: { path } },
      );
    }
    case 'undo_edit': {
      const history = context.editHistory.get(path);
      const previous = history?.pop();
      if (previous === undefined)
        return failure(
          `There is no edit of ${path} to undo (edit history is kept per conversation, for this service process).`,
        );
      const written = await context.runtime.writeFile(context.sandboxId, path, encoder.encode(previous));
      if (written.isErr()) return runtimeFailure(`could not write ${path}`, written.error);
      return outcome(
        `Last edit to ${path} undone. Its content is now:\n${clipView(numbered(previous.split('\n'), 1), path)}`,
        { details: { path } },
      );
    }
  }
}

/** The editor's definition; `example` is the path its words give as an example, if any. */
function editorDefinition(example: string | null): LlmToolDefinition {
  return {
    name: 'str_replace_editor',
    description: [
      'View, create and edit files in the sandbox.',
      '* `view` a file shows it with line numbers (`cat -n`); a directory lists what is up to 2 levels deep.',
      '* `create` writes a new file; it fails if the path exists.',
      '* `str_replace` replaces old_str, which must match exactly one place in the file (whitespace included), by new_str.',
      '* `insert` adds new_str after line insert_line (0 = at the top).',
      '* `undo_edit` reverts the last edit of the file.',
      'Paths are absolute; a relative path is taken from the working directory.',
    ].join('\n'),
    parameters: {
      type: 'object',
      properties: {
        command: {
          type: 'string',
          enum: ['view', 'create', 'str_replace', 'insert', 'undo_edit'],
          description: 'What to do.',
        },
        path: {
          type: 'string',
          description: `Absolute path of the file or directory${example ? `, e.g. ${example}` : ''}.`,
        },
        file_text: { type: 'string', description: 'create: the content of the new file.' },
        old_str: { type: 'string', description: 'str_replace: the exact text to replace.' },
        new_str: {
          type: 'string',
          description: 'str_replace: the replacement (empty deletes old_str). insert: the text to insert.',
        },
        insert_line: { type: 'integer', description: 'insert: new_str goes after this line.' },
        view_range: {
          type: 'array',
          items: { type: 'integer' },
          description: 'view of a file: [first, last] line, 1-based; last -1 means to the end.',
        },
      },
      required: ['command', 'path'],
    },
  };
}

export const strReplaceEditorTool: AgentTool<typeof EditorArguments> = {
  definition: editorDefinition(null),
  definitionIn: (workingDir) => editorDefinition(`${workingDir.replace(/\/+$/, '')}/main.py`),
  arguments: EditorArguments,
  async run(args, context) {
    const path = resolveSandboxPath(context.workingDir, args.path);
    if (!path) return failure(`${JSON.stringify(args.path)} is not a usable path.`);
    if (args.command === 'view') return view(context, path, args.view_range);
    return edit(context, args, path);
  },
};
