/**
 * §4.6 Calendar against a local provider (test/fakes/calendar-api.ts): the connect round trip and
 * every callback error redirect, a connect link that completes only in the browser and account
 * that asked for it, once (docs/calendar.md "How a connection works"), each action, token refresh, 401 when
 * not connected, tokens sealed in the database, and one user's connection invisible to another
 * (row-level security).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createOAuthStateSealer } from '../../src/domains/accounts/oauth-state.rules.ts';
import { CALENDAR_STATE_COOKIE, createCalendarState, createCalendarStateCookie } from '../../src/domains/calendar/calendar-state.rules.ts';
import { type FakeCalendar, startFakeCalendar } from '../fakes/calendar-api.ts';
import { signUp, startTestPlatform, TEST_SECRETS, type TestPlatform } from '../helpers/platform.ts';

const PUBLIC_URL = 'http://localhost:3000';
let fake: FakeCalendar;
let t: TestPlatform;
let unconfigured: TestPlatform;

beforeAll(async () => {
  fake = await startFakeCalendar();
  const base = { REGISTER_RATE_LIMIT: '100000', PUBLIC_URL };
  [t, unconfigured] = await Promise.all([
    startTestPlatform({
      ...base,
      CALENDAR_CLIENT_ID: fake.clientId,
      CALENDAR_CLIENT_SECRET: fake.clientSecret,
      CALENDAR_AUTH_URL: fake.authUrl,
      CALENDAR_TOKEN_URL: fake.tokenUrl,
      CALENDAR_API_URL: fake.apiUrl,
    }),
    startTestPlatform(base),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), unconfigured?.close()]);
  await fake?.close();
});
beforeEach(() => {
  for (const k of Object.keys(fake.knobs) as (keyof FakeCalendar['knobs'])[]) if (k !== 'accessTtlSec') delete fake.knobs[k];
  fake.knobs.accessTtlSec = 3600;
});

let accountNo = 0;
type User = Awaited<ReturnType<typeof signUp>>;
const get = (p: TestPlatform, cookie: string | undefined, query: string) =>
  p.web.inject({ method: 'GET', url: `/api/calendar${query}`, headers: cookie ? { cookie } : {} });
const post = (cookie: string | undefined, payload: Record<string, unknown>, p: TestPlatform = t) =>
  p.web.inject({ method: 'POST', url: '/api/calendar', headers: cookie ? { cookie } : {}, payload });

/** A connect under way: the consent URL, and the state cookie the connect answer set in the asking browser. */
type Connect = { authUrl: string; stateCookie: string };

/** POST connect as `u`, as the dashboard does: the answer sets the state cookie (HttpOnly, callback path only). */
async function connect(u: User): Promise<Connect> {
  const res = await post(u.cookie, { action: 'connect' });
  expect(res.statusCode).toBe(200);
  const set = res.cookies.find((c) => c.name === CALENDAR_STATE_COOKIE);
  expect(set).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/api/calendar/callback', maxAge: 600 });
  return { authUrl: res.json().authUrl, stateCookie: `${CALENDAR_STATE_COOKIE}=${set!.value}` };
}
/** The provider's consent page (the fake says yes at once): where it sends the browser back, with a new code. */
async function consent(authUrl: string): Promise<URL> {
  const res = await fetch(authUrl, { redirect: 'manual' });
  expect(res.status).toBe(302);
  return new URL(res.headers.get('location')!);
}
/** POST connect and consent: the callback URL, and the state cookie of `u`'s browser. */
async function startConnect(u: User): Promise<{ target: URL; stateCookie: string }> {
  const c = await connect(u);
  return { target: await consent(c.authUrl), stateCookie: c.stateCookie };
}
/** Our callback as a browser holding `cookies` (its session, its state cookie; none: signed out) follows the redirect. */
const callback = (target: URL, ...cookies: (string | undefined)[]) => {
  const cookie = cookies.filter((c) => c !== undefined).join('; ');
  return t.web.inject({ method: 'GET', url: `${target.pathname}${target.search}`, headers: cookie ? { cookie } : {} });
};
const redirectOf = async (target: URL, ...cookies: (string | undefined)[]) => (await callback(target, ...cookies)).headers.location;

