/**
 * The console's event views (app/src/events/event-view.tsx) rendered by Preact in a real browser
 * (Debian's Chromium through playwright-core, as the example server's console tests run): the
 * component is bundled by Vite with the app's JSX settings into a page of its own, and given
 * events directly, so each kind and each tool's view is checked without a server. What the
 * console does with a live server is the example server's tests' (console-events.test.ts).
 */
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { build, type Rolldown } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONVERSATION_EVENT_KINDS } from '../src/api-schema.js';
import type { components } from '../src/client.js';

type ConversationEvent = components['schemas']['ConversationEvent'];

const eventView = fileURLToPath(new URL('../app/src/events/event-view.tsx', import.meta.url));
const liveText = fileURLToPath(new URL('../app/src/events/live-text.ts', import.meta.url));

/**
 * The page's script: Preact renders the entries of the events it is given into #app; or, as the
 * live stream does, of the events and pieces of an answer applied one by one (`live.*`).
 */
const HARNESS = `
import { h, render } from 'preact';
import { entriesOf, entriesWithLiveText, EntryView } from ${JSON.stringify(eventView)};
import { NO_LIVE_TEXT, withDelta, withStoredEvent, withoutWriting } from ${JSON.stringify(liveText)};
const draw = (entries) => render(h('div', { class: 'story' }, entries.map((entry) => h(EntryView, { key: entry.key, entry }))), document.getElementById('app'));
window.renderEvents = (events) => draw(entriesOf(events));
const stream = { events: [], live: NO_LIVE_TEXT };
const redraw = () => draw(entriesWithLiveText(entriesOf(stream.events), stream.live));
window.live = {
  reset: () => { stream.events = []; stream.live = NO_LIVE_TEXT; redraw(); },
  delta: (d) => { stream.live = withDelta(stream.live, d, stream.events.at(-1)?.id ?? 0); redraw(); },
  event: (e) => { stream.events = stream.events.concat([e]); stream.live = withStoredEvent(stream.live, e); redraw(); },
  reconnect: () => { stream.live = withoutWriting(stream.live); redraw(); },
};
`;

async function bundleHarness(): Promise<string> {
  const output = (await build({
    configFile: false,
    logLevel: 'silent',
    root: fileURLToPath(new URL('..', import.meta.url)),
    oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
    plugins: [
      {
        name: 'harness',
        resolveId: (id) => (id === 'virtual:harness' ? '\0harness' : null),
        load: (id) => (id === '\0harness' ? HARNESS : null),
      },
    ],
    build: { write: false, minify: false, rollupOptions: { input: 'virtual:harness', output: { format: 'iife' } } },
  })) as Rolldown.RolldownOutput | Rolldown.RolldownOutput[];
  const chunk = (Array.isArray(output) ? output : [output]).flatMap((o) => o.output).find((o) => o.type === 'chunk');
  if (!chunk || chunk.type !== 'chunk') throw new Error('Vite built no script for the event views');
  return chunk.code;
}

let browser: Browser | undefined;
let page: Page;

beforeAll(async () => {
  const script = await bundleHarness();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
  page = await browser.newPage();
  await page.setContent('<!doctype html><meta name="acs-api-base" content=""><div id="app"></div>');
  await page.addScriptTag({ content: script });
}, 120_000);

afterAll(async () => {
  await browser?.close();
});

const at = (second: number) => new Date(Date.UTC(2026, 10, 25, 9, 0, second)).toISOString();
let nextId = 1;
const stamp = <E extends Omit<ConversationEvent, 'id' | 'timestamp'>>(event: E, second = 0) =>
  ({ ...event, id: nextId++, timestamp: at(second) }) as unknown as ConversationEvent;

/** Renders the entries of these events into the page, in place of what it showed. */
async function show(events: ConversationEvent[]): Promise<void> {
  await page.evaluate(
    (list) => (globalThis as unknown as { renderEvents(events: unknown[]): void }).renderEvents(list),
    events,
  );
}
const text = (selector: string) => page.locator(selector).allInnerTexts();

const action = (
  tool_call_id: string,
  tool_name: string,
  args: Record<string, unknown>,
  second = 0,
  thought: string | null = null,
) =>
  stamp(
    {
      kind: 'action',
      source: 'agent',
      tool_call_id,
      tool_name,
      arguments: args,
      raw_arguments: JSON.stringify(args),
      thought,
      response_id: 'r',
    },
    second,
  );
