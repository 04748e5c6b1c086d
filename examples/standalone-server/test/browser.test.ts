/**
 * A real browser (Debian's Chromium through playwright-core) against the example server:
 * sign-in with ?key=, the cookie it gets, and a small page of our own (served with
 * ACS_UI_DIR) that speaks both realtime channels with the session cookie alone, as a web UI does.
 */
import { once } from 'node:events';
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scriptedCompletion, marker, startFakeOpenAi, toolCall, type FakeOpenAi } from '@acs/testing';
import { body, call, startServer, waitFor, type Running } from './process.js';

const KEY = 'browser-test-key-0123456789abcdef';
/** The key of another user: the attacker's, in the sign-in CSRF test. */
const ATTACKER_KEY = 'browser-attacker-key-0123456789ab';
const SCREENSHOTS = process.env.ACS_SCREENSHOT_DIR ?? mkdtempSync(join(tmpdir(), 'acs-browser-shots-'));

/** The test page: opens the V0 socket.io channel and the V1 event socket for ?conversation=, lists what arrives, sends messages. */
const PAGE = `<!doctype html>
<html><head><meta charset="utf-8"><title>ACS channels</title>
<style>body{font:14px sans-serif;margin:16px} ol{font:12px monospace;max-height:40vh;overflow:auto} .cols{display:flex;gap:24px} .cols>div{flex:1}</style>
<script src="/socket.io.min.js"></script></head>
<body>
<h1>Conversation <span id="conversation"></span></h1>
<p>Cookie visible to scripts: <code id="cookie"></code></p>
<div class="cols">
  <div><h2>V0 (socket.io)</h2><button id="send-v0">Send over V0</button><ol id="v0"></ol></div>
  <div><h2>V1 (agent-server socket)</h2><button id="send-v1">Send over V1</button><ol id="v1"></ol></div>
</div>
<script>
const id = new URLSearchParams(location.search).get('conversation');
document.getElementById('conversation').textContent = id;
document.getElementById('cookie').textContent = JSON.stringify(document.cookie);
const add = (list, text, data) => { const li = document.createElement('li'); li.textContent = text; li.dataset.event = JSON.stringify(data); document.getElementById(list).append(li); };
const sio = io({ path: '/socket.io', transports: ['websocket'], query: { conversation_id: id, latest_event_id: -1 } });
sio.on('oh_event', (e) => add('v0', e.error ? 'error: ' + e.message : e.id + ' ' + (e.action || e.observation) + ' ' + (e.message || ''), e));
sio.on('connect_error', (e) => add('v0', 'connect_error: ' + e.message, {}));
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/sockets/events/' + id + '?resend_all=true');
ws.onmessage = (m) => { const e = JSON.parse(m.data); add('v1', e.id + ' ' + e.kind + ' ' + ((e.action && e.action.kind) || (e.observation && e.observation.kind) || (e.llm_message && e.llm_message.role) || e.value && JSON.stringify(e.value) || ''), e); };
ws.onclose = (c) => add('v1', 'closed ' + c.code, {});
document.getElementById('send-v0').onclick = () => sio.emit('oh_user_action', { action: 'message', args: { content: 'sent from the page over V0', image_urls: [], file_urls: [] } });
document.getElementById('send-v1').onclick = () => ws.send(JSON.stringify({ role: 'user', content: [{ type: 'text', text: 'sent from the page over V1' }] }));
</script></body></html>`;

let llm: FakeOpenAi;
let server: Running;
let browser: Browser;

