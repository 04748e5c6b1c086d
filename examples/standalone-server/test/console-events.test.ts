/**
 * Every kind of event the console draws, in a real browser (Debian's Chromium): thoughts, file
 * edits as diffs (created and replaced), a failed command with its exit code and output, tool
 * errors, warnings and fatal errors, condensation summaries, cost and tokens so far. The log is
 * written directly (as an agent would have written it), so each kind is there for certain; the
 * scenario tests (console.test.ts, console-docker.test.ts) show the live flow.
 */
import { once } from 'node:events';
import type { Server } from 'node:http';
import { join } from 'node:path';
import express from 'express';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgentConversationService, type AgentConversationService } from '@acs/core';
import { toNewEvent, type ConversationEventDraft } from '@acs/core/schemas';
import { createAgent } from '@acs/agent';
import { createAcsRouter } from '@acs/adapter-express';
import { createMemoryPorts } from '@acs/testing';
import { createWebConsole } from '@acs/web-console';
import { SCREENSHOTS } from './console-scenario.js';

const KEY = 'console-events-key-0123456789abcdef';
const USER = 'alice';
const DEADLINE_MS = 60_000;

let browser: Browser | undefined;
let server: Server | undefined;
let service: AgentConversationService | undefined;
let ports: ReturnType<typeof createMemoryPorts>;
let base = '';

beforeAll(async () => {
  ports = createMemoryPorts();
  service = createAgentConversationService({ ...ports, agent: createAgent() });
  const app = express();
  app.use(createAcsRouter(service, { apiKeys: { [KEY]: USER } }));
  app.use('/console', createWebConsole());
  server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (!address || typeof address === 'string') throw new Error('the test server has no port');
  base = `http://127.0.0.1:${address.port}`;
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  server?.close();
  await service?.close();
});

const at = (second: number) => new Date(Date.UTC(2026, 10, 25, 9, 0, second)).toISOString();

/** A conversation whose log holds one of each kind of event, after what its start wrote. */
async function conversationWithEveryKind(): Promise<string> {
  await service!.settings.store(USER, { llm_model: 'openai/scripted', llm_api_key: 'sk-test' });
  const created = await service!.conversations.create(USER, { initial_user_msg: 'Make the parser trim its fields' });
  if (created.isErr()) throw new Error(`could not start the conversation: ${created.error.type}`);
  await service!.idle();
  const id = created.value.conversation_id;
  const drafts: ConversationEventDraft[] = [
    {
      kind: 'action',
      source: 'agent',
      timestamp: at(1),
      tool_call_id: 't1',
      tool_name: 'think',
      arguments: { thought: 'The split keeps the **spaces**; trimming each field fixes it.' },
      raw_arguments: '{}',
      thought: null,
      response_id: 'r1',
    },
    {
      kind: 'observation',
      source: 'environment',
      timestamp: at(1),
      tool_call_id: 't1',
      tool_name: 'think',
      content: 'Your thought has been logged.',
      is_error: false,
      exit_code: null,
      details: {},
    },
    {
      kind: 'llm_call',
      source: 'environment',
      timestamp: at(2),
      response_id: 'r1',
      model: 'scripted',
      prompt_tokens: 1_234,
      completion_tokens: 56,
      cached_prompt_tokens: 0,
      cost_usd: 0.0123,
      latency_ms: 800,
      attempts: 1,
    },
    {
      kind: 'action',
      source: 'agent',
      timestamp: at(3),
      tool_call_id: 'e1',
      tool_name: 'str_replace_editor',
      arguments: {
        command: 'create',
        path: 'src/trim.ts',
        file_text: 'export const trim = (s: string) => s.trim();\n',
      },
      raw_arguments: '{}',
      thought: 'A helper first.',
      response_id: 'r2',
    },
    {
      kind: 'observation',
      source: 'environment',
      timestamp: at(3),
      tool_call_id: 'e1',
      tool_name: 'str_replace_editor',
      content: 'File created.',
      is_error: false,
      exit_code: null,
      details: {},
    },
    {
      kind: 'action',
      source: 'agent',
      timestamp: at(4),
      tool_call_id: 'e2',
      tool_name: 'str_replace_editor',
      arguments: {
        command: 'str_replace',
        path: 'src/parser.ts',
        old_str: "return input.split(',');",
        new_str: "return input.split(',').map(trim);",
      },
      raw_arguments: '{}',
      thought: null,
      response_id: 'r3',
    },
    {
      kind: 'observation',
      source: 'environment',
      timestamp: at(4),
      tool_call_id: 'e2',
      tool_name: 'str_replace_editor',
      content: 'The file was edited.',
      is_error: false,
      exit_code: null,
      details: {},
    },
    {
      kind: 'action',
      source: 'agent',
      timestamp: at(5),
      tool_call_id: 'c1',
      tool_name: 'execute_bash',
      arguments: { command: 'npm test' },
      raw_arguments: '{}',
      thought: null,
      response_id: 'r4',
    },
    {
      kind: 'observation',
      source: 'environment',
      timestamp: at(7),
      tool_call_id: 'c1',
      tool_name: 'execute_bash',
      content: 'FAIL parser.test.ts\n  expected "a" got " a"',
      is_error: false,
      exit_code: 1,
      details: {},
    },
    {
      kind: 'action',
      source: 'agent',
      timestamp: at(8),
      tool_call_id: 'e3',
      tool_name: 'str_replace_editor',
      arguments: { command: 'str_replace', path: 'src/missing.ts', old_str: 'x', new_str: 'y' },
      raw_arguments: '{}',
      thought: null,
      response_id: 'r5',
    },
    {
      kind: 'observation',
      source: 'environment',
      timestamp: at(8),
      tool_call_id: 'e3',
      tool_name: 'str_replace_editor',
      content: 'ERROR: src/missing.ts does not exist',
      is_error: true,
      exit_code: null,
      details: {},
    },
    {
      kind: 'condensation',
      source: 'environment',
      timestamp: at(9),
      summary: 'The user wants **trimmed** fields; a helper exists.',
      kept_head_through: 1,
      forgotten_through: 8,
      forgotten_events: 7,
      reason: 'too many events',
    },
    {
      kind: 'error',
      source: 'environment',
      timestamp: at(10),
      code: 'llm_rate_limited',
      message: 'The model asked us to slow down; retrying.',
      fatal: false,
    },
    {
      kind: 'error',
      source: 'environment',
      timestamp: at(11),
      code: 'llm_auth_failed',
      message: 'The model refused the API key.',
      fatal: true,
    },
  ];
  const stored = await ports.events.append(USER, id, drafts.map(toNewEvent));
  if (stored.isErr()) throw new Error(`could not write the log: ${stored.error.type}`);
  return id;
}