const observation = (
  tool_call_id: string,
  tool_name: string,
  content: string,
  extra: { exit_code?: number | null; is_error?: boolean } = {},
  second = 0,
) =>
  stamp(
    {
      kind: 'observation',
      source: 'environment',
      tool_call_id,
      tool_name,
      content,
      is_error: extra.is_error ?? false,
      exit_code: extra.exit_code ?? null,
      details: {},
    },
    second,
  );

/** One event of each kind (an action with its observation counting as one entry). */
const ONE_OF_EACH: Record<ConversationEvent['kind'], () => ConversationEvent[]> = {
  message: () => [
    stamp({ kind: 'message', source: 'user', text: 'Make the parser **trim** its fields', image_urls: [] }),
  ],
  action: () => [action('k1', 'execute_bash', { command: 'ls' })],
  observation: () => [observation('k-orphan', 'execute_bash', 'an answer to no action')],
  llm_call: () => [
    stamp({
      kind: 'llm_call',
      source: 'environment',
      response_id: 'r',
      model: 'm',
      prompt_tokens: 1,
      completion_tokens: 1,
      cached_prompt_tokens: 0,
      cost_usd: null,
      latency_ms: 1,
      attempts: 1,
    }),
  ],
  status: () => [
    stamp({
      kind: 'status',
      source: 'environment',
      execution_status: 'waiting_for_confirmation',
      reason: 'a risky command',
    }),
  ],
  error: () => [
    stamp({
      kind: 'error',
      source: 'environment',
      code: 'llm_auth_failed',
      message: 'The key was refused.',
      fatal: true,
    }),
  ],
  setup: () => [
    stamp({
      kind: 'setup',
      source: 'environment',
      step: 'setup_script',
      summary: 'ran .openhands/setup.sh',
      output: 'npm ERR! missing script',
      exit_code: 1,
      timed_out: false,
      duration_ms: 1500,
    }),
  ],
  confirmation: () => [
    stamp({ kind: 'confirmation', source: 'user', accept: false, reason: 'not on main', tool_call_ids: ['k1', 'k2'] }),
  ],
  condensation: () => [
    stamp({
      kind: 'condensation',
      source: 'environment',
      summary: 'USER_CONTEXT: *trim* fields',
      kept_head_through: 2,
      forgotten_through: 40,
      forgotten_events: 38,
      reason: 'too many events',
    }),
  ],
};