beforeAll(async () => {
  llm = await startFakeOpenAi();
  llm.script('page', (turn) =>
    turn === 0
      ? {
          status: 200,
          body: scriptedCompletion(turn, {
            content: 'Running it.',
            tool_calls: [toolCall('call_run', 'execute_bash', { command: 'echo from-the-sandbox' })],
          }),
        }
      : { status: 200, body: scriptedCompletion(turn, { content: `reply ${turn}` }) },
  );
  const ui = mkdtempSync(join(tmpdir(), 'acs-test-ui-'));
  writeFileSync(join(ui, 'index.html'), PAGE);
  const require = createRequire(import.meta.url);
  copyFileSync(
    join(dirname(require.resolve('socket.io-client/package.json')), 'dist', 'socket.io.min.js'),
    join(ui, 'socket.io.min.js'),
  );
  server = await startServer(
    {
      SESSION_API_KEY: KEY,
      ACS_API_KEYS: `mallory:${ATTACKER_KEY}`,
      ACS_STORAGE: 'memory',
      ACS_SANDBOXES: 'fake',
      ACS_UI_DIR: ui,
    },
    { lifetime: 'file' },
  );
  await body(
    call(server.url, '/api/settings', KEY, {
      llm_model: 'openai/scripted-model',
      llm_api_key: 'sk-browser',
      llm_base_url: llm.baseUrl,
    }),
  );
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await llm?.close();
});

const itemsOf = async (page: Page, list: 'v0' | 'v1') => page.locator(`#${list} li`).allTextContents();

