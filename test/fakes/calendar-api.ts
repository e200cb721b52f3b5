/**
 * A local calendar provider speaking what src/domains/calendar/calendar.client.ts uses: the OAuth
 * 2.0 consent redirect (GET /auth → 302 to redirect_uri with `code` and `state`), the token
 * endpoint (POST /token, form: `authorization_code` and `refresh_token` grants, client credentials
 * in the body) and the Google Calendar API v3 REST shapes under /calendar/v3 (calendars/primary,
 * events list/insert/patch/delete/quickAdd, freeBusy), with Bearer access tokens that expire.
 * Knobs switch on the failures the tests need. It keeps one calendar per consenting account.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type FakeEvent = {
  id: string;
  summary?: string;
  description?: string;
  location?: string;
  start: { dateTime?: string; date?: string; timeZone?: string };
  end: { dateTime?: string; date?: string; timeZone?: string };
  attendees?: { email: string }[];
};

type Account = { calendarId: string; timeZone: string; events: Map<string, FakeEvent> };
type Grant = { account: Account; expiresAt: number };

export type FakeCalendarRequest = {
  method: string;
  path: string;
  query: URLSearchParams;
  body: unknown;
  authorization?: string | undefined;
};

export type FakeCalendar = {
  /** base URLs to put in CALENDAR_AUTH_URL, CALENDAR_TOKEN_URL, CALENDAR_API_URL */
  authUrl: string;
  tokenUrl: string;
  apiUrl: string;
  clientId: string;
  clientSecret: string;
  requests: FakeCalendarRequest[];
  /** the account the next consent is for (created on first use) */
  consentAs: { calendarId: string; timeZone: string };
  knobs: {
    /** the consent page answers `?error=<value>` instead of a code */
    denyConsent?: string | undefined;
    /** POST /token authorization_code: 'error' → 500, 'invalid_grant' → 400 */
    failExchange?: 'error' | 'invalid_grant' | undefined;
    /** POST /token refresh_token: 'error' → 500, 'invalid_grant' → 400 */
    failRefresh?: 'error' | 'invalid_grant' | undefined;
    /** every Calendar API call answers this status */
    failApi?: number | undefined;
    /** every Calendar API call is read and never answered */
    hangApi?: boolean;
    /** lifetime of issued access tokens in seconds */
    accessTtlSec: number;
    /** no refresh_token in the code exchange answer */
    noRefreshToken?: boolean;
  };
  /** every access token issued so far stops working (401) */
  expireAccessTokens(): void;
  /** the stored events of a calendar */
  events(calendarId: string): FakeEvent[];
  /** the tokens issued so far (to look for them where they must not be) */
  issued: { access: string[]; refresh: string[]; codes: string[] };
  close(): Promise<void>;
};

/**
 * The instant of a wall-clock time in an IANA zone, found by search (every quarter-hour offset
 * from -14h to +14h, kept when formatting it back gives the same wall clock): deliberately not the
 * platform's own arithmetic, so the fake checks it rather than repeating it.
 */