async function shoot(page: Page, name: string) {
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-1280.png`), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-390.png`), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
}

describe('the web console draws every kind of event', () => {
  it('thoughts, diffs, a failed command, tool errors, a condensation summary, warnings and fatal errors, tokens and cost', async () => {
    const id = await conversationWithEveryKind();
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const page = await context.newPage();
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${base}/console/?key=${KEY}`);
      await page.goto(`${base}/console/conversations/${id}`);
      const fatal = page.locator('.event.error.fatal');
      await fatal.waitFor({ state: 'visible', timeout: DEADLINE_MS });

      // A thought, as markdown.
      await expect.poll(() => page.locator('.event.think strong').first().textContent()).toBe('spaces');
      // A file created: every line added; a replacement: the old line removed, the new one added.
      const created = page.locator('.event.edit').filter({ hasText: 'src/trim.ts' });
      expect(await created.locator('header .tool').textContent()).toBe('Create');
      expect(await created.locator('.diff-line.added').count()).toBe(1);
      expect(await created.locator('.diff-line.removed').count()).toBe(0);
      const edited = page.locator('.event.edit').filter({ hasText: 'src/parser.ts' });
      expect(await edited.locator('.diff-line.removed').innerText()).toContain("return input.split(',');");
      expect(await edited.locator('.diff-line.added').innerText()).toContain("return input.split(',').map(trim);");
      // A command that failed: its exit code and output.
      const command = page.locator('.event.command').filter({ hasText: 'npm test' });
      expect(await command.locator('.badge').filter({ hasText: 'exit 1' }).count()).toBe(1);
      expect(await command.locator('pre.output').innerText()).toContain('expected "a" got " a"');
      expect(await command.locator('.duration').innerText()).toBe('2.0 s');
      // An edit the tool refused: marked as an error, with what it said.
      const refused = page.locator('.event.edit').filter({ hasText: 'src/missing.ts' });
      expect(await refused.locator('pre.output').innerText()).toContain('does not exist');
      // The condensation summary: folded, with how many events it replaces; the summary as markdown when opened.
      const condensation = page.locator('.event.condensation');
      expect(await condensation.locator('summary').innerText()).toContain('7 older events were summarised');
      await condensation.locator('summary').click();
      expect(await condensation.locator('strong').innerText()).toBe('trimmed');
      // A warning and a fatal error.
      expect(await page.locator('.event.error.warning').innerText()).toContain('Warning: llm rate limited');
      expect(await fatal.innerText()).toContain('Stopped: llm auth failed');
      expect(await fatal.innerText()).toContain('The model refused the API key.');
      // Tokens so far, summed over the model calls in the log (the start's own calls included);
      // the cost is unknown ("—") because the scripted model of the start reported none.
      const calls = (await service!.conversations.searchEvents(USER, id, { after: 0, kinds: null, limit: 1000 }))
        ._unsafeUnwrap()
        .items.filter((e) => e.kind === 'llm_call');
      const sum = (field: 'prompt_tokens' | 'completion_tokens') =>
        calls.reduce((total, e) => total + (e.kind === 'llm_call' ? e[field] : 0), 0);
      expect(sum('prompt_tokens')).toBeGreaterThan(1_234);
      await expect
        .poll(() => page.getByTestId('usage').innerText())
        .toBe(
          `— · ${sum('prompt_tokens').toLocaleString('en-US')} in / ${sum('completion_tokens').toLocaleString('en-US')} out tokens`,
        );
      await expect.poll(() => page.locator('.meta').innerText()).toContain('live');
      await shoot(page, 'events-every-kind');
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