async function connectedUser(timeZone = 'America/New_York'): Promise<User & { calendarId: string }> {
  const u = await signUp(t.web);
  const calendarId = `person${accountNo++}@example.com`;
  fake.consentAs = { calendarId, timeZone };
  const { target, stateCookie } = await startConnect(u);
  const res = await callback(target, u.cookie, stateCookie);
  expect(res.headers.location).toBe('/dashboard/calendar?connected=true');
  return { ...u, calendarId };
}

describe('§4.6 connect and callback', () => {
  it('status is {connected:false} without a session and before connecting; auth sends a visitor to /login', async () => {
    expect((await get(t, undefined, '?action=status')).json()).toEqual({ connected: false });
    const u = await signUp(t.web);
    expect((await get(t, u.cookie, '')).json()).toEqual({ connected: false });
    const auth = await get(t, undefined, '?action=auth');
    expect(auth.statusCode).toBe(302);
    expect(auth.headers.location).toBe('/login');
  });

  it('connect and auth give the consent URL (client, redirect URI, scopes, offline access, a signed state) and set its cookie', async () => {
    const u = await signUp(t.web);
    for (const res of [await post(u.cookie, { action: 'connect' }), await get(t, u.cookie, '?action=auth')]) {
      const url = new URL(res.statusCode === 302 ? (res.headers.location as string) : res.json().authUrl);
      expect(`${url.origin}${url.pathname}`).toBe(fake.authUrl);
      const q = url.searchParams;
      expect(q.get('client_id')).toBe(fake.clientId);
      expect(q.get('redirect_uri')).toBe(`${PUBLIC_URL}/api/calendar/callback`);
      expect(q.get('response_type')).toBe('code');
      expect(q.get('scope')?.split(' ')).toContain('https://www.googleapis.com/auth/calendar.events');
      expect(q.get('access_type')).toBe('offline');
      expect(q.get('prompt')).toBe('consent');
      expect(q.get('state')).toMatch(/^[\w-]+\.[\w-]+$/);
      // the state travels back to this browser only, sealed: its value shows nothing of the state
      const set = res.cookies.find((c) => c.name === CALENDAR_STATE_COOKIE);
      expect(set).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/api/calendar/callback', maxAge: 600 });
      expect(set!.value).not.toContain(q.get('state')!.split('.')[0]);
    }
  });

  it('the round trip stores the primary calendar and its timezone; the tokens are sealed in the database', async () => {
    const u = await connectedUser('Europe/Berlin');
    expect((await get(t, u.cookie, '?action=status')).json()).toEqual({ connected: true });
    const row = await t.database.db.kysely
      .selectFrom('calendar_connections')
      .selectAll()
      .where('user_id', '=', u.id)
      .executeTakeFirstOrThrow();
    expect(row.calendar_id).toBe(u.calendarId);
    expect(row.timezone).toBe('Europe/Berlin');
    expect(row.access_token_enc).toMatch(/^v1\./);
    expect(row.refresh_token_enc).toMatch(/^v1\./);
    const stored = JSON.stringify(row);
    for (const secret of [...fake.issued.access, ...fake.issued.refresh]) expect(stored).not.toContain(secret);
  });

  it('the callback redirects with each §4.6 error value', async () => {
    const u = await signUp(t.web);
    const other = await signUp(t.web);

    fake.knobs.denyConsent = 'access_denied';
    const denied = await startConnect(u);
    expect(await redirectOf(denied.target, u.cookie, denied.stateCookie)).toBe('/dashboard/calendar?error=access_denied');
    delete fake.knobs.denyConsent;

    const good = await startConnect(u);
    const without = (name: string) => {
      const c = new URL(good.target);
      c.searchParams.delete(name);
      return c;
    };
    expect(await redirectOf(without('code'), u.cookie, good.stateCookie)).toBe('/dashboard/calendar?error=no_code');
    expect(await redirectOf(without('state'), u.cookie, good.stateCookie)).toBe('/dashboard/calendar?error=missing_state');

    const tampered = new URL(good.target);
    const [payload, mac] = good.target.searchParams.get('state')!.split('.');
    const forged = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    forged.u = other.id;
    tampered.searchParams.set('state', `${Buffer.from(JSON.stringify(forged)).toString('base64url')}.${mac}`);
    expect(await redirectOf(tampered, other.cookie, good.stateCookie)).toBe('/dashboard/calendar?error=invalid_state');

    // signed with the platform's key, but 11 minutes old (§8: valid 10 minutes), with a cookie sealed for it now
    const key = TEST_SECRETS.secretsEncryptionKey;
    const cookieFor = (state: string) => `${CALENDAR_STATE_COOKIE}=${createCalendarStateCookie(key).seal(state)}`;
    const old = createCalendarState(key, () => Date.now() - 11 * 60 * 1000).issue(u.id);
    const expired = new URL(good.target);
    expired.searchParams.set('state', old);
    expect(await redirectOf(expired, u.cookie, cookieFor(old))).toBe('/dashboard/calendar?error=invalid_state');
    // the same key 9 minutes ago still works (the key derivations are the platform's)
    const nineMinutes = createCalendarState(key, () => Date.now() - 9 * 60 * 1000).issue(u.id);
    const recent = new URL(good.target);
    recent.searchParams.set('state', nineMinutes);

    // u's state finished in other's browser (signed in as other): refused, nothing stored for either
    expect(await redirectOf(good.target, other.cookie)).toBe('/dashboard/calendar?error=invalid_state');
    expect(await redirectOf(good.target, other.cookie, good.stateCookie)).toBe('/dashboard/calendar?error=invalid_state');
    expect((await get(t, other.cookie, '?action=status')).json()).toEqual({ connected: false });
    expect((await get(t, u.cookie, '?action=status')).json()).toEqual({ connected: false });
    expect(await redirectOf(recent, u.cookie, cookieFor(nineMinutes))).toBe('/dashboard/calendar?connected=true');

    fake.knobs.failExchange = 'invalid_grant';
    const refused = await startConnect(u);
    expect(await redirectOf(refused.target, u.cookie, refused.stateCookie)).toBe('/dashboard/calendar?error=token_failed');
    fake.knobs.failExchange = 'error';
    const failing = await startConnect(u);
    expect(await redirectOf(failing.target, u.cookie, failing.stateCookie)).toBe('/dashboard/calendar?error=token_failed');
    delete fake.knobs.failExchange;

    const next = await startConnect(other);
    fake.knobs.failApi = 503; // the primary calendar cannot be read
    expect(await redirectOf(next.target, other.cookie, next.stateCookie)).toBe('/dashboard/calendar?error=unknown');
    expect((await get(t, other.cookie, '?action=status')).json()).toEqual({ connected: false });
  });
});