describe('the browser', () => {
  it('signs in with ?key=, keeps the key out of the address and from scripts, and drives both channels with the cookie alone', async () => {
    const { conversation_id: id } = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, { initial_user_msg: `${marker('page')} run the command` }),
    );
    await waitFor('the agent to answer', async () => {
      const [c] = await body<({ execution_status: string | null } | null)[]>(
        call(server.url, `/api/v1/app-conversations?ids=${id}`, KEY),
      );
      return c?.execution_status === 'finished' ? true : undefined;
    });
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      const response = await page.goto(`${server.url}/?key=${KEY}&conversation=${id}`);
      expect(response?.status()).toBe(200);
      expect(page.url()).toBe(`${server.url}/?conversation=${id}`);
      expect(page.url()).not.toContain(KEY);
      const [cookie, ...others] = await context.cookies();
      expect(others).toEqual([]);
      expect(cookie).toMatchObject({
        name: 'acs_session',
        httpOnly: true,
        sameSite: 'Strict',
        secure: false,
        path: '/',
      });
      expect(cookie!.value).not.toContain(KEY);
      expect(await page.locator('#cookie').textContent()).toBe('""');

      await waitFor('both replays', async () => {
        const [v0, v1] = [await itemsOf(page, 'v0'), await itemsOf(page, 'v1')];
        return v0.some((t) => /\d+ run Running command: echo from-the-sandbox/.test(t)) &&
          v1.some((t) => / ActionEvent ExecuteBashAction/.test(t))
          ? true
          : undefined;
      });
      expect((await itemsOf(page, 'v0')).at(-1)).toMatch(/agent_state_changed/);
      expect(await itemsOf(page, 'v1')).toContainEqual(
        expect.stringMatching(/ObservationEvent ExecuteBashObservation/),
      );
      await page.screenshot({ path: join(SCREENSHOTS, 'channels-replayed.png'), fullPage: true });

      await page.click('#send-v0');
      await waitFor('the V0 message and its answer on both channels', async () => {
        const [v0, v1] = [await itemsOf(page, 'v0'), await itemsOf(page, 'v1')];
        return v0.some((t) => t.includes('sent from the page over V0')) &&
          v0.some((t) => /message reply \d+/.test(t)) &&
          v1.filter((t) => / MessageEvent assistant/.test(t)).length >= 1
          ? true
          : undefined;
      });
      await page.click('#send-v1');
      await waitFor('the V1 message and its answer on both channels', async () => {
        const [v0, v1] = [await itemsOf(page, 'v0'), await itemsOf(page, 'v1')];
        return v0.some((t) => t.includes('sent from the page over V1')) &&
          v0.filter((t) => /message reply \d+/.test(t)).length >= 2 &&
          v1.filter((t) => / MessageEvent user/.test(t)).length >= 3
          ? true
          : undefined;
      });
      await page.screenshot({ path: join(SCREENSHOTS, 'channels-live.png'), fullPage: true });
      // Both channels saw the same events, each once.
      const v0Ids = (
        await page.locator('#v0 li').evaluateAll((items) =>
          items.map(
            (li) =>
              (
                JSON.parse((li as unknown as { dataset: { event?: string } }).dataset.event ?? '{}') as {
                  id?: number;
                }
              ).id,
          ),
        )
      ).filter((x) => typeof x === 'number');
      expect(new Set(v0Ids.slice(0, -1)).size).toBe(v0Ids.length - 1);

      // Signed out, the page's channels are refused on reconnect.
      const out = await page.evaluate(
        async () =>
          (
            await fetch('/api/sign-out', {
              method: 'POST',
              headers: { 'content-type': 'application/json' },
              body: '{}',
            })
          ).status,
      );
      expect(out).toBe(200);
      expect(await context.cookies()).toEqual([]);
      await page.reload();
      await waitFor('the refusals', async () => {
        const [v0, v1] = [await itemsOf(page, 'v0'), await itemsOf(page, 'v1')];
        return v0.some((t) => t.startsWith('connect_error')) && v1.some((t) => t === 'closed 4001') ? true : undefined;
      });
      await page.screenshot({ path: join(SCREENSHOTS, 'signed-out.png'), fullPage: true });
    } finally {
      await context.close();
    }
  });

  it('another site cannot sign the browser in to its account: its link asks first, it cannot frame the question, and the session stays', async () => {
    const link = `${server.url}/console/?key=${ATTACKER_KEY}`;
    // The attacker's site: another origin (another port of this host), a page that sends the victim to the link, and one that frames it.
    const attacker = createServer((req, res) => {
      res.setHeader('Content-Type', 'text/html');
      if (req.url === '/frame')
        res.end(`<!doctype html><title>framing</title><iframe id="f" src="${link}" width="600" height="300"></iframe>`);
      else
        res.end(`<!doctype html><title>win a prize</title><script>location.href = ${JSON.stringify(link)};</script>`);
    });
    attacker.listen(0, '127.0.0.1');
    await once(attacker, 'listening');
    const evil = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
    const context = await browser.newContext();
    try {
      const page = await context.newPage();
      // The victim is signed in as themselves.
      await page.goto(`${server.url}/console/?key=${KEY}`);
      const [mine] = await context.cookies();
      expect(mine?.name).toBe('acs_session');

      // The attacker's page sends the browser to its sign-in link: a question, not a switch.
      await page.goto(`${evil}/`);
      await page.waitForURL((url) => url.href.startsWith(server.url));
      await expect.poll(() => page.locator('h1').textContent()).toBe('Sign in as mallory?');
      expect(await page.locator('body').textContent()).toContain('This browser is signed in as default.');
      await page.screenshot({ path: join(SCREENSHOTS, 'sign-in-asked.png'), fullPage: true });
      expect(await context.cookies()).toEqual([mine]);

      // Framed on the attacker's page, the question does not even load (so no click can be stolen).
      await page.goto(`${evil}/frame`);
      const frame = page.frameLocator('#f');
      await page.waitForTimeout(500);
      expect(await frame.locator('button').count()).toBe(0);
      expect(await frame.locator('body').textContent()).not.toContain('Sign in as mallory');
      await page.screenshot({ path: join(SCREENSHOTS, 'sign-in-framed.png'), fullPage: true });
      expect(await context.cookies()).toEqual([mine]);

      // The victim declines: still themselves, the key gone from the address.
      await page.goto(link);
      await page.click('text=Stay signed in as default');
      await page.waitForURL(`${server.url}/console/`);
      expect(await context.cookies()).toEqual([mine]);
      const who = await page.evaluate(async () => (await fetch('/api/settings')).status);
      expect(who).toBe(200);
    } finally {
      await context.close();
      attacker.close();
    }
  });
});
