/**
 * The console's device sign-in page and API keys page in a real browser (Debian's Chromium)
 * against the example server: a device asks for codes, the person opens the page the device
 * names, signs in, sees who asks and approves or denies; keys are made (the secret shown once)
 * and revoked. Screenshots go where the console's other browser tests put theirs.
 */
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, SCREENSHOTS } from './console-scenario.js';
import { body, call, startServer, type Running } from './process.js';

const KEY = 'console-keys-test-key-0123456789ab';
const UI_DEADLINE_MS = 60_000;

let browser: Browser | undefined;
beforeAll(async () => {
  browser = await launchBrowser();
}, 180_000);
afterAll(async () => {
  await browser?.close();
});

interface Codes {
  device_code: string;
  user_code: string;
  verification_uri_complete: string;
}

/** What the CLI does: codes with `{}`, polls with a form; both without a key. */
const authorize = (server: Running) => body<Codes>(call(server.url, '/oauth/device/authorize', null, {}));
const poll = (server: Running, deviceCode: string) =>
  fetch(`${server.url}/oauth/device/token`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    body: `device_code=${deviceCode}`,
  }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }));

/** Waits for a locator; on timeout, fails with what the page showed and what the server said. */
async function see(locator: Locator, what: string, server: Running): Promise<Locator> {
  try {
    await locator.first().waitFor({ state: 'visible', timeout: UI_DEADLINE_MS });
    return locator;
  } catch (error) {
    const text = await locator
      .page()
      .locator('body')
      .innerText()
      .catch(() => '(no page text)');
    throw new Error(
      `the console did not show ${what} within ${UI_DEADLINE_MS / 1000} s.\n--- page (${locator.page().url()}) ---\n${text.slice(-3000)}\n--- server stderr ---\n${server.stderr().slice(-3000)}`,
      { cause: error },
    );
  }
}

async function shoot(page: Page, name: string): Promise<void> {
  await page.setViewportSize({ width: 1280, height: 800 });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-1280.png`) });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.screenshot({ path: join(SCREENSHOTS, `${name}-390.png`), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 800 });
}

describe('the console answers device sign-ins and manages API keys', () => {
  it('signs in from the page the device names, approves and denies, then makes and revokes keys', async () => {
    const server = await startServer({ SESSION_API_KEY: KEY, ACS_STORAGE: 'memory' });
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const errors: string[] = [];
    try {
      const page = await context.newPage();
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('dialog', (dialog) => void dialog.accept());

      const codes = await authorize(server);
      expect(codes.verification_uri_complete).toBe(`${server.url}/console/device?user_code=${codes.user_code}`);

      // Not signed in: the page says what is asked and how to sign in, and comes back with the code.
      await page.goto(codes.verification_uri_complete);
      await see(page.getByText('is asking to sign in as you'), 'the device hint for a signed-out browser', server);
      await shoot(page, 'device-01-signed-out');
      await page.getByLabel('API key').fill(KEY);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await see(page.getByTestId('user-code'), 'the user code after signing in', server);
      expect(page.url()).toBe(codes.verification_uri_complete);
      expect(await page.getByTestId('user-code').innerText()).toBe(codes.user_code);
      await see(page.getByText('OpenHands CLI wants to sign in as default'), 'who asks and as whom', server);
      await shoot(page, 'device-02-ask');

      expect((await poll(server, codes.device_code)).body.error).toBe('authorization_pending');
      await page.getByRole('button', { name: 'Approve' }).click();
      await see(page.getByText('Approved.'), 'the approval', server);
      await shoot(page, 'device-03-approved');
      const token = await poll(server, codes.device_code);
      expect(token.status).toBe(200);
      const cliKey = token.body.access_token as string;
      expect((await body<{ id: string }>(call(server.url, '/api/v1/users/me', cliKey))).id).toBe('default');

      // Denying: the device gets access_denied.
      const denied = await authorize(server);
      await page.goto(denied.verification_uri_complete);
      await page.getByRole('button', { name: 'Deny' }).click();
      await see(page.getByText('Denied. The device gets no key.'), 'the refusal', server);
      expect((await poll(server, denied.device_code)).body.error).toBe('access_denied');

      // A code that matches nothing says so; a typed code finds its sign-in.
      await page.goto(`${server.url}/console/device?user_code=BBBB-BBBB`);
      await see(page.getByText('USER_CODE_NOT_FOUND'), 'an unknown code', server);
      await shoot(page, 'device-04-unknown-code');
      const typed = await authorize(server);
      await page.goto(`${server.url}/console/device`);
      await page.getByLabel('Code').fill(typed.user_code.toLowerCase());
      await page.getByRole('button', { name: 'Continue' }).click();
      await see(page.getByTestId('user-code').getByText(typed.user_code), 'the typed code’s sign-in', server);

      // The keys page lists the CLI's key; a new key's secret is shown once; revoking ends a key.
      await page.getByRole('link', { name: 'API keys' }).click();
      await see(page.getByRole('heading', { name: 'API keys' }), 'the keys page', server);
      await see(page.getByRole('cell', { name: /^OpenHands CLI \(/ }), 'the CLI’s key', server);
      await page.getByLabel('Key name').fill('laptop');
      await page.getByRole('button', { name: 'Make key' }).click();
      await see(page.getByTestId('new-key'), 'the new key', server);
      const secret = await page.getByLabel('The new key').inputValue();
      expect(secret).toMatch(/^acsk_/);
      await shoot(page, 'keys-01-new-key');
      expect((await body<{ id: string }>(call(server.url, '/api/v1/users/me', secret))).id).toBe('default');
      await page.getByRole('button', { name: 'Done' }).click();
      expect(await page.getByText(secret).count()).toBe(0);

      await page
        .getByRole('row', { name: /OpenHands CLI/ })
        .getByRole('button', { name: 'Revoke' })
        .click();
      await page
        .getByRole('cell', { name: /^OpenHands CLI \(/ })
        .waitFor({ state: 'detached', timeout: UI_DEADLINE_MS });
      expect((await call(server.url, '/api/v1/users/me', cliKey)).status).toBe(401);
      expect((await call(server.url, '/api/v1/users/me', secret)).status).toBe(200);
      await see(page.getByRole('cell', { name: 'laptop' }), 'the remaining key', server);
      await shoot(page, 'keys-02-after-revoke');
      expect(errors).toEqual([]);
      console.info(`console screenshots: ${SCREENSHOTS}`);
    } finally {
      await context.close();
    }
  });
});