describe('a connect link completes only in the browser that asked for it, once (docs/calendar.md "How a connection works")', () => {
  const exchanges = () => fake.issued.access.length;

  it("bob's consent URL opened by a signed-out victim is refused: nothing exchanged, bob not connected", async () => {
    const bob = await signUp(t.web);
    const { authUrl, stateCookie } = await connect(bob);
    // the victim (no platform session, no cookie of ours) consents with their own calendar
    fake.consentAs = { calendarId: `victim-primary${accountNo++}@corp.example`, timeZone: 'Europe/Paris' };
    const before = exchanges();
    const landed = await callback(await consent(authUrl));
    expect(landed.headers.location).toBe('/dashboard/calendar?error=not_signed_in');
    // even a signed-out browser that somehow held bob's state cookie
    expect(await redirectOf(await consent(authUrl), stateCookie)).toBe('/dashboard/calendar?error=not_signed_in');
    // and a second victim, as the audit's reproduction did
    expect(await redirectOf(await consent(authUrl))).toBe('/dashboard/calendar?error=not_signed_in');
    expect(exchanges()).toBe(before);
    expect((await get(t, bob.cookie, '?action=status')).json()).toEqual({ connected: false });
    expect((await get(t, bob.cookie, '?action=list')).statusCode).toBe(401);
  });

  it("a callback without this browser's state cookie is refused, even signed in as the user who asked", async () => {
    const u = await signUp(t.web);
    const before = exchanges();
    const { target } = await startConnect(u);
    expect(await redirectOf(target, u.cookie)).toBe('/dashboard/calendar?error=invalid_state');
    // a cookie that does not open (forged) or holds another connect's state (an earlier connect of the same user)
    expect(await redirectOf(target, u.cookie, `${CALENDAR_STATE_COOKIE}=v1.AAAA.BBBB.CCCC`)).toBe(
      '/dashboard/calendar?error=invalid_state',
    );
    const later = await connect(u);
    expect(await redirectOf(target, u.cookie, later.stateCookie)).toBe('/dashboard/calendar?error=invalid_state');
    // a sign-in flow's sealed cookie is no calendar cookie (each has its own key)
    const signInSealed = createOAuthStateSealer(TEST_SECRETS.secretsEncryptionKey).seal({
      provider: 'idp',
      state: target.searchParams.get('state')!,
    });
    expect(await redirectOf(target, u.cookie, `${CALENDAR_STATE_COOKIE}=${signInSealed}`)).toBe('/dashboard/calendar?error=invalid_state');
    expect(exchanges()).toBe(before);
    expect((await get(t, u.cookie, '?action=status')).json()).toEqual({ connected: false });
  });

  it('the right browser connects and its cookie is cleared; the same state used again (a copied cookie, a new code) is refused', async () => {
    const u = await signUp(t.web);
    const first = `first${accountNo++}@example.com`;
    fake.consentAs = { calendarId: first, timeZone: 'UTC' };
    const { authUrl, stateCookie } = await connect(u);
    const res = await callback(await consent(authUrl), u.cookie, stateCookie);
    expect(res.headers.location).toBe('/dashboard/calendar?connected=true');
    const cleared = res.cookies.find((c) => c.name === CALENDAR_STATE_COOKIE);
    expect(cleared).toMatchObject({ value: '', path: '/api/calendar/callback' });
    expect(cleared!.expires!.getTime()).toBeLessThan(Date.now());

    // the provider gives a fresh code for the same state; the browser replays the cookie it had
    fake.consentAs = { calendarId: `second${accountNo++}@example.com`, timeZone: 'Asia/Tokyo' };
    const before = exchanges();
    expect(await redirectOf(await consent(authUrl), u.cookie, stateCookie)).toBe('/dashboard/calendar?error=invalid_state');
    expect(exchanges()).toBe(before);
    const row = await t.database.db.kysely
      .selectFrom('calendar_connections')
      .select(['calendar_id', 'timezone'])
      .where('user_id', '=', u.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ calendar_id: first, timezone: 'UTC' });
  });

  it('two callbacks of one state at once: exactly one connects', async () => {
    const u = await signUp(t.web);
    fake.consentAs = { calendarId: `race${accountNo++}@example.com`, timeZone: 'UTC' };
    const { authUrl, stateCookie } = await connect(u);
    const targets = await Promise.all(Array.from({ length: 6 }, () => consent(authUrl)));
    const outcomes = await Promise.all(targets.map((target) => redirectOf(target, u.cookie, stateCookie)));
    expect(outcomes.filter((o) => o === '/dashboard/calendar?connected=true')).toHaveLength(1);
    expect(outcomes.filter((o) => o === '/dashboard/calendar?error=invalid_state')).toHaveLength(5);
  });
});

