/**
 * The loop a person runs the platform for, in a real browser (docs/dashboard.md; README "First
 * steps"): Debian's Chromium driven by playwright-core against the whole platform on real sockets
 * (test/helpers/live-platform.ts: a real local agent whose model is a local OpenAI-compatible fake,
 * reached through the platform's AI gateway).
 *
 * Sign up → become the admin through the setup link → provision → chat (a reply in markdown:
 * bold renders bold, an <img onerror> is text) → Connect (create a key there, then the official
 * `openai` client lists the agent's model and chats with model "default") → Usage (per agent on
 * the Usage page and the agent's tab; a monthly budget the agent's next call runs into, said in
 * the chat) → persona (the Configuration form; after Stop and Start the model sees the system
 * prompt first) → Files (create, edit and save a file) → the admin credits the user → the wallet
 * shows the balance and the journal → a paid gateway call with the key lowers it. Every new page
 * passes axe (no serious or critical violation); at 390 px none scrolls sideways. Screenshots go to
 * .test-results/screenshots (docs/screenshots with UPDATE_SCREENSHOTS=1). Skips without Chromium.
 */
import OpenAI from 'openai';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeX402Gateway, startFakeX402Gateway } from '../fakes/x402-gateway.ts';
import {
  expectAccessible as axe,
  buildDashboardForTest,
  chromiumAvailable,
  launchChromium,
  expectNoHorizontalScroll as noHorizontalScroll,
  openPage,
  screenshot as shot,
} from '../helpers/browser.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';

// page.evaluate callbacks run in the browser; this project's types are Node's (no DOM lib)
declare const document: { title: string };

const available = chromiumAvailable('product loop browser test');
const PASSWORD = 'correct horse battery staple';
const EMAIL = 'loop-user@example.com';
const AGENT = 'loop-agent';

let live: LivePlatform;
let browser: Browser;
let x402: FakeX402Gateway;
let dashboard: { dir: string; remove: () => void } | undefined;
/** carried from one step to the next (the steps run in order) */
const state: { agentUrl?: string; agentId?: string; key?: string } = {};

// realPolling: for the case that waits for the network to be idle, which frequent polls never are
const newPage = (width: number, options: { realPolling?: boolean } = {}) =>
  openPage(browser, live.webUrl, { width, clipboard: true, ...options });

async function signIn(page: Page) {
  await page.goto('/login');
  await page.getByLabel('Email').fill(EMAIL);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(/\/dashboard/);
}

async function openTab(page: Page, name: string) {
  await page.getByRole('tab', { name, exact: true }).click();
}

async function chat(page: Page, text: string) {
  await page.getByLabel('Message').fill(text);
  await page.getByLabel('Message').press('Enter');
}

async function waitRunning(page: Page) {
  await page.locator('.agent-head > .badge', { hasText: 'running' }).first().waitFor({ timeout: 60_000 });
}