function wallToInstant(local: string, timeZone: string): number {
  const want = local.length === 16 ? `${local}:00` : local.slice(0, 19);
  const naive = Date.parse(`${want}Z`);
  const fmt = new Intl.DateTimeFormat('sv-SE', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
  for (let q = -14 * 4; q <= 14 * 4; q++) {
    const t = naive - q * 15 * 60_000;
    if (fmt.format(new Date(t)).replace(' ', 'T') === want) return t;
  }
  throw new Error(`no instant for ${local} in ${timeZone}`);
}

const instantOf = (t: FakeEvent['start'], fallbackZone: string): number =>
  t.date
    ? wallToInstant(`${t.date}T00:00`, fallbackZone)
    : /(?:Z|[+-]\d{2}:\d{2})$/i.test(t.dateTime ?? '')
      ? Date.parse(t.dateTime!)
      : wallToInstant(t.dateTime ?? '', t.timeZone ?? fallbackZone);

export async function startFakeCalendar(): Promise<FakeCalendar> {
  const accounts = new Map<string, Account>();
  const codes = new Map<string, { account: Account; redirectUri: string }>();
  const access = new Map<string, Grant>();
  const refresh = new Map<string, Account>();
  const requests: FakeCalendarRequest[] = [];
  const issued = { access: [] as string[], refresh: [] as string[], codes: [] as string[] };
  const clientId = 'fake-calendar-client';
  const clientSecret = 'fake-calendar-secret';
  const fake = {
    consentAs: { calendarId: 'person@example.com', timeZone: 'America/New_York' },
    knobs: { accessTtlSec: 3600 } as FakeCalendar['knobs'],
  };

  const account = (calendarId: string, timeZone: string): Account => {
    let a = accounts.get(calendarId);
    if (!a) accounts.set(calendarId, (a = { calendarId, timeZone, events: new Map() }));
    return a;
  };
  const token = (prefix: string, bytes = 24) => `${prefix}${randomBytes(bytes).toString('base64url')}`;
  const newAccess = (a: Account) => {
    const t = token('ya29.');
    access.set(t, { account: a, expiresAt: Date.now() + fake.knobs.accessTtlSec * 1000 });
    issued.access.push(t);
    return t;
  };

  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://localhost');
    const form = (req.headers['content-type'] ?? '').includes('x-www-form-urlencoded') ? new URLSearchParams(raw) : undefined;
    let body: unknown = form ? Object.fromEntries(form) : undefined;
    if (!form && raw) {
      try {
        body = JSON.parse(raw);
      } catch {
        body = raw;
      }
    }
    requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query: url.searchParams,
      body,
      authorization: req.headers.authorization,
    });
    const send = (status: number, payload?: unknown) => {
      if (payload === undefined) {
        res.writeHead(status);
        return res.end();
      }
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    const apiError = (status: number, message: string) => send(status, { error: { code: status, message, errors: [{ message }] } });

    // consent page: the user says yes at once (or no, with denyConsent)
    if (req.method === 'GET' && url.pathname === '/auth') {
      const redirect = url.searchParams.get('redirect_uri') ?? '';
      if (url.searchParams.get('client_id') !== clientId) return send(400, { error: 'invalid_client' });
      const back = new URL(redirect);
      const state = url.searchParams.get('state');
      if (fake.knobs.denyConsent) back.searchParams.set('error', fake.knobs.denyConsent);
      else {
        const code = token('4/', 16);
        codes.set(code, { account: account(fake.consentAs.calendarId, fake.consentAs.timeZone), redirectUri: redirect });
        issued.codes.push(code);
        back.searchParams.set('code', code);
      }
      if (state !== null) back.searchParams.set('state', state);
      res.writeHead(302, { location: back.toString() });
      return res.end();
    }

    if (req.method === 'POST' && url.pathname === '/token') {
      const p = form ?? new URLSearchParams();
      if (p.get('client_id') !== clientId || p.get('client_secret') !== clientSecret) return send(401, { error: 'invalid_client' });
      if (p.get('grant_type') === 'authorization_code') {
        if (fake.knobs.failExchange === 'error') return send(500, { error: 'internal_failure' });
        const entry = codes.get(p.get('code') ?? '');
        if (fake.knobs.failExchange === 'invalid_grant' || !entry || entry.redirectUri !== p.get('redirect_uri')) {
          return send(400, { error: 'invalid_grant', error_description: 'Bad Request' });
        }
        codes.delete(p.get('code')!); // single use
        const rt = fake.knobs.noRefreshToken ? undefined : token('1//');
        if (rt) {
          refresh.set(rt, entry.account);
          issued.refresh.push(rt);
        }
        return send(200, {
          access_token: newAccess(entry.account),
          expires_in: fake.knobs.accessTtlSec,
          token_type: 'Bearer',
          scope: 'https://www.googleapis.com/auth/calendar.events https://www.googleapis.com/auth/calendar.readonly',
          ...(rt ? { refresh_token: rt } : {}),
        });
      }
      if (p.get('grant_type') === 'refresh_token') {
        if (fake.knobs.failRefresh === 'error') return send(500, { error: 'internal_failure' });
        const a = refresh.get(p.get('refresh_token') ?? '');
        if (fake.knobs.failRefresh === 'invalid_grant' || !a)
          return send(400, { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' });
        return send(200, { access_token: newAccess(a), expires_in: fake.knobs.accessTtlSec, token_type: 'Bearer' });
      }
      return send(400, { error: 'unsupported_grant_type' });
    }

    if (!url.pathname.startsWith('/calendar/v3/')) return send(404, { error: 'not found' });
    if (fake.knobs.hangApi) return; // the connection stays open until close()
    if (fake.knobs.failApi) return apiError(fake.knobs.failApi, 'Backend Error');
    const grant = access.get((req.headers.authorization ?? '').replace(/^Bearer /, ''));
    if (!grant || grant.expiresAt <= Date.now()) return apiError(401, 'Invalid Credentials');
    const a = grant.account;
    const path = url.pathname.slice('/calendar/v3'.length);

    if (req.method === 'GET' && path === '/calendars/primary') {
      return send(200, { kind: 'calendar#calendar', id: a.calendarId, summary: a.calendarId, timeZone: a.timeZone });
    }
    if (req.method === 'POST' && path === '/freeBusy') {
      const q = body as { timeMin: string; timeMax: string; items: { id: string }[] };
      const min = Date.parse(q.timeMin);
      const max = Date.parse(q.timeMax);
      const calendars: Record<string, unknown> = {};
      for (const { id } of q.items ?? []) {
        if (id !== a.calendarId) {
          calendars[id] = { errors: [{ domain: 'global', reason: 'notFound' }], busy: [] };
          continue;
        }
        const busy = [...a.events.values()]
          .map((e) => ({ s: instantOf(e.start, a.timeZone), e: instantOf(e.end, a.timeZone) }))
          .filter((i) => i.s < max && i.e > min)
          .sort((x, y) => x.s - y.s)
          .map((i) => ({ start: new Date(Math.max(i.s, min)).toISOString(), end: new Date(Math.min(i.e, max)).toISOString() }));
        calendars[id] = { busy };
      }
      return send(200, { kind: 'calendar#freeBusy', timeMin: q.timeMin, timeMax: q.timeMax, calendars });
    }

    const m = /^\/calendars\/([^/]+)\/events(?:\/([^/]+))?$/.exec(path);
    if (!m || decodeURIComponent(m[1]!) !== a.calendarId) return apiError(404, 'Not Found');
    const sub = m[2] ? decodeURIComponent(m[2]) : undefined;

    if (req.method === 'GET' && !sub) {
      const min = Date.parse(url.searchParams.get('timeMin') ?? '');
      const max = Date.parse(url.searchParams.get('timeMax') ?? '');
      const items = [...a.events.values()]
        .filter((e) => instantOf(e.end, a.timeZone) > min && instantOf(e.start, a.timeZone) < max)
        .sort((x, y) => instantOf(x.start, a.timeZone) - instantOf(y.start, a.timeZone));
      return send(200, { kind: 'calendar#events', timeZone: a.timeZone, items });
    }
    if (req.method === 'POST' && sub === 'quickAdd') {
      // the real provider parses the text; the fake books the next whole hour with the text as title
      const start = Math.ceil(Date.now() / 3_600_000) * 3_600_000;
      const e: FakeEvent = {
        id: token('', 12)
          .toLowerCase()
          .replace(/[^a-z0-9]/g, 'v'),
        summary: url.searchParams.get('text') ?? '',
        start: { dateTime: new Date(start).toISOString() },
        end: { dateTime: new Date(start + 3_600_000).toISOString() },
      };
      a.events.set(e.id, e);
      return send(200, { kind: 'calendar#event', ...e });
    }
    if (req.method === 'POST' && !sub) {
      const e = body as Omit<FakeEvent, 'id'>;
      if (!e?.start || !e?.end) return apiError(400, 'Missing time');
      const ev: FakeEvent = {
        ...e,
        id: token('', 12)
          .toLowerCase()
          .replace(/[^a-z0-9]/g, 'v'),
      };
      a.events.set(ev.id, ev);
      return send(200, { kind: 'calendar#event', ...ev });
    }
    const existing = sub ? a.events.get(sub) : undefined;
    if (req.method === 'PATCH' && sub) {
      if (!existing) return apiError(404, 'Not Found');
      const merged = { ...existing, ...(body as object), id: existing.id };
      a.events.set(existing.id, merged);
      return send(200, { kind: 'calendar#event', ...merged });
    }
    if (req.method === 'DELETE' && sub) {
      if (!existing) return apiError(410, 'Resource has been deleted');
      a.events.delete(existing.id);
      return send(204);
    }
    return apiError(404, 'Not Found');
  });

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    authUrl: `${base}/auth`,
    tokenUrl: `${base}/token`,
    apiUrl: `${base}/calendar/v3`,
    clientId,
    clientSecret,
    requests,
    issued,
    get consentAs() {
      return fake.consentAs;
    },
    set consentAs(v) {
      fake.consentAs = v;
    },
    knobs: fake.knobs,
    expireAccessTokens() {
      for (const g of access.values()) g.expiresAt = 0;
    },
    events: (calendarId) => [...(accounts.get(calendarId)?.events.values() ?? [])],
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
