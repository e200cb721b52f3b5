/**
 * The dashboard in a real browser (docs/dashboard.md): Debian's Chromium driven by playwright-core
 * against the whole platform on real sockets (live-platform: web, backend, workers, a real local
 * agent whose model is a local OpenAI-compatible fake) serving a fresh build of dashboard/.
 *
 * Clicks through sign up → sign out → wrong password → sign in → provision (a name too long
 * first) → running → chat (streamed; two turns, in order for the model and after a reload) →
 * rename → logs → API key (shown once, nowhere in storage) → pages without the integrations this
 * server lacks → delete → the setup link signed out → sign out; checks every main page with
 * axe-core (no serious or critical violation), at 1440 px and 360 px (no horizontal scroll), and
 * writes screenshots of the main pages at both widths (the chat, usage and wallet ones are product-loop.e2e.test.ts's, with content) to .test-results/screenshots
 * (docs/screenshots with UPDATE_SCREENSHOTS=1, which the README shows). Skips with a message when
 * Chromium is not installed.
 */
import type { Browser, Page } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
declare const window: unknown;
declare const document: { cookie: string };
declare const location: { href: string };
declare const localStorage: object;
declare const sessionStorage: object;

const available = chromiumAvailable('dashboard browser tests');
const PASSWORD = 'correct horse battery staple';
const EMAIL = 'browser-user@example.com';

let live: LivePlatform;
let browser: Browser;
let dashboard: { dir: string; remove: () => void } | undefined;

const newPage = (width: number) => openPage(browser, live.webUrl, { width, height: width < 600 ? 740 : 900 });

