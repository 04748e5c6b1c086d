/**
 * The answer as the model writes it, in the web console in a real browser (Debian's Chromium):
 * the example server with the fake runtime, and a fake model that streams its answer slowly in
 * token-like pieces. The text is on the page before the stored message exists; the stored
 * message then takes the same element's place (drawn in place: nothing removed, nothing drawn
 * twice). Screenshots mid-answer and after it, at 1280×800 and at a phone's 390×844, go to
 * ACS_SCREENSHOT_DIR (or a temporary directory) for a person to look at.
 */
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { completion, marker, startFakeOpenAi, type FakeOpenAi } from '@acs/testing';
import { launchBrowser, SCREENSHOTS } from './console-scenario.js';
import { body, call, startServer, waitFor, type Running } from './process.js';

const KEY = 'console-streaming-key-0123456789abcdef';
const DEADLINE_MS = 90_000;
/** A wait before each streamed piece: the answer takes about 8 s to write. */
const PIECE_DELAY_MS = 150;
const REASONING = 'The user wants a short story about the sea.';
/** About 45 pieces (a word each, the fake model cuts at most 6 characters). */
const STORY =
  'Once upon a time a small **robot** lived by the sea. Every day it read the waves, wrote short notes in the sand, ' +
  'and waited for the tide to carry its words to a ship far away. One night a ship came. The end.';
const STORY_SHOWN = STORY.replaceAll('**', '');
const FIRST_WORDS = 'Once upon a time';
const MID_WORDS = 'Every day it';

let llm: FakeOpenAi | undefined;
let browser: Browser | undefined;

beforeAll(async () => {
  llm = await startFakeOpenAi();
  // The first turn answers at once; the second one (the message sent in the console) is the slow story.
  llm.script('streaming', (turn) => {
    if (turn === 0) return { status: 200, body: completion({ id: 'chatcmpl-ready', content: 'Ready when you are.' }) };
    const answer = completion({ id: `chatcmpl-story-${turn}`, content: STORY });
    const choice = answer.choices[0]!;
    const reasoned = {
      ...answer,
      choices: [{ ...choice, message: { ...choice.message, reasoning_content: REASONING } }],
    };
    return { status: 200, body: reasoned, streamPieceDelayMs: PIECE_DELAY_MS };
  });
  browser = await launchBrowser();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await llm?.close();
});

/** A screenshot of the page as it is, at 1280×800 and at a phone's 390×844 (the viewport as a phone shows it). */
async function shoot(page: Page, name: string): Promise<string[]> {
  const paths = [join(SCREENSHOTS, `${name}-1280.png`), join(SCREENSHOTS, `${name}-390.png`)];
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.screenshot({ path: paths[0]! });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: paths[1]! });
  return paths;
}

/** The conversation's stored agent messages (REST), their texts. */
async function storedAgentTexts(server: Running, id: string): Promise<string[]> {
  const page = await body<{ items: { kind: string; source: string; text?: string }[] }>(
    call(server.url, `/api/v1/app-conversations/${id}/events?kinds=message&limit=100`, KEY),
  );
  return page.items.filter((e) => e.source === 'agent').map((e) => e.text ?? '');
}

/** What the page shows of the agent's answers: each bubble's text, whether it is being written, its event id. */
const agentBubbles = (page: Page) =>
  page.locator('article.message.agent').evaluateAll((nodes) =>
    nodes.map((n) => {
      const el = n as unknown as {
        dataset: Record<string, string | undefined>;
        querySelector(s: string): { textContent: string | null } | null;
      };
      return {
        text: (el.querySelector('.markdown')?.textContent ?? '').trim(),
        writing: el.querySelector('.writing') !== null,
        eventId: el.dataset['eventId'] ?? null,
        mark: el.dataset['mark'] ?? null,
      };
    }),
  );

/**
 * In the page: counts every message element taken out of the event list from now on (an answer
 * drawn anew would remove the one that was being written: a flicker on a slow phone).
 */
const watchRemovals = (page: Page) =>
  page.evaluate(() => {
    const g = globalThis as unknown as {
      document: { querySelector(s: string): unknown };
      MutationObserver: new (cb: (records: { removedNodes: { nodeName: string }[] }[]) => void) => {
        observe(target: unknown, options: { childList: boolean }): void;
      };
      removedMessages: number;
    };
    g.removedMessages = 0;
    new g.MutationObserver((records) => {
      for (const r of records) for (const n of r.removedNodes) if (n.nodeName === 'ARTICLE') g.removedMessages++;
    }).observe(g.document.querySelector('.events'), { childList: true });
  });