describe.skipIf(!available)('the product loop in Chromium', () => {
  beforeAll(async () => {
    dashboard = await buildDashboardForTest();
    x402 = await startFakeX402Gateway();
    live = await startLivePlatform({ DASHBOARD_DIR: dashboard.dir, REGISTER_RATE_LIMIT: '100', X402_GATEWAY_URL: x402.url });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await live?.close();
    await x402?.close();
    dashboard?.remove();
  });

  it('sign up, become the admin, provision, and chat: a markdown reply renders safely', async () => {
    const { page, errors } = await newPage(1440);
    await page.goto('/login');
    await page.getByRole('button', { name: 'Create an account' }).click();
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL('**/dashboard');

    // the first account opens the one-time setup link the log prints and becomes the admin
    const link = (await live.running()!.platform.services.admin.setupLinkIfNoAdmin())!;
    await page.goto(link);
    await page.getByRole('heading', { name: 'You are the admin' }).waitFor();

    await page.goto('/dashboard');
    await page.getByLabel('Name', { exact: true }).fill(AGENT);
    await page.getByRole('button', { name: 'Provision' }).click();
    await page.waitForURL('**/dashboard/agents/**');
    await waitRunning(page);
    state.agentUrl = page.url();
    state.agentId = decodeURIComponent(new URL(page.url()).pathname.split('/').pop()!);

    // the model answers in markdown, with HTML that must stay text
    live.upstream.reply = 'Here is **bold** news.\n\n<img src="x" onerror="document.title=\'owned\'">\n\n| a | b |\n|---|---|\n| 1 | 2 |';
    try {
      await chat(page, 'show me markdown');
      await page.locator('.bubble-agent strong', { hasText: 'bold' }).waitFor({ timeout: 30_000 });
      await page.locator('.bubble-agent', { hasText: '<img src="x"' }).waitFor();
      // the reply may still be arriving (streamed) when its first part renders: wait for its end
      await page.locator('.bubble-agent table').waitFor({ timeout: 30_000 });
      expect(await page.locator('.chat img').count()).toBe(0);
      expect(await page.locator('.bubble-agent table').count()).toBe(1);
      expect(await page.evaluate(() => document.title)).not.toBe('owned');
    } finally {
      live.upstream.reply = undefined;
    }
    await axe(page, 'agent chat (markdown)');
    await shot(page, 'agent-chat-1440');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 180_000);

  it('Connect: the panel gives the id, the URLs and a key; the openai client lists the model and chats with "default"', async () => {
    const { page, errors } = await newPage(1440);
    await signIn(page);
    await page.goto(state.agentUrl!);
    await openTab(page, 'Connect');
    const id = page.getByRole('region', { name: 'Agent ID' });
    await id.getByText(state.agentId!).waitFor();
    const baseUrl = `${live.webUrl}/api/agents/${state.agentId}/v1`;
    await page.getByRole('region', { name: 'Base URL' }).getByText(baseUrl).waitFor();
    await page.getByRole('region', { name: 'WebSocket URL' }).getByText(`/api/agents/${state.agentId}/ws`).waitFor();
    await id.getByRole('button', { name: 'Copy' }).click();
    await id.getByRole('button', { name: 'Copied' }).waitFor();

    await page.getByRole('button', { name: 'Create a key' }).click();
    await page.getByText('shown only this once', { exact: false }).waitFor();
    const snippet = (await page.getByRole('region', { name: 'JavaScript (openai)' }).locator('pre').textContent())!;
    const key = /sk_[A-Za-z0-9_-]{40}/.exec(snippet)?.[0];
    expect(key, snippet).toBeDefined();
    expect(snippet).toContain(baseUrl);
    state.key = key!;
    await axe(page, 'agent connect');
    await shot(page, 'agent-connect-1440');

    // what the snippet says works, with the official client
    const client = new OpenAI({ baseURL: baseUrl, apiKey: state.key });
    const models = (await client.models.list()).data.map((m) => m.id);
    expect(models).toContain('default');
    const reply = await client.chat.completions.create({ model: 'default', messages: [{ role: 'user', content: 'hello from the sdk' }] });
    expect(reply.choices[0]!.message.content).toBe('Echo: hello from the sdk');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('Usage per agent, and a monthly budget the agent runs into and says so in the chat', async () => {
    const { page, errors } = await newPage(1440);
    await signIn(page);
    await page.goto('/dashboard/usage');
    await page.getByRole('heading', { name: 'By agent' }).waitFor();
    await page.getByRole('link', { name: AGENT }).first().waitFor();
    await axe(page, 'usage');
    await shot(page, 'usage-1440');

    await page.goto(state.agentUrl!);
    await openTab(page, 'Usage');
    await page.getByRole('heading', { name: 'Monthly budget' }).waitFor();
    // a budget below what the agent has spent already: its next model call is refused
    await page.getByLabel('Monthly budget (USD)').fill('0.000001');
    await page.getByRole('button', { name: 'Save budget' }).click();
    await page.getByText('Budget saved.').waitFor();
    await page.getByText(/^Monthly budget used up/).waitFor();
    await axe(page, 'agent usage');
    await shot(page, 'agent-usage-1440');
    const calls = live.upstream.requests.length;
    await openTab(page, 'Chat');
    await chat(page, 'one more question');
    await page
      .getByRole('alert')
      .filter({ hasText: /budget/i })
      .first()
      .waitFor({ timeout: 30_000 });
    expect(live.upstream.requests.length).toBe(calls); // refused before the provider

    await openTab(page, 'Usage');
    await page.getByRole('button', { name: 'Clear' }).click();
    await page.getByText('Budget cleared.').waitFor();
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('Persona: the Configuration form sets a system prompt the model sees first after the Restart it offers', async () => {
    const { page, errors } = await newPage(1440);
    await signIn(page);
    await page.goto(state.agentUrl!);
    await openTab(page, 'Configuration');
    await page.getByLabel('System prompt').fill('You are a careful ship captain.');
    await page.getByRole('button', { name: 'Save configuration' }).click();
    await page.getByText(/^Saved\. Restart the agent to apply it\./).waitFor();
    await axe(page, 'agent configuration');
    await shot(page, 'agent-configuration-1440');

    // the notice's Restart deploys it again with what was saved
    const deployments = () =>
      live.database.db.kysely
        .selectFrom('deployments')
        .select('id')
        .where('agent_id', '=', state.agentId!)
        .where('status', '=', 'succeeded')
        .execute()
        .then((r) => r.length);
    const before = await deployments();
    await page.getByRole('button', { name: 'Restart', exact: true }).click();
    await page.getByText(/^Restarting with the saved configuration/).waitFor();
    await expect.poll(deployments, { timeout: 60_000 }).toBe(before + 1);
    await waitRunning(page);
    await openTab(page, 'Chat');
    await chat(page, 'who are you?');
    await page
      .locator('.bubble-agent', { hasText: 'Echo: who are you?' })
      .waitFor({ timeout: 30_000 })
      .catch(async (err) => {
        throw new Error(`${(err as Error).message}\nthe page says: ${await page.locator('main').textContent()}`);
      });
    const first = (live.upstream.requests.at(-1)!.body.messages as { role: string; content: unknown }[])[0]!;
    expect(first).toMatchObject({ role: 'system', content: 'You are a careful ship captain.' });

    // the form shows what is stored after a reload
    await page.reload();
    await openTab(page, 'Configuration');
    await expect.poll(() => page.getByLabel('System prompt').inputValue()).toBe('You are a careful ship captain.');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 180_000);

  it('Files: create a file in the workspace, edit and save it, read it back', async () => {
    const { page, errors } = await newPage(1440);
    await signIn(page);
    await page.goto(state.agentUrl!);
    await openTab(page, 'Files');
    await page.getByRole('heading', { name: 'Files', exact: true }).waitFor();
    await page.getByLabel('New file').fill('notes.md');
    await page.getByRole('button', { name: 'Create file' }).click();
    const content = page.getByLabel('Content of notes.md');
    await content.fill('# Notes\n\nwritten from the browser\n');
    await page.getByRole('button', { name: 'Save file' }).click();
    await page.getByText(/^Saved notes\.md/).waitFor();
    await page.getByRole('heading', { name: 'Git', exact: true }).waitFor();
    await axe(page, 'agent files');
    await shot(page, 'agent-files-1440');
    // what the agent's owner reads back through the API is what was saved
    const cookies = await page.context().cookies();
    const res = await fetch(`${live.webUrl}/api/browse/read?agentId=${encodeURIComponent(state.agentId!)}&path=notes.md`, {
      headers: { cookie: cookies.map((c) => `${c.name}=${c.value}`).join('; ') },
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { content: string }).content).toBe('# Notes\n\nwritten from the browser\n');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('Money without a card processor: the admin credits, the wallet shows balance and journal, a paid call lowers it', async () => {
    const { page, errors } = await newPage(1440);
    await signIn(page);
    // a session wallet first, so the credit lands where the wallet page looks
    await page.goto('/dashboard/admin');
    await page.getByRole('button', { name: `Credit ${EMAIL}` }).click();
    await page.getByLabel('Amount (USD)').fill('5');
    await page.getByLabel('Note').fill('welcome credit');
    await page.getByRole('button', { name: 'Add credit' }).click();
    await page.getByText(`Credited $5.00 to ${EMAIL}.`, { exact: false }).waitFor();
    await axe(page, 'admin (credit)');
    await shot(page, 'admin-credit-1440');

    await page.goto('/dashboard/wallet');
    await page.getByText('$5.00', { exact: true }).first().waitFor();
    await page.getByRole('heading', { name: 'Journal' }).waitFor();
    await page.getByText('welcome credit', { exact: false }).first().waitFor();
    // without a card processor the page says how to get a balance instead of offering a top-up
    await page.getByText('ask an admin of this server for a credit', { exact: false }).first().waitFor();
    await page.getByText('$0.05 per agent call', { exact: false }).first().waitFor();

    // a paid gateway call with the key from the Connect panel takes $0.05
    const paid = await fetch(`${live.webUrl}/api/v1/gateway`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${state.key}` },
      body: JSON.stringify({ plugin: 'agent', messages: [{ role: 'user', content: 'a paid question' }] }),
    });
    expect(paid.status, await paid.clone().text()).toBeLessThan(300);
    await page.reload();
    await page.getByText('$4.95', { exact: true }).first().waitFor();
    await axe(page, 'wallet');
    await shot(page, 'wallet-1440');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('Commerce (x402): the agent’s standing and the paid endpoints, a refused amount, and a payment from the balance', async () => {
    const { page, errors } = await newPage(1440);
    await signIn(page);
    await page.goto(state.agentUrl!);
    await openTab(page, 'Commerce');
    await page.getByText('silver', { exact: true }).waitFor(); // the fake gateway's tier for the agent
    await page.getByText('Weather now', { exact: true }).waitFor();
    // over §8's $100 the form says so before anything is sent
    await page.getByLabel('Amount (USD)').fill('250');
    await page.getByLabel('Recipient').fill(`0x${'2'.repeat(40)}`);
    await page.getByRole('button', { name: 'Pay', exact: true }).click();
    await page.getByText('Amount exceeds $100 limit. Contact support for higher limits.').waitFor();
    expect(x402.requests.filter((r) => r.path === '/pay')).toHaveLength(0);
    await page.getByLabel('Amount (USD)').fill('1');
    await page.getByRole('button', { name: 'Pay', exact: true }).click();
    await page.getByText('Paid 1.00 USDC from your balance.').waitFor();
    expect(x402.requests.filter((r) => r.path === '/pay')).toHaveLength(1);
    await axe(page, 'agent commerce');
    await shot(page, 'agent-commerce-1440');
    // the $4.95 the last step left, less the dollar paid
    await page.goto('/dashboard/wallet');
    await page.getByText('$3.95', { exact: true }).first().waitFor();
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('at 390 px no page of the loop scrolls sideways', async () => {
    const { page, errors } = await newPage(390, { realPolling: true });
    await signIn(page);
    for (const [path, name] of [
      ['/dashboard', 'agents'],
      ['/dashboard/usage', 'usage'],
      ['/dashboard/wallet', 'wallet'],
      ['/dashboard/keys', 'keys'],
      ['/dashboard/admin', 'admin'],
    ] as const) {
      await page.goto(path);
      await page.getByRole('heading', { level: 1 }).first().waitFor();
      await page.waitForLoadState('networkidle');
      await noHorizontalScroll(page, 390, name);
      await shot(page, `${name}-390`);
    }
    await page.goto(state.agentUrl!);
    for (const tab of ['Chat', 'Connect', 'Files', 'Usage', 'Configuration', 'Manage']) {
      await openTab(page, tab);
      await page.waitForLoadState('networkidle');
      await noHorizontalScroll(page, 390, `agent ${tab}`);
      if (tab === 'Chat' || tab === 'Connect' || tab === 'Files') await shot(page, `agent-${tab.toLowerCase()}-390`);
    }
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);
});
