/**
 * Identity in a real browser (docs/identity.md, §4.1, §4.18 password reset): Debian's Chromium
 * driven by playwright-core against the whole platform on real sockets, with a local OpenID
 * provider (test/fakes/oidc-provider.ts: discovery, authorize, RS256 ID tokens from its own JWKS)
 * and a local SMTP server (test/fakes/smtp.ts) that the test reads.
 *
 * - "Sign in with the identity provider" on the sign-in page runs the whole code flow and lands on
 *   the dashboard; Settings lists the linked account.
 * - The Calendar page connects a calendar (a local fake of the provider's OAuth and Calendar v3
 *   API), creates an event and shows the free one-hour slots of its day (§4.6).
 * - "Forgot your password?" mails a link; the link's page sets a new password; the old one is
 *   refused and the new one signs in. Both pages pass axe and fit 390 px.
 * - An address someone registered with a password, then proved by its owner with the provider:
 *   the dashboard shows the owner the one-time notice until it is dismissed.
 * Skips without Chromium.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeCalendar, startFakeCalendar } from '../fakes/calendar-api.ts';
import { type FakeOidcProvider, startFakeOidcProvider } from '../fakes/oidc-provider.ts';
import { type FakeSmtp, startFakeSmtp } from '../fakes/smtp.ts';
import {
  expectAccessible as axe,
  buildDashboardForTest,
  chromiumAvailable,
  expectNoHorizontalScroll,
  launchChromium,
  openPage,
} from '../helpers/browser.ts';
import { type LivePlatform, startLivePlatform } from '../helpers/live-platform.ts';

declare const location: { href: string };

const available = chromiumAvailable('identity browser test');

let live: LivePlatform;
let idp: FakeOidcProvider;
let smtp: FakeSmtp;
let calendar: FakeCalendar;
let browser: Browser;
let dashboard: { dir: string; remove: () => void } | undefined;

const newPage = (width: number) => openPage(browser, live.webUrl, { width, height: 800 });

describe.skipIf(!available)('identity in Chromium', () => {
  beforeAll(async () => {
    dashboard = await buildDashboardForTest();
    idp = await startFakeOidcProvider();
    smtp = await startFakeSmtp();
    calendar = await startFakeCalendar();
    live = await startLivePlatform({
      DASHBOARD_DIR: dashboard.dir,
      REGISTER_RATE_LIMIT: '100',
      IDP_CLIENT_ID: idp.clientId,
      IDP_CLIENT_SECRET: idp.clientSecret,
      IDP_ISSUER: idp.issuer,
      SMTP_URL: smtp.url,
      MAIL_FROM: 'Agent platform <no-reply@platform.example>',
      CALENDAR_CLIENT_ID: calendar.clientId,
      CALENDAR_CLIENT_SECRET: calendar.clientSecret,
      CALENDAR_AUTH_URL: calendar.authUrl,
      CALENDAR_TOKEN_URL: calendar.tokenUrl,
      CALENDAR_API_URL: calendar.apiUrl,
    });
    browser = await launchChromium();
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await live?.close();
    await idp?.close();
    await smtp?.close();
    await calendar?.close();
    dashboard?.remove();
  });

  it('signs in with the identity provider, lists the linked account in Settings, and connects a calendar', async () => {
    idp.user = { sub: 'idp-browser-1', email: 'idp-browser@example.com', email_verified: true, name: 'Idp Browser' };
    const { page, errors } = await newPage(1440);
    await page.goto('/login');
    await page
      .getByRole('navigation', { name: 'Other ways to sign in' })
      .getByRole('link', { name: 'Sign in with the identity provider' })
      .click();
    await page.waitForURL(/\/dashboard$/);
    // signed in: the header names the account by the name the provider gave
    await page.getByText('Idp Browser').first().waitFor();
    await page.getByRole('link', { name: 'Settings', exact: true }).click();
    await page.getByRole('heading', { name: 'Linked accounts' }).waitFor();
    await page.getByRole('cell', { name: 'Identity provider', exact: true }).waitFor();
    await axe(page, 'settings (linked accounts)');

    // §4.6 the calendar: connect (the provider's consent comes straight back), create an event, see it and the free hours
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Calendar' }).click();
    await page.getByRole('button', { name: 'Connect calendar' }).click();
    await page.getByText('Your calendar is connected.').waitFor();
    await page.getByLabel('Title').fill('Standup from the browser');
    await page.getByLabel('Start').fill('2030-01-10T10:00');
    await page.getByLabel('End', { exact: true }).fill('2030-01-10T11:00');
    await page.getByRole('button', { name: 'Create event' }).click();
    await page.getByText('Event “Standup from the browser” created.').waitFor();
    await page.getByLabel('Day').fill('2030-01-10');
    await page.getByRole('button', { name: 'Show availability' }).click();
    const slots = page.getByRole('list', { name: 'Free slots on 2030-01-10' });
    await slots.waitFor();
    // 09:00-23:00 in one-hour slots, the 10:00 hour busy
    expect(await slots.getByRole('listitem').allTextContents()).not.toContain('10:00–11:00');
    expect(await slots.getByRole('listitem').count()).toBe(13);
    await axe(page, 'calendar');
    expect(errors).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('resets a forgotten password through the mailed link; the old password stops working', async () => {
    const email = 'forgetful@example.com';
    const reg = await fetch(`${live.webUrl}/api/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'the old passphrase' }),
    });
    expect(reg.status).toBe(201);
    const { page, errors } = await newPage(390);
    await page.goto('/login');
    await page.getByRole('link', { name: 'Forgot your password?' }).click();
    await page.getByRole('heading', { name: 'Reset your password' }).waitFor();
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Send reset link' }).click();
    await page.getByText('a link to set a new password is on its way', { exact: false }).waitFor();
    await axe(page, 'reset request');

    const mail = await smtp.waitFor((m) => m.to.includes(email));
    const link = /https?:\/\/\S+reset-password\?token=[A-Za-z0-9_-]+/.exec(mail.text)?.[0];
    expect(link, mail.text).toBeDefined();
    await page.goto(link!);
    await page.getByRole('heading', { name: 'Set a new password' }).waitFor();
    // the token leaves the address bar (and so every Referer) once the page has it
    expect(await page.evaluate(() => location.href)).not.toContain('token=');
    await page.getByLabel('New password').fill('a brand new passphrase');
    await page.getByRole('button', { name: 'Set new password' }).click();
    await page.getByRole('heading', { name: 'Password changed' }).waitFor();
    await axe(page, 'reset confirm');
    await expectNoHorizontalScroll(page, 390, 'reset confirm');

    const login = (password: string) =>
      fetch(`${live.webUrl}/api/auth/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email, password }),
      });
    expect((await login('the old passphrase')).status).toBe(401);
    expect((await login('a brand new passphrase')).status).toBe(200);
    expect(errors).toEqual([]);
    await page.context().close();
  }, 60_000);

  it('tells the owner, until dismissed, that the password someone registered their address with was cleared', async () => {
    const email = 'preregistered@example.com';
    const reg = await fetch(`${live.webUrl}/api/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'somebody else chose this' }),
    });
    expect(reg.status).toBe(201);
    idp.user = { sub: 'idp-browser-2', email, email_verified: true, name: 'Real Owner' };
    const { page, errors } = await newPage(390);
    await page.goto('/login');
    await page
      .getByRole('navigation', { name: 'Other ways to sign in' })
      .getByRole('link', { name: 'Sign in with the identity provider' })
      .click();
    await page.waitForURL(/\/dashboard$/);
    const notice = page.getByRole('region', { name: 'Notice about your account' });
    await notice.getByText('Someone had registered this email with a password before you proved it', { exact: false }).waitFor();
    expect(await notice.getByRole('link', { name: 'Set a password' }).getAttribute('href')).toBe('/reset-password');
    await axe(page, 'account notice');
    await expectNoHorizontalScroll(page, 390, 'account notice');
    await notice.getByRole('button', { name: 'Dismiss' }).click();
    await notice.waitFor({ state: 'detached' });
    await page.reload();
    await page.getByRole('heading', { name: 'Agents', level: 1 }).waitFor();
    expect(await notice.count()).toBe(0);
    expect(errors).toEqual([]);
    await page.context().close();
  }, 60_000);
});