describe('the web console, an answer as it is written', () => {
  it('shows the answer while the model writes it, before it is stored, then the stored answer in its place, once', async () => {
    const server = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory', ACS_SANDBOXES: 'fake' });
    await body(
      call(server.url, '/api/settings', KEY, {
        llm_model: 'openai/scripted-model',
        llm_api_key: 'sk-streaming',
        llm_base_url: llm!.baseUrl,
      }),
    );
    const { conversation_id: id } = await body<{ conversation_id: string }>(
      call(server.url, '/api/conversations', KEY, { initial_user_msg: `${marker('streaming')} Are you there?` }),
    );
    await waitFor('the first answer', async () =>
      (await storedAgentTexts(server, id)).includes('Ready when you are.') ? true : undefined,
    );

    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const errors: string[] = [];
    try {
      const page = await context.newPage();
      page.on('pageerror', (error) => errors.push(error.message));
      await page.goto(`${server.url}/console/?key=${KEY}`);
      await page.goto(`${server.url}/console/conversations/${id}`);
      await page.locator('.stream.live').waitFor({ timeout: DEADLINE_MS });
      await page.locator('article.message.agent').getByText('Ready when you are.').waitFor({ timeout: DEADLINE_MS });
      await watchRemovals(page);

      await page.getByRole('textbox', { name: 'Message to the agent' }).fill('Tell me a short story about the sea');
      await page.keyboard.press('Enter');

      // The first words, in a message being written: before the stored answer exists.
      const firstWords = await waitFor(
        'the first words of the answer on the page',
        async () => {
          const bubbles = await agentBubbles(page);
          const story = bubbles.find((b) => b.text.includes(FIRST_WORDS));
          if (story && !story.writing)
            throw new Error(
              `the answer appeared whole, never as it was written (no delta reached the console).\n--- server stderr ---\n${server.stderr().slice(-3000)}`,
            );
          return story;
        },
        DEADLINE_MS,
      );
      const stored = await storedAgentTexts(server, id);
      expect(stored).toEqual(['Ready when you are.']);
      expect(firstWords.eventId).toBeNull();
      // A piece may stop inside the bold word: its `**` shows as typed until the closing one comes.
      expect(STORY_SHOWN.startsWith(firstWords.text.replaceAll('*', '')), firstWords.text).toBe(true);
      expect(firstWords.text.length).toBeLessThan(STORY_SHOWN.length);
      // Marked, to tell later whether the stored answer is drawn in this same element.
      await page
        .locator('article.message.agent[aria-busy="true"]')
        .evaluate((el) => ((el as unknown as { dataset: Record<string, string> }).dataset['mark'] = 'written-live'));
      const reasoning = page.locator('article.message.agent details.reasoning');
      expect(await reasoning.locator('summary').innerText()).toBe('Reasoning');
      expect(await reasoning.locator('.reasoning-text').textContent()).toBe(REASONING);

      // Further in (a third of it written), the screenshots; the answer is still not stored.
      await waitFor('more of the answer on the page', async () =>
        (await agentBubbles(page)).some((b) => b.writing && b.text.includes(MID_WORDS)) ? true : undefined,
      );
      expect(await storedAgentTexts(server, id)).toEqual(['Ready when you are.']);
      const midAnswer = await shoot(page, 'streaming-01-mid-answer');
      const stillWriting = (await agentBubbles(page)).find((b) => b.mark === 'written-live');
      console.info(
        `mid-answer screenshots (${stillWriting?.writing ? 'still writing' : 'the answer was done'} after them, ${stillWriting?.text.length ?? 0} of ${STORY_SHOWN.length} characters): ${midAnswer.join(' ')}`,
      );
      expect(stillWriting?.writing).toBe(true);

      // The whole answer, stored, in the element that showed it being written; shown once.
      await waitFor('the stored answer', async () =>
        (await storedAgentTexts(server, id)).includes(STORY) ? true : undefined,
      );
      const final = await waitFor('the stored answer on the page', async () => {
        const bubbles = await agentBubbles(page);
        return bubbles.some((b) => b.eventId !== null && b.text === STORY_SHOWN) ? bubbles : undefined;
      });
      expect(final.map((b) => b.text)).toEqual(['Ready when you are.', STORY_SHOWN]);
      expect(final[1]).toMatchObject({ writing: false, mark: 'written-live' });
      expect(await page.locator('.writing').count()).toBe(0);
      expect(await page.evaluate(() => (globalThis as unknown as { removedMessages: number }).removedMessages)).toBe(0);
      // The reasoning seen stays with the answer on this page (folded).
      expect(await reasoning.count()).toBe(1);
      const done = await shoot(page, 'streaming-02-answered');
      console.info(`answered screenshots: ${done.join(' ')}`);

      // A page opened now gets the stored answer alone (deltas are not replayed), once.
      const later = await context.newPage();
      await later.goto(`${server.url}/console/conversations/${id}`);
      await later
        .locator('article.message.agent')
        .getByText('One night a ship came.')
        .waitFor({ timeout: DEADLINE_MS });
      expect((await agentBubbles(later)).map((b) => b.text)).toEqual(['Ready when you are.', STORY_SHOWN]);
      expect(await later.locator('details.reasoning').count()).toBe(0);
      expect(errors).toEqual([]);
    } finally {
      await context.close();
    }
  });
});
