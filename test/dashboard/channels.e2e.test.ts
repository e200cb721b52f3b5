/**
 * The agent page's Channels tab in a real browser (docs/channels.md "Connect a bot"; Debian's
 * Chromium through playwright-core, the whole platform on real sockets with a real local agent,
 * grammY against the local Bot API server): a refused token is said in words; a good one connects
 * (its @name and status shown, the token never again); a stranger's pairing code appears and
 * Approve adds them to the allow list; recent senders are listed. The page passes axe. Skips
 * without Chromium.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeTelegramApi, startFakeTelegramApi } from '../fakes/telegram-api.ts';
import { expectAccessible as axe, buildDashboardForTest, chromiumAvailable, launchChromium, openPage } from '../helpers/browser.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';

const available = chromiumAvailable('channels browser test');
const PASSWORD = 'correct horse battery staple';
const TOKEN = '6666666:AAE-browser-telegram-bot-token-secret-part';

let live: LivePlatform;
let telegram: FakeTelegramApi;
let browser: Browser;
let dashboard: { dir: string; remove: () => void } | undefined;

describe.skipIf(!available)('the Channels tab', () => {
  beforeAll(async () => {
    dashboard = await buildDashboardForTest();
    telegram = await startFakeTelegramApi();
    telegram.addBot(TOKEN, { id: 6666666, username: 'tab_test_bot' });
    live = await startLivePlatform({ DASHBOARD_DIR: dashboard.dir, REGISTER_RATE_LIMIT: '100', TELEGRAM_API_URL: telegram.apiUrl });
    browser = await launchChromium();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await live?.close();
    await telegram?.close();
    dashboard?.remove();
  });

  it('connect a bot, see who writes, approve a pairing code', async () => {
    const { page, errors } = await openPage(browser, live.webUrl, { width: 1440 });
    await page.goto('/login');
    await page.getByRole('button', { name: 'Create an account' }).click();
    await page.getByLabel('Email').fill('channels-owner@example.com');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL('**/dashboard');
    await page.getByLabel('Name', { exact: true }).fill('bot-agent');
    await page.getByRole('button', { name: 'Provision' }).click();
    await page.waitForURL('**/dashboard/agents/**');
    await page.locator('.agent-head > .badge', { hasText: 'running' }).first().waitFor({ timeout: 60_000 });

    await page.getByRole('tab', { name: 'Channels' }).click();
    const telegramCard = page.locator('section.card', { has: page.getByRole('heading', { name: 'Telegram' }) });
    // a token Telegram refuses: the reason in words, nothing connected
    await telegramCard.getByLabel('Bot token').fill('123:a-token-telegram-does-not-know');
    await telegramCard.getByRole('button', { name: 'Connect' }).click();
    await telegramCard.getByText(/Telegram refused the bot token: Unauthorized/).waitFor();
    // a good one, with an allow list
    await telegramCard.getByLabel('Bot token').fill(TOKEN);
    await telegramCard.getByLabel('Allowed senders').fill('@owner_account');
    await telegramCard.getByRole('button', { name: 'Connect' }).click();
    await telegramCard.getByText('@tab_test_bot').waitFor();
    await telegramCard.locator('.badge', { hasText: 'connected' }).waitFor({ timeout: 15_000 });
    expect(await page.content()).not.toContain(TOKEN.split(':')[1]);

    // a stranger writes: a pairing request to approve, and a recent sender
    telegram.sendToBot(TOKEN, { id: 5151, username: 'stranger' }, 'may I?');
    const row = page.locator('tr', { hasText: '@stranger (5151)' }).filter({ has: page.getByRole('button', { name: 'Approve' }) });
    await row.waitFor({ timeout: 15_000 });
    await axe(page, 'agent channels');
    await row.getByRole('button', { name: 'Approve' }).click();
    await page.getByText('No one is waiting.').waitFor();
    // the allow list on the page is the stored one, the approved sender in it
    await expect.poll(() => telegramCard.getByLabel('Allowed senders').inputValue(), { timeout: 10_000 }).toBe('@owner_account, 5151');
    const listed = await fetch(`${live.webUrl}/api/agents/${page.url().split('/').pop()}/channels`, {
      headers: { cookie: (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ') },
    }).then((r) => r.json() as Promise<{ channels: { allowFrom: string[] }[] }>);
    expect(listed.channels[0]?.allowFrom).toEqual(['@owner_account', '5151']);
    await page.locator('tr', { hasText: '@stranger (5151)' }).getByText('yes').waitFor();
    expect(errors).toEqual([]);
  }, 180_000);
});
