/**
 * What the dashboard says is true, in a real browser (Debian's Chromium through playwright-core,
 * the whole platform on real sockets with real local agents: test/helpers/live-platform.ts):
 * - without SMTP the sign-in page tells a user to ask the operator for a password reset link, and
 *   the Admin page makes one ("Reset link") that sets the user's new password (docs/admin.md);
 * - the Admin page's health says why it reads what it reads, and the machine's load is information;
 * - the Usage page says "unpriced" for a model without a price, and the Admin page's Model prices
 *   prices it (docs/admin.md "Model prices");
 * - Settings shows the plan the platform applies (an admin runs on Network) and the agent count;
 * - the Files tab of a new agent, whose workspace is not a repository, offers "Initialise a
 *   repository", which makes it one with the runtime's logs and openclaw.json ignored; an agent
 *   provisioned with "Start the workspace as a git repository" has one, with the platform's first commit;
 * - the model shown on every page: the agents list, the agent's header and its Configuration tab
 *   name the id GET /api/agents/:id answers, and after a change on the Configuration tab all of
 *   them name the new one (docs/agents.md "Model").
 * Every page passes axe. Skips without Chromium. The agents are provisioned once, by the Settings case.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { aiRepo, entryOf } from '../../src/domains/ai/ai.repo.ts';
import { expectAccessible as axe, buildDashboardForTest, chromiumAvailable, launchChromium, openPage } from '../helpers/browser.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';

const available = chromiumAvailable('small truths browser test');
const PASSWORD = 'correct horse battery staple';
const ADMIN = 'truth-admin@example.com';
const USER = 'truth-user@example.com';

let live: LivePlatform;
let browser: Browser;
let dashboard: { dir: string; remove: () => void } | undefined;
const state: { agentUrl?: string; gitAgentUrl?: string } = {};

// realPolling: for the case that tells a header updated at once from one updated at its next poll
const newPage = (options: { realPolling?: boolean } = {}) => openPage(browser, live.webUrl, { width: 1440, clipboard: true, ...options });

async function signIn(page: Page, email = ADMIN, password = PASSWORD) {
  await page.goto('/login');
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(/\/dashboard/);
}

async function provision(page: Page, name: string, options: { gitInit?: boolean } = {}) {
  await page.goto('/dashboard');
  await page.getByLabel('Name', { exact: true }).fill(name);
  if (options.gitInit) await page.getByLabel('Start the workspace as a git repository').check();
  await page.getByRole('button', { name: 'Provision' }).click();
  await page.waitForURL('**/dashboard/agents/**');
  await page.locator('.agent-head > .badge', { hasText: 'running' }).first().waitFor({ timeout: 60_000 });
  return page.url();
}

describe.skipIf(!available)('the dashboard tells the truth', () => {
  beforeAll(async () => {
    dashboard = await buildDashboardForTest();
    // no SMTP_URL: the server the reset link is for
    live = await startLivePlatform({ DASHBOARD_DIR: dashboard.dir, REGISTER_RATE_LIMIT: '100' });
    browser = await launchChromium();
  }, 180_000);
  afterAll(async () => {
    await browser?.close();
    await live?.close();
    dashboard?.remove();
  });

  it('no SMTP: the sign-in page says to ask the operator for a reset link; the Admin page makes one, and it sets the password', async () => {
    const { page, errors } = await newPage();
    await page.goto('/login');
    await page.getByText('Ask the operator of this platform for a password reset link').waitFor();
    await page.getByRole('button', { name: 'Create an account' }).click();
    await page.getByLabel('Email').fill(ADMIN);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.waitForURL('**/dashboard');
    await page.goto((await live.running()!.platform.services.admin.setupLinkIfNoAdmin())!);
    await page.getByRole('heading', { name: 'You are the admin' }).waitFor();
    const reg = await fetch(`${live.webUrl}/api/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: USER, password: 'the password they forgot' }),
    });
    expect(reg.status).toBe(201);

    await page.goto('/dashboard/admin');
    await page.getByRole('heading', { name: 'Server health' }).waitFor();
    // the verdict comes with its reason, and the machine's load is labelled as information
    await expect.poll(() => page.locator('.health-reason').textContent()).toMatch(/platform's/);
    await page.getByText('Machine CPU (information)').waitFor();
    await page.getByText('Platform CPU (event loop)').waitFor();

    await page.getByRole('button', { name: `Password reset link for ${USER}` }).click();
    await page.getByRole('heading', { name: `Password reset link for ${USER}` }).waitFor();
    await page.getByRole('button', { name: 'Make a link' }).click();
    const link = (await page.locator('code.reset-link').textContent())!;
    expect(link).toMatch(new RegExp(`^${live.webUrl}/reset-password\\?token=[A-Za-z0-9_-]{43}$`));
    await axe(page, 'admin with a reset link');
    expect(errors).toEqual([]);
    await page.context().close();

    // the user opens it, signed out, and sets a new password that signs in
    const user = await newPage();
    await user.page.goto(link);
    await user.page.getByRole('heading', { name: 'Set a new password' }).waitFor();
    await user.page.getByLabel('New password').fill('a password set from the link');
    await user.page.getByRole('button', { name: 'Set new password' }).click();
    await user.page.getByRole('heading', { name: 'Password changed' }).waitFor();
    await signIn(user.page, USER, 'a password set from the link');
    expect(user.errors).toEqual([]);
    await user.page.context().close();
  }, 240_000);

  it('Admin page: Model prices lists the custom model as unpriced and prices it; the Usage page says "unpriced", never $0.00', async () => {
    const custom = `custom/${live.config.AI_CUSTOM_MODEL}`;
    const db = live.database.db;
    const admin = await db.kysely.selectFrom('users').select('id').where('email', '=', ADMIN).executeTakeFirstOrThrow();
    // calls of the custom model before anyone priced it: metered at $0
    await aiRepo.insertUsage(db.pool, [
      entryOf({
        userId: admin.id,
        agentId: null,
        model: custom,
        provider: 'custom',
        promptTokens: 10,
        completionTokens: 5,
        totalTokens: 15,
        cost: 0,
        priced: false,
        billTo: null,
        createdAt: new Date(),
      }),
    ]);
    const { page, errors } = await newPage();
    await signIn(page);
    await page.goto('/dashboard/usage');
    const byModel = page.getByRole('table', { name: 'Usage by model' });
    await expect.poll(() => byModel.getByRole('row', { name: new RegExp(custom) }).textContent()).toContain('unpriced');
    await expect.poll(() => page.locator('.stats dd').first().textContent()).toBe('unpriced');
    await axe(page, 'usage with an unpriced model');

    await page.goto('/dashboard/admin');
    await page.getByRole('heading', { name: 'Model prices' }).waitFor();
    const prices = page.getByRole('table', { name: 'Model prices' });
    await prices
      .getByRole('row', { name: new RegExp(custom) })
      .getByText('unpriced')
      .waitFor();
    await page.getByRole('button', { name: `Edit the price of ${custom}` }).click();
    expect(await page.getByLabel('Model', { exact: true }).inputValue()).toBe(custom);
    await page.getByLabel('Input (USD / M tokens)').fill('1.5');
    await page.getByLabel('Output (USD / M tokens)').fill('2');
    await page.getByRole('button', { name: 'Set price' }).click();
    await page.getByText(`${custom} now costs $1.5 per million input tokens and $2 per million output tokens.`).waitFor();
    await page.getByLabel('Show').selectOption('operator');
    await prices
      .getByRole('row', { name: new RegExp(custom) })
      .getByText('this page')
      .waitFor();
    await page.getByRole('table', { name: 'Recent price changes' }).getByText(ADMIN).waitFor();
    await axe(page, 'admin model prices');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);

  it('Settings: an admin with two agents reads the plan the platform applies (Network) and "2 of 100 agents"', async () => {
    const { page, errors } = await newPage();
    await signIn(page);
    state.agentUrl = await provision(page, 'truth-one');
    state.gitAgentUrl = await provision(page, 'truth-two', { gitInit: true });
    await page.goto('/dashboard/settings');
    const plan = page.locator('p', { hasText: 'Your plan:' });
    await expect
      .poll(() => plan.textContent())
      .toMatch(/^Your plan: Network \(admins run on Network; your account's own plan is Solo\) · 2 of 100 agents$/);
    await page.locator('.plan-current', { hasText: 'Network' }).waitFor();
    await axe(page, 'settings');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 240_000);

  it('Files: a new agent\'s workspace offers "Initialise a repository"; afterwards its git status shows, logs and openclaw.json ignored', async () => {
    const { page, errors } = await newPage();
    await signIn(page);
    await page.goto(state.agentUrl!);
    await page.getByRole('tab', { name: 'Files', exact: true }).click();
    await page.getByText('The workspace is not a git repository yet').waitFor();
    await axe(page, 'files before git init');
    await page.getByRole('button', { name: 'Initialise a repository' }).click();
    await page.getByText(/^Branch main · no remote$/).waitFor();
    const changes = page.locator('.git-changes li');
    await expect.poll(() => changes.allTextContents()).toContainEqual(expect.stringContaining('.gitignore'));
    const listed = (await changes.allTextContents()).join('\n');
    expect(listed).not.toMatch(/logs\/|openclaw\.json/);
    await page.getByRole('button', { name: 'Commit all changes' }).click();
    await page.getByText(/^Committed [0-9a-f]{7}\.$/).waitFor();
    await axe(page, 'files after git init');

    // provisioned with the box ticked: a repository from the start, with the platform's first commit
    await page.goto(state.gitAgentUrl!);
    await page.getByRole('tab', { name: 'Files', exact: true }).click();
    await page.getByText(/^Branch main · no remote$/).waitFor();
    await page.locator('.git-log li', { hasText: 'Initial commit: the workspace as provisioned' }).waitFor();
    await expect.poll(() => page.locator('.git-log li').count()).toBe(1);
    expect(await page.getByRole('button', { name: 'Initialise a repository' }).count()).toBe(0);
    expect(errors).toEqual([]);
    await page.context().close();
  }, 180_000);

  it('the model shown on every page is the one GET /api/agents/:id names, before and after a change on the Configuration tab', async () => {
    const { page, errors } = await newPage({ realPolling: true });
    await signIn(page);
    const id = decodeURIComponent(state.agentUrl!.split('/').pop()!);
    const apiModel = async () => ((await (await page.request.get(`/api/agents/${id}`)).json()) as { agent: { model: string } }).agent.model;
    const listed = async () => {
      await page.goto('/dashboard');
      const row = page.getByRole('row').filter({ has: page.getByRole('link', { name: 'truth-one', exact: true }) });
      return (await row.locator('td[data-label="Model"]').textContent())?.trim();
    };
    const onAgentPage = async () => {
      await page.goto(state.agentUrl!);
      const header = (await page.locator('.agent-head .agent-model').textContent())?.trim();
      await page.getByRole('tab', { name: 'Configuration', exact: true }).click();
      const select = page.getByRole('tabpanel').getByLabel('Model', { exact: true });
      await select.waitFor();
      return { header, configured: await select.inputValue() };
    };

    const before = await apiModel();
    expect(before).toMatch(/^[a-z0-9-]+\/[\w.:-]+$/); // a catalogue id, never a §4.7 name or `auto`
    expect(await listed()).toBe(before);
    expect(await onAgentPage()).toEqual({ header: before, configured: before });

    // another model the agent can run, picked on the Configuration tab and saved
    const select = page.getByRole('tabpanel').getByLabel('Model', { exact: true });
    const options = await Promise.all((await select.locator('option').all()).map((o) => o.getAttribute('value')));
    const after = options.find((m) => m !== before);
    expect(after).toBeDefined();
    await select.selectOption(after!);
    await page.getByRole('button', { name: 'Save configuration' }).click();
    await page.getByText('Saved and applied.').waitFor();
    // the header follows at once, not at its next poll
    await expect.poll(() => page.locator('.agent-head .agent-model').textContent()).toBe(after);
    await axe(page, 'configuration after a model change');

    expect(await apiModel()).toBe(after);
    expect(await listed()).toBe(after);
    expect(await onAgentPage()).toEqual({ header: after, configured: after });
    expect(errors).toEqual([]);
    await page.context().close();
  }, 120_000);
});
