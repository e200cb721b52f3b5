/**
 * The calendar provider over HTTP (§4.6): the OAuth 2.0 token endpoint (CALENDAR_TOKEN_URL, through
 * openid-client's plain OAuth 2 code and refresh grants) and the Google Calendar API v3 REST shapes
 * (CALENDAR_API_URL). Only the fields the platform uses are typed. Every failure becomes a
 * `CalendarApiError` carrying the provider's status (0 when it was unreachable, timed out or
 * answered something unreadable); the service decides what it means. Tokens and codes are never put
 * in an error message or a log line.
 */
import * as oauth from 'openid-client';
import { LIMITS } from '../../config/limits.ts';

export class CalendarApiError extends Error {
  override name = 'CalendarApiError';
  /** the provider's HTTP status, or 0 when there was no usable answer */
  readonly status: number;
  /** the OAuth `error` field of a token endpoint refusal (e.g. `invalid_grant`) */
  readonly oauthError: string | undefined;
  constructor(status: number, what: string, oauthError?: string) {
    super(status ? `${what}: the calendar provider answered ${status}` : `${what}: the calendar provider did not answer usefully`);
    this.status = status;
    this.oauthError = oauthError;
  }
}

export type TokenSet = { accessToken: string; refreshToken: string | undefined; expiresInSec: number };

/** A Calendar v3 event (the fields we read and write). `date` is an all-day event's day. */
export type ApiEvent = {
  id: string;
  summary?: string;
  description?: string;
  location?: string;
  start?: { dateTime?: string; date?: string; timeZone?: string };
  end?: { dateTime?: string; date?: string; timeZone?: string };
  attendees?: { email: string }[];
  htmlLink?: string;
};

export type EventWrite = Partial<Omit<ApiEvent, 'id' | 'htmlLink'>>;

export type CalendarClientConfig = {
  clientId: string;
  clientSecret: string;
  tokenUrl: string;
  apiUrl: string;
  timeoutMs?: number;
};

export function createCalendarClient(cfg: CalendarClientConfig) {
  const timeoutMs = cfg.timeoutMs ?? LIMITS.calendarApiTimeoutMs;
  const api = cfg.apiUrl.replace(/\/+$/, '');

  async function call(what: string, url: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(url, { ...init, signal: AbortSignal.timeout(timeoutMs) });
    } catch {
      throw new CalendarApiError(0, what);
    }
  }

  async function json<T>(what: string, res: Response): Promise<T> {
    try {
      return (await res.json()) as T;
    } catch {
      throw new CalendarApiError(0, what);
    }
  }

  // RFC 6749 §4.1.3 and §6 on the provider's token endpoint, the client's credentials in the form
  // body (as Google takes them); no discovery document is read
  const tokenEndpoint = new URL(cfg.tokenUrl);
  const server = new oauth.Configuration(
    { issuer: tokenEndpoint.origin, token_endpoint: tokenEndpoint.href },
    cfg.clientId,
    undefined,
    oauth.ClientSecretPost(cfg.clientSecret),
  );
  server.timeout = timeoutMs / 1000;
  if (tokenEndpoint.protocol === 'http:') oauth.allowInsecureRequests(server); // a local provider (tests, development)

  /** The provider's status and OAuth error of a failed token request; 0 when there was no usable answer. */
  function tokenError(what: string, err: unknown): CalendarApiError {
    if (err instanceof oauth.ResponseBodyError) return new CalendarApiError(err.status, what, err.error);
    if (err instanceof oauth.WWWAuthenticateChallengeError) return new CalendarApiError(err.status, what);
    // an error status whose body names no OAuth error
    const cause = err instanceof oauth.ClientError ? err.cause : undefined;
    if (cause instanceof Response) return new CalendarApiError(cause.status, what);
    return new CalendarApiError(0, what);
  }

  async function token(what: string, grant: () => Promise<oauth.TokenEndpointResponse>): Promise<TokenSet> {
    let body: oauth.TokenEndpointResponse;
    try {
      body = await grant();
    } catch (err) {
      throw tokenError(what, err);
    }
    return {
      accessToken: body.access_token,
      refreshToken: body.refresh_token || undefined,
      expiresInSec: typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 3600,
    };
  }

  /** A Calendar API call with the user's access token; 204 gives undefined. */
  async function request<T>(what: string, accessToken: string, method: string, path: string, body?: unknown): Promise<T> {
    const res = await call(what, `${api}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${accessToken}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    if (!res.ok) {
      await res.body?.cancel();
      throw new CalendarApiError(res.status, what);
    }
    if (res.status === 204) return undefined as T;
    return json<T>(what, res);
  }

  const events = (calendarId: string) => `/calendars/${encodeURIComponent(calendarId)}/events`;

  return {
    exchangeCode(code: string, redirectUri: string) {
      // the callback as the provider called it; its state was checked by the service already
      const callback = new URL(redirectUri);
      callback.searchParams.set('code', code);
      return token('code exchange', () => oauth.authorizationCodeGrant(server, callback));
    },
    refresh: (refreshToken: string) => token('token refresh', () => oauth.refreshTokenGrant(server, refreshToken)),

    /** GET calendars/primary: the primary calendar's id and timezone. */
    primaryCalendar: (accessToken: string) =>
      request<{ id?: unknown; timeZone?: unknown }>('primary calendar', accessToken, 'GET', '/calendars/primary'),

    listEvents(accessToken: string, calendarId: string, timeMin: string, timeMax: string) {
      const q = new URLSearchParams({ timeMin, timeMax, singleEvents: 'true', orderBy: 'startTime', maxResults: '250' });
      return request<{ items?: ApiEvent[]; timeZone?: string }>('events list', accessToken, 'GET', `${events(calendarId)}?${q}`);
    },
    insertEvent: (accessToken: string, calendarId: string, event: EventWrite) =>
      request<ApiEvent>('event insert', accessToken, 'POST', events(calendarId), event),
    /** PATCH semantics: only the fields present change (§4.6 update-event). */
    patchEvent: (accessToken: string, calendarId: string, eventId: string, patch: EventWrite) =>
      request<ApiEvent>('event patch', accessToken, 'PATCH', `${events(calendarId)}/${encodeURIComponent(eventId)}`, patch),
    deleteEvent: (accessToken: string, calendarId: string, eventId: string) =>
      request<undefined>('event delete', accessToken, 'DELETE', `${events(calendarId)}/${encodeURIComponent(eventId)}`),
    quickAdd: (accessToken: string, calendarId: string, text: string) =>
      request<ApiEvent>('quick add', accessToken, 'POST', `${events(calendarId)}/quickAdd?${new URLSearchParams({ text })}`),

    /** POST freeBusy: the busy intervals of one calendar between two instants. */
    async busy(accessToken: string, calendarId: string, timeMin: string, timeMax: string, timeZone: string) {
      const res = await request<{ calendars?: Record<string, { busy?: { start: string; end: string }[]; errors?: unknown[] }> }>(
        'free/busy',
        accessToken,
        'POST',
        '/freeBusy',
        { timeMin, timeMax, timeZone, items: [{ id: calendarId }] },
      );
      const entry = res.calendars?.[calendarId];
      if (!entry || (entry.errors && entry.errors.length > 0)) throw new CalendarApiError(0, 'free/busy');
      return entry.busy ?? [];
    },
  };
}

export type CalendarClient = ReturnType<typeof createCalendarClient>;