describe('§4.6 actions', () => {
  it('401 without a session or a connection; 400 Invalid action', async () => {
    expect((await get(t, undefined, '?action=list')).statusCode).toBe(401);
    expect((await post(undefined, { action: 'create-event' })).statusCode).toBe(401);
    const u = await signUp(t.web);
    for (const res of [
      await get(t, u.cookie, '?action=list'),
      await get(t, u.cookie, '?action=availability'),
      await post(u.cookie, { action: 'quick-add', text: 'Lunch tomorrow at noon' }),
    ]) {
      expect(res.statusCode).toBe(401);
      expect(res.json()).toEqual({ error: 'Calendar not connected' });
    }
    for (const res of [await get(t, u.cookie, '?action=explode'), await post(u.cookie, { action: 'explode' }), await post(u.cookie, {})]) {
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toBe('Invalid action');
    }
  });

  it('create-event, list, update-event (only the given fields), delete-event, quick-add', async () => {
    const u = await connectedUser();
    const created = await post(u.cookie, {
      action: 'create-event',
      title: 'Studio session',
      start: '2030-03-04T15:00:00Z',
      end: '2030-03-04T16:00:00Z',
      location: 'Room 2',
      description: 'Bring the bass',
      attendees: ['a@example.com'],
    });
    expect(created.statusCode).toBe(200);
    const { eventId, event } = created.json();
    expect(created.json().success).toBe(true);
    expect(event).toMatchObject({
      id: eventId,
      summary: 'Studio session',
      location: 'Room 2',
      start: { dateTime: '2030-03-04T15:00:00Z' },
    });
    expect(fake.events(u.calendarId)[0]?.attendees).toEqual([{ email: 'a@example.com' }]);

    // a wall-clock time without an offset is the calendar's (America/New_York)
    const local = await post(u.cookie, { action: 'create-event', title: 'Mix', start: '2030-03-05T10:00', end: '2030-03-05T11:00' });
    expect(local.statusCode).toBe(200);
    expect(fake.events(u.calendarId).find((e) => e.id === local.json().eventId)?.start).toEqual({
      dateTime: '2030-03-05T10:00:00',
      timeZone: 'America/New_York',
    });

    const list = await get(t, u.cookie, '?action=list&start=2030-03-01T00:00:00Z&end=2030-03-10T00:00:00Z');
    expect(list.statusCode).toBe(200);
    expect(list.json().timezone).toBe('America/New_York');
    expect(list.json().events.map((e: { summary: string }) => e.summary)).toEqual(['Studio session', 'Mix']);
    // the default window is now to now plus 30 days: 2030 is outside it
    expect((await get(t, u.cookie, '?action=list')).json().events).toEqual([]);

    const patched = await post(u.cookie, { action: 'update-event', eventId, title: 'Studio session (moved)' });
    expect(patched.statusCode).toBe(200);
    expect(patched.json().event).toMatchObject({ summary: 'Studio session (moved)', location: 'Room 2', description: 'Bring the bass' });
    const patchRequest = fake.requests.filter((r) => r.method === 'PATCH').at(-1);
    expect(patchRequest?.body).toEqual({ summary: 'Studio session (moved)' });

    expect((await post(u.cookie, { action: 'delete-event', eventId })).json()).toEqual({ success: true });
    expect(fake.events(u.calendarId).map((e) => e.id)).not.toContain(eventId);
    const again = await post(u.cookie, { action: 'delete-event', eventId });
    expect(again.statusCode).toBe(404);
    expect((await post(u.cookie, { action: 'update-event', eventId, title: 'x' })).statusCode).toBe(404);

    const quick = await post(u.cookie, { action: 'quick-add', text: 'Call the label' });
    expect(quick.statusCode).toBe(200);
    expect(fake.events(u.calendarId).find((e) => e.id === quick.json().eventId)?.summary).toBe('Call the label');
    expect(fake.requests.at(-1)?.query.get('text')).toBe('Call the label');
  });

  it('400 with a sentence for bad fields', async () => {
    const u = await connectedUser();
    const cases: [Record<string, unknown>, string][] = [
      [{ action: 'create-event', start: '2030-01-01T10:00:00Z', end: '2030-01-01T11:00:00Z' }, 'title required'],
      [{ action: 'create-event', title: 'x', start: 'tomorrow', end: '2030-01-01T11:00:00Z' }, 'start must be a date-time'],
      [{ action: 'create-event', title: 'x', start: '2030-01-01T12:00:00Z', end: '2030-01-01T11:00:00Z' }, 'end must be after start'],
      [
        { action: 'create-event', title: 'x', start: '2030-01-01T10:00:00Z', end: '2030-01-01T11:00:00Z', attendees: ['nope'] },
        'attendees',
      ],
      [{ action: 'update-event', title: 'x' }, 'eventId required'],
      [{ action: 'update-event', eventId: 'abc' }, 'Nothing to update'],
      [{ action: 'delete-event' }, 'eventId required'],
      [{ action: 'quick-add', text: '  ' }, 'text required'],
    ];
    for (const [body, message] of cases) {
      const res = await post(u.cookie, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().error).toContain(message);
    }
    expect((await get(t, u.cookie, '?action=availability&date=2030-02-30')).statusCode).toBe(400);
    expect((await get(t, u.cookie, '?action=list&start=yesterday')).statusCode).toBe(400);
  });

  it('availability: one-hour slots 09:00-23:00 in the calendar timezone, busy hours left out', async () => {
    const u = await connectedUser('America/New_York');
    // 2026-03-02: New York is on EST (UTC-5), a week before the change to daylight time
    await post(u.cookie, { action: 'create-event', title: 'Rehearsal', start: '2026-03-02T15:00:00Z', end: '2026-03-02T16:30:00Z' });
    await post(u.cookie, { action: 'create-event', title: 'Late gig', start: '2026-03-02T22:30', end: '2026-03-03T01:00' });
    const res = await get(t, u.cookie, '?action=availability&date=2026-03-02');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.date).toBe('2026-03-02');
    expect(body.timezone).toBe('America/New_York');
    const hours = body.availableSlots.map((s: { start: string }) => s.start.slice(11, 16));
    // 10:00-11:30 local (15:00-16:30Z) takes 10 and 11; 22:30 onwards takes 22
    expect(hours).toEqual(['09:00', '12:00', '13:00', '14:00', '15:00', '16:00', '17:00', '18:00', '19:00', '20:00', '21:00']);
    expect(body.availableSlots[0]).toEqual({ start: '2026-03-02T09:00:00-05:00', end: '2026-03-02T10:00:00-05:00' });
    expect(body.busySlots).toEqual([
      { start: '2026-03-02T15:00:00.000Z', end: '2026-03-02T16:30:00.000Z' },
      { start: '2026-03-03T03:30:00.000Z', end: '2026-03-03T04:00:00.000Z' },
    ]);
    const freeBusy = fake.requests.filter((r) => r.path.endsWith('/freeBusy')).at(-1);
    expect(freeBusy?.body).toMatchObject({ timeMin: '2026-03-02T14:00:00.000Z', timeMax: '2026-03-03T04:00:00.000Z' });
  });

  it('an expired access token is refreshed (refresh_token grant) and the new one stored', async () => {
    const u = await connectedUser();
    const before = await t.database.db.kysely
      .selectFrom('calendar_connections')
      .select('access_token_enc')
      .where('user_id', '=', u.id)
      .executeTakeFirstOrThrow();
    fake.expireAccessTokens(); // revoked early: the provider answers 401, we refresh and retry once
    const refreshes = () =>
      fake.requests.filter((r) => r.path === '/token' && (r.body as { grant_type?: string }).grant_type === 'refresh_token');
    const n = refreshes().length;
    const res = await get(t, u.cookie, '?action=list');
    expect(res.statusCode).toBe(200);
    expect(refreshes().length).toBe(n + 1);
    const after = await t.database.db.kysely
      .selectFrom('calendar_connections')
      .select('access_token_enc')
      .where('user_id', '=', u.id)
      .executeTakeFirstOrThrow();
    expect(after.access_token_enc).not.toBe(before.access_token_enc);
    // the stored token works: no refresh on the next call
    expect((await get(t, u.cookie, '?action=list')).statusCode).toBe(200);
    expect(refreshes().length).toBe(n + 1);

    // a token that expires within the margin is refreshed before the call
    fake.knobs.accessTtlSec = 30;
    const v = await connectedUser();
    const m = refreshes().length;
    expect((await get(t, v.cookie, '?action=list')).statusCode).toBe(200);
    expect(refreshes().length).toBe(m + 1);
  });

  it('a refused refresh drops the connection (401); a failing provider is a 502 with a JSON error', async () => {
    const u = await connectedUser();
    fake.knobs.failApi = 500;
    const failed = await get(t, u.cookie, '?action=list');
    expect(failed.statusCode).toBe(502);
    expect(failed.json()).toEqual({ error: 'The calendar provider failed; try again later' });
    delete fake.knobs.failApi;

    fake.expireAccessTokens();
    fake.knobs.failRefresh = 'error';
    expect((await post(u.cookie, { action: 'quick-add', text: 'x' })).statusCode).toBe(502);
    expect((await get(t, u.cookie, '?action=status')).json()).toEqual({ connected: true });
    fake.knobs.failRefresh = 'invalid_grant';
    const refused = await get(t, u.cookie, '?action=availability&date=2026-03-02');
    expect(refused.statusCode).toBe(401);
    expect(refused.json()).toEqual({ error: 'Calendar not connected' });
    expect((await get(t, u.cookie, '?action=status')).json()).toEqual({ connected: false });
  });

  it("one user's connection is invisible to another (row-level security)", async () => {
    const a = await connectedUser();
    const b = await signUp(t.web);
    expect((await get(t, b.cookie, '?action=status')).json()).toEqual({ connected: false });
    expect((await get(t, b.cookie, '?action=list')).statusCode).toBe(401);
    const asB = await t.database.db.withUser(b.id, (trx) =>
      trx.selectFrom('calendar_connections').select('user_id').where('user_id', '=', a.id).execute(),
    );
    expect(asB).toEqual([]);
    expect(await t.database.db.withoutUser((trx) => trx.selectFrom('calendar_connections').select('user_id').execute())).toEqual([]);
    const asA = await t.database.db.withUser(a.id, (trx) => trx.selectFrom('calendar_connections').select('user_id').execute());
    expect(asA).toEqual([{ user_id: a.id }]);
  });
});

describe('§4.6 without CALENDAR_CLIENT_ID/SECRET', () => {
  it('status is {connected:false}, actions 503, the callback says unknown, features.calendar is false', async () => {
    const u = await signUp(unconfigured.web);
    expect((await get(unconfigured, u.cookie, '?action=status')).json()).toEqual({ connected: false });
    const connect = await post(u.cookie, { action: 'connect' }, unconfigured);
    expect(connect.statusCode).toBe(503);
    expect(connect.json().error).toBe('Calendar is not configured on this server');
    const cb = await unconfigured.web.inject({ method: 'GET', url: '/api/calendar/callback?code=x&state=y' });
    expect(cb.headers.location).toBe('/dashboard/calendar?error=unknown');
    expect((await unconfigured.web.inject({ method: 'GET', url: '/api/features' })).json().calendar).toBe(false);
    expect((await t.web.inject({ method: 'GET', url: '/api/features' })).json().calendar).toBe(true);
  });
});