describe('the event views', () => {
  it('draw an entry for every kind of event but the model calls (shown in the header)', async () => {
    for (const kind of CONVERSATION_EVENT_KINDS) {
      await show(ONE_OF_EACH[kind]());
      const entries = await page.locator('.story > *').count();
      expect(entries, kind).toBe(kind === 'llm_call' ? 0 : 1);
    }
  });

  it('draw messages as sanitised markdown, by who wrote them', async () => {
    await show([
      stamp({
        kind: 'message',
        source: 'user',
        text: 'Make the parser **trim** its fields <img src=x onerror="window.pwned=1"><script>window.pwned=2</script>',
        image_urls: [],
      }),
      stamp({
        kind: 'message',
        source: 'agent',
        text: 'Done: `trim()` added.',
        image_urls: ['data:image/png;base64,iVBORw0KGgo=', 'https://example.com/a.png'],
      }),
      stamp({ kind: 'message', source: 'environment', text: 'You repeated the same command.', image_urls: [] }),
    ]);
    expect(await text('article.message > header')).toEqual(['You', 'Agent', 'Service note']);
    expect(await page.locator('article.message.user .markdown strong').innerText()).toBe('trim');
    expect(await page.locator('article.message.agent .markdown code').innerText()).toBe('trim()');
    expect(await page.locator('article.message.agent .images img').count()).toBe(1);
    expect(await page.locator('article.message.agent .images a').getAttribute('rel')).toBe('noopener noreferrer');
    // DOMPurify took out the handler and the script.
    expect(await page.locator('[onerror]').count()).toBe(0);
    expect(await page.locator('.story script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as unknown as { pwned?: number }).pwned)).toBeUndefined();
  });

  it('draw a command with its observation as one entry: highlighted command, exit code, duration, output', async () => {
    await show([
      action('c1', 'execute_bash', { command: 'npm test' }, 5),
      observation('c1', 'execute_bash', 'FAIL parser.test.ts', { exit_code: 1 }, 7),
    ]);
    expect(await page.locator('.story > *').count()).toBe(1);
    const command = page.locator('article.command');
    expect(await command.locator('.command-line code').innerText()).toBe('npm test');
    expect(await command.locator('.command-line .hljs-built_in, .command-line span').count()).toBeGreaterThan(0);
    expect(await command.locator('header .badge').innerText()).toBe('exit 1: error');
    expect(await command.locator('.duration').innerText()).toBe('2.0 s');
    expect(await command.locator('pre.output').innerText()).toBe('FAIL parser.test.ts');
    // Still running: no observation yet.
    await show([action('c2', 'execute_bash', { command: 'sleep 100' })]);
    expect(await page.locator('article.command .running').innerText()).toBe('running…');
  });

  it('draw file edits as diffs: a replacement, a creation, and a read with its output folded', async () => {
    await show([
      action(
        'e1',
        'str_replace_editor',
        {
          command: 'str_replace',
          path: 'src/parser.ts',
          old_str: "return input.split(',');",
          new_str: "return input.split(',').map(trim);",
        },
        0,
        'Trim each field.',
      ),
      observation('e1', 'str_replace_editor', 'The file was edited.'),
      action('e2', 'str_replace_editor', {
        command: 'create',
        path: 'src/trim.ts',
        file_text: 'export const trim = (s: string) => s.trim();\n',
      }),
      action('e3', 'str_replace_editor', { command: 'view', path: 'README.md' }),
      observation('e3', 'str_replace_editor', '# The project'),
    ]);
    expect(await text('article.edit header .tool')).toEqual(['Edit', 'Create', 'Read']);
    expect(await text('article.edit header code')).toEqual(['src/parser.ts', 'src/trim.ts', 'README.md']);
    const replaced = page.locator('article.edit').nth(0);
    expect(await replaced.locator('.thought').innerText()).toBe('Trim each field.');
    expect(await replaced.locator('.diff-line.removed code').allInnerTexts()).toEqual(["return input.split(',');"]);
    expect(await replaced.locator('.diff-line.added code').allInnerTexts()).toEqual([
      "return input.split(',').map(trim);",
    ]);
    expect(await page.locator('article.edit').nth(1).locator('.diff-line.added').count()).toBe(1);
    const read = page.locator('article.edit').nth(2);
    expect(await read.locator('details.output-details summary').innerText()).toBe('Output (13 characters)');
  });

  it('draw thoughts, the finish message, other tools with their arguments, and an observation whose action is not in the log', async () => {
    await show([
      action('t1', 'think', { thought: 'The split keeps the **spaces**.' }),
      observation('t1', 'think', 'Your thought has been logged.'),
      action('m1', 'fetch_page', { url: 'https://example.com' }),
      observation('m1', 'fetch_page', '<html>…</html>'),
      action('f1', 'finish', { message: 'Fields are **trimmed** now.' }),
      observation('o1', 'execute_bash', 'output of an earlier run'),
    ]);
    expect(await page.locator('article.think .markdown strong').innerText()).toBe('spaces');
    expect(await page.locator('article.tool-call header .tool').innerText()).toBe('fetch_page');
    expect(JSON.parse(await page.locator('article.tool-call pre.code').first().innerText())).toEqual({
      url: 'https://example.com',
    });
    expect(await page.locator('article.finish header').innerText()).toBe('Agent · finished');
    expect(await page.locator('article.finish .markdown strong').innerText()).toBe('trimmed');
    expect(await page.locator('.story > pre.output').innerText()).toBe('output of an earlier run');
  });

  it('draw status changes, errors and warnings, setup steps, decisions and condensations', async () => {
    await show([
      ...ONE_OF_EACH.status(),
      ...ONE_OF_EACH.error(),
      stamp({
        kind: 'error',
        source: 'environment',
        code: 'mcp_server_failed',
        message: 'The docs server did not answer.',
        fatal: false,
      }),
      ...ONE_OF_EACH.setup(),
      ...ONE_OF_EACH.confirmation(),
      stamp({ kind: 'confirmation', source: 'user', accept: true, reason: null, tool_call_ids: ['k3'] }),
      ...ONE_OF_EACH.condensation(),
    ]);
    expect(await page.locator('.event.status').innerText()).toBe('Agent waiting for confirmation a risky command');
    expect(await text('.event.error strong')).toEqual(['Stopped: llm auth failed', 'Warning: mcp server failed']);
    expect(await page.locator('.event.error.fatal').getAttribute('role')).toBe('alert');
    expect(await page.locator('details.setup summary').innerText()).toBe(
      'Setup script: ran .openhands/setup.sh (1.5 s)exit 1: error',
    );
    // Folded (a closed <details>): there, but not shown until opened.
    expect(await page.locator('details.setup pre.code').textContent()).toBe('npm ERR! missing script');
    expect(await text('.event.confirmation')).toEqual([
      'You rejected 2 waiting actions: not on main',
      'You accepted the waiting action.',
    ]);
    expect(await page.locator('details.condensation summary').innerText()).toBe(
      '38 older events were summarised for the model (too many events)',
    );
    expect(await page.locator('details.condensation .markdown em').textContent()).toBe('trim');
  });

  it('draw the answer being written as the agent message it becomes, updated in place by the stored message', async () => {
    type Live = { live: Record<'reset' | 'reconnect', () => void> & Record<'delta' | 'event', (x: unknown) => void> };
    const live = (what: 'reset' | 'reconnect' | 'delta' | 'event', arg?: unknown) =>
      page.evaluate(([w, a]) => (globalThis as unknown as Live).live[w as 'delta'](a), [what, arg] as const);
    const delta = (content: string | null, reasoning: string | null = null, attempt = 1) =>
      live('delta', {
        kind: 'delta',
        message_id: 'm1',
        attempt,
        content,
        reasoning_content: reasoning,
        timestamp: at(1),
      });
    await live('reset');
    await live('event', stamp({ kind: 'message', source: 'user', text: 'Say hello', image_urls: [] }));
    await delta(null, 'A greeting, in **bold**.');
    await delta('Hello, ');
    await delta('**world**');
    const bubble = page.locator('article.message.agent');
    expect(await bubble.locator('header .writing').innerText()).toBe('writing…');
    expect(await bubble.getAttribute('aria-busy')).toBe('true');
    expect(await bubble.getAttribute('data-event-id')).toBeNull();
    expect(await bubble.locator('.markdown').innerText()).toBe('Hello, world');
    expect(await bubble.locator('.markdown strong').innerText()).toBe('world');
    // The reasoning: folded, as text (not markdown).
    expect(await bubble.locator('details.reasoning').getAttribute('open')).toBeNull();
    expect(await bubble.locator('details.reasoning .reasoning-text').textContent()).toBe('A greeting, in **bold**.');
    // A newer attempt starts afresh.
    await delta('Hello again, ', null, 2);
    await delta('**world**', null, 2);
    expect(await bubble.locator('.markdown').innerText()).toBe('Hello again, world');
    expect(await bubble.locator('details.reasoning').count()).toBe(0);

    // The stored answer: the same element, its marker gone, its text unchanged.
    await bubble.evaluate((el) => ((el as unknown as { dataset: Record<string, string> }).dataset['mark'] = 'kept'));
    await live(
      'event',
      stamp({
        kind: 'llm_call',
        source: 'environment',
        response_id: 'r',
        model: 'm',
        prompt_tokens: 1,
        completion_tokens: 1,
        cached_prompt_tokens: 0,
        cost_usd: null,
        latency_ms: 1,
        attempts: 2,
      }),
    );
    expect(await bubble.locator('header .writing').count()).toBe(1);
    const final = stamp({ kind: 'message', source: 'agent', text: 'Hello again, **world**', image_urls: [] });
    await live('event', final);
    expect(await page.locator('article.message.agent').count()).toBe(1);
    expect(await bubble.getAttribute('data-mark')).toBe('kept');
    expect(await bubble.getAttribute('data-event-id')).toBe(String(final.id));
    expect(await bubble.getAttribute('aria-busy')).toBeNull();
    expect(await bubble.locator('header').innerText()).toBe('Agent');
    expect(await bubble.locator('.markdown').innerText()).toBe('Hello again, world');

    // A reconnect drops what was being written.
    await live('delta', {
      kind: 'delta',
      message_id: 'm2',
      attempt: 1,
      content: 'Half an ans',
      reasoning_content: null,
      timestamp: at(2),
    });
    expect(await page.locator('article.message.agent').count()).toBe(2);
    await live('reconnect');
    expect(await page.locator('article.message.agent').count()).toBe(1);
  });
});