async function signIn(page: Page, password = PASSWORD, email = EMAIL) {
  await page.goto('/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
}

describe.skipIf(!available)('the dashboard in Chromium', () => {
  beforeAll(async () => {
    dashboard = await buildDashboardForTest();
    live = await startLivePlatform({ DASHBOARD_DIR: dashboard.dir, REGISTER_RATE_LIMIT: '100' });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await live?.close();
    dashboard?.remove();
  });

  it('sign up → sign in → provision → running → chat → rename → API key → delete → sign out, with the error paths', async () => {
    const { page, errors } = await newPage(1440);
    const apiCalls: string[] = [];
    page.on('request', (r) => {
      if (new URL(r.url()).pathname.startsWith('/api/')) apiCalls.push(`${r.method()} ${new URL(r.url()).pathname}`);
    });

    // the root sends a newcomer to the sign-in page
    await page.goto('/');
    await page.waitForURL('**/login');
    await axe(page, 'login');
    await shot(page, 'login-1440');

    // sign up: a short password is refused before anything is sent
    await page.getByRole('button', { name: 'Create an account' }).click();
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill('short');
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByText('Use at least 8 characters.').waitFor();
    expect(apiCalls.filter((c) => c === 'POST /api/register')).toEqual([]);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL('**/dashboard');
    await page.getByText('You have no agents yet').waitFor();

    // sign out, then a wrong password is shown in words
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/login');
    await signIn(page, 'not the password');
    await page.getByRole('alert').filter({ hasText: 'Wrong email or password.' }).waitFor();
    expect(page.url()).toContain('/login');
    await signIn(page);
    await page.waitForURL('**/dashboard');
    await axe(page, 'agents (empty)');

    // provision: a name too long is refused in the form, then a good one provisions
    const name = page.getByLabel('Name', { exact: true });
    await name.fill('x'.repeat(65));
    await page.getByRole('button', { name: 'Provision' }).click();
    await page.getByText('Use at most 64 characters').waitFor();
    expect(apiCalls.filter((c) => c === 'POST /api/agents/provision')).toEqual([]);
    await name.fill('browser-agent');
    await page.getByRole('button', { name: 'Provision' }).click();
    await page.waitForURL('**/dashboard/agents/**');
    await page.getByRole('heading', { level: 1, name: 'browser-agent' }).waitFor();
    await page.locator('.agent-head .badge', { hasText: 'running' }).first().waitFor({ timeout: 60_000 });

    // chat, streamed through the platform to the agent and its model
    await page.getByLabel('Message').fill('hello from the browser');
    await page.getByLabel('Message').press('Enter');
    await page.locator('.bubble-agent', { hasText: 'Echo: hello from the browser' }).waitFor({ timeout: 30_000 });
    await page.getByLabel('Message').fill('and a second question');
    await page.getByLabel('Message').press('Enter');
    await page.locator('.bubble-agent', { hasText: 'Echo: and a second question' }).waitFor({ timeout: 30_000 });
    // the model got the conversation in order: question, answer, question
    const sent = (live.upstream.requests.at(-1)!.body.messages as { role: string; content: unknown }[]).filter((m) => m.role !== 'system');
    expect(sent.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    // after a reload the stored history reads in the order it was said
    await page.reload();
    await page.locator('.bubble-agent', { hasText: 'Echo: and a second question' }).waitFor();
    expect(await page.locator('.chat .bubble').allTextContents()).toEqual([
      'You: hello from the browser',
      'browser-agent: Echo: hello from the browser',
      'You: and a second question',
      'browser-agent: Echo: and a second question',
    ]);
    await axe(page, 'agent chat'); // its screenshot is product-loop.e2e.test.ts's (a reply in markdown)

    // logs go live
    await page.getByRole('tab', { name: 'Logs' }).click();
    await page.getByText('● live').waitFor();
    // health shows stats and the watchdog
    await page.getByRole('tab', { name: 'Health' }).click();
    await page.getByRole('heading', { name: 'Watchdog' }).waitFor();

    // rename (a name too long refused first)
    await page.getByRole('tab', { name: 'Manage' }).click();
    const rename = page.getByLabel('Name', { exact: true });
    await rename.fill('y'.repeat(65));
    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByText('Use at most 64 characters').waitFor();
    await rename.fill('renamed-agent');
    await page.getByRole('button', { name: 'Rename' }).click();
    await page.getByRole('heading', { level: 1, name: 'renamed-agent' }).waitFor();
    const agentUrl = page.url();

    // the agents list shows it running, with its watchdog state
    await page.getByRole('link', { name: 'Agents' }).click();
    await page.getByRole('link', { name: 'renamed-agent' }).waitFor();
    await page.locator('tbody .badge', { hasText: 'running' }).first().waitFor();
    await axe(page, 'agents');
    await shot(page, 'agents-1440');

    // an API key: shown once, in no storage, gone once acknowledged
    await page.getByRole('link', { name: 'API keys' }).click();
    await page.getByLabel('Key name').fill('browser key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.getByTestId('new-key').textContent())!.trim();
    expect(key).toMatch(/^sk_[A-Za-z0-9_-]{40}$/);
    const stored = await page.evaluate(() => ({
      local: JSON.stringify({ ...localStorage }),
      session: JSON.stringify({ ...sessionStorage }),
      cookie: document.cookie,
      url: location.href,
    }));
    expect(stored.local).toBe('{}');
    expect(stored.session).toBe('{}');
    expect(stored.cookie).not.toContain('service-session'); // HttpOnly: the page never sees it
    expect(stored.url).not.toContain(key);
    await axe(page, 'keys');
    await shot(page, 'keys-1440');
    await page.getByRole('button', { name: 'I have copied it' }).click();
    expect(await page.content()).not.toContain(key);
    await page.getByRole('cell', { name: 'browser key', exact: true }).waitFor();

    // the other pages load without errors and pass axe
    for (const [link, heading] of [
      ['Workflows', 'New workflow'],
      ['Configuration', 'Backups'],
      ['Wallet', 'Session wallet'],
      ['Usage', 'AI usage'],
      ['Settings', 'Plan'],
    ] as const) {
      await page.getByRole('link', { name: link, exact: true }).click();
      await page.getByRole('heading', { name: heading, exact: true }).first().waitFor();
      await axe(page, link);
    }
    // without a card processor no plan is offered for sale; without a calendar client no Calendar entry
    expect(await page.getByRole('button', { name: /^Subscribe/ }).count()).toBe(0);
    await page.getByText('Plans are not sold on this server').waitFor();
    expect(await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Calendar' }).count()).toBe(0);

    // a workflow: create, add a node with JSON config (bad JSON refused in the form), disable
    await page.getByRole('link', { name: 'Workflows', exact: true }).click();
    await page.getByLabel('Name', { exact: true }).fill('nightly report');
    await page.getByRole('button', { name: 'Create workflow' }).click();
    await page.getByRole('button', { name: 'Add node' }).click();
    await page.getByLabel('Node 2 config (JSON)').fill('{"url": ');
    await page.getByRole('button', { name: 'Save workflow' }).click();
    await page.getByText('Node 2: the config is not valid JSON').waitFor();
    await page.getByLabel('Node 2 config (JSON)').fill('{"url": "https://example.com"}');
    await page.getByRole('button', { name: 'Save workflow' }).click();
    await page.getByText('2 nodes').waitFor();
    await page.getByRole('checkbox', { name: 'Enabled' }).click(); // controlled: it changes when the server has saved
    await page.locator('.badge', { hasText: 'disabled' }).waitFor();

    // configuration: save makes a backup, restore brings the old one back
    await page.getByRole('link', { name: 'Configuration', exact: true }).click();
    await page.getByLabel('Configuration (JSON)').fill('{"theme": "dark"}');
    await page.getByRole('button', { name: 'Save configuration' }).click();
    await page.getByText('Saved. The previous configuration is in the backups below.').waitFor();
    await page
      .getByRole('button', { name: /^Restore the backup of/ })
      .first()
      .click();
    await page.getByText(/^Restored the configuration of/).waitFor();

    // wallet: create the session wallet; without a card processor and a chain RPC the page says so
    // once and offers neither a top-up nor balances that would fail
    await page.getByRole('link', { name: 'Wallet', exact: true }).click();
    await page.getByRole('button', { name: 'Create wallet' }).click();
    await page.locator('code.address').first().waitFor();
    expect(await page.locator('code.address').first().textContent()).toMatch(/^0x[0-9a-fA-F]{40}$/);
    await page.getByText('This server is not set up for on-chain balances or card top-ups.').waitFor();
    expect(await page.getByRole('button', { name: 'Continue to payment' }).count()).toBe(0);
    expect(await page.getByRole('heading', { name: 'Stablecoin balances' }).count()).toBe(0);

    // delete the agent
    await page.goto(agentUrl);
    await page.getByRole('tab', { name: 'Manage' }).click();
    await page.getByRole('button', { name: 'Delete agent' }).click();
    await page.getByRole('button', { name: 'Yes, delete renamed-agent' }).click();
    await page.waitForURL(/\/dashboard$/);
    await page.getByText('You have no agents yet').waitFor({ timeout: 30_000 });

    // the first-run setup link: signed out it leads through the sign-in page and back, then says
    // what happened and leads on to the Admin page
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/login');
    const link = (await live.running()!.platform.services.admin.setupLinkIfNoAdmin())!;
    expect(link.startsWith(`${live.webUrl}/dashboard/setup?token=`)).toBe(true);
    await page.goto(link);
    await page.waitForURL('**/login?next=**');
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.getByRole('heading', { name: 'You are the admin' }).waitFor();
    await page.getByText(`${EMAIL} is now this platform's admin.`).waitFor();
    await axe(page, 'admin setup');
    await page.getByRole('link', { name: 'Open the Admin page' }).click();
    await page.getByRole('heading', { name: 'Server health' }).waitFor();
    // the link is spent: opening it again says so, in words
    await page.goto(link);
    await page.getByRole('heading', { name: 'This setup link does not work' }).waitFor();
    await page.getByText('You are already an admin; this link has been used.').waitFor();
    await page.getByRole('link', { name: 'Go to your agents' }).click();
    await page.waitForURL(/\/dashboard$/);

    // sign out: back to the sign-in page, and the dashboard asks for a session again
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL('**/login');
    await page.goto('/dashboard/keys');
    await page.waitForURL('**/login?next=%2Fdashboard%2Fkeys');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 240_000);

  it('readable messages for /login?error= and /dashboard/calendar?error=, and a 360 px layout without horizontal scroll', async () => {
    const { page, errors } = await newPage(360);
    await page.goto('/login?error=IdpNotConfigured');
    await page.getByText('That sign-in method is not set up on this server').waitFor();
    await noHorizontalScroll(page, 360, 'login');
    await shot(page, 'login-360');
    const email = 'narrow-user@example.com';
    const reg = await fetch(`${live.webUrl}/api/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: PASSWORD }),
    });
    expect(reg.status).toBe(201);
    await signIn(page, PASSWORD, email);
    await page.waitForURL('**/dashboard');
    await page.getByRole('heading', { name: 'Provision an agent' }).waitFor();
    await noHorizontalScroll(page, 360, 'agents');
    await axe(page, 'agents at 360 px');
    await shot(page, 'agents-360');
    // the navigation folds into a menu button
    await page.getByRole('button', { name: 'Menu' }).click();
    await page.getByRole('link', { name: 'Wallet' }).click();
    await page.getByRole('heading', { name: 'Session wallet' }).waitFor();
    // the calendar callback's page still explains its codes (it has no navigation entry without a calendar)
    await page.goto('/dashboard/calendar?error=invalid_state');
    await page.getByText('The connection link had expired, was already used').waitFor();
    await page.goto('/dashboard/wallet?top_up=cancelled');
    await page.getByText('The top-up was cancelled; nothing was charged.').waitFor();
    await noHorizontalScroll(page, 360, 'wallet');
    await shot(page, 'wallet-360');
    await page.goto('/dashboard/keys');
    await page.getByRole('heading', { name: 'Your keys' }).waitFor();
    await noHorizontalScroll(page, 360, 'keys');
    await shot(page, 'keys-360');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it("wallet sign-in (SIWE) with the browser's wallet: the button appears only with a wallet, and signs in", async () => {
    const plain = await newPage(1440);
    await plain.page.goto('/login');
    await plain.page.getByRole('button', { name: 'Sign in', exact: true }).waitFor();
    expect(await plain.page.getByRole('button', { name: 'Sign in with a wallet' }).count()).toBe(0);
    await plain.page.context().close();

    const account = privateKeyToAccount(generatePrivateKey());
    const { page, errors } = await newPage(1440);
    // an EIP-1193 wallet in the page whose key stays in the test process
    await page.exposeFunction('__walletSign', (hex: string) => account.signMessage({ message: { raw: hex as `0x${string}` } }));
    await page.addInitScript((address: string) => {
      (window as unknown as { ethereum: unknown }).ethereum = {
        request: async ({ method, params }: { method: string; params?: unknown[] }) => {
          if (method === 'eth_requestAccounts') return [address];
          if (method === 'personal_sign')
            return (window as unknown as { __walletSign(h: unknown): Promise<string> }).__walletSign(params?.[0]);
          throw new Error(`unsupported ${method}`);
        },
      };
    }, account.address.toLowerCase());
    await page.goto('/login');
    await page.getByRole('button', { name: 'Sign in with a wallet' }).click();
    await page.waitForURL('**/dashboard');
    await page.getByRole('heading', { name: 'Provision an agent' }).waitFor();
    const session = (await page.evaluate(async () => (await fetch('/api/auth/session')).json())) as { user: { email: string } };
    expect(session.user.email.startsWith(account.address.toLowerCase())).toBe(true);
    expect(errors).toEqual([]);
    await page.context().close();
  }, 60_000);
});
