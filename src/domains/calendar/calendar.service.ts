/**
 * Calendar connections (§4.6, §2 "Calendar connection"): the OAuth connect/callback flow, the
 * stored connection (tokens sealed at rest, refreshed when expired) and the calendar actions over
 * the provider's Calendar v3 API. Provider failures answer 502; a connection the provider no
 * longer honours (refresh refused) is dropped and answers 401, so the user is asked to connect again.
 */
import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { decryptSecret, encryptSecret } from '../../lib/crypto.ts';
import { AppError, badRequest, notFound } from '../../lib/errors.ts';
import type { Logger } from '../../lib/logger.ts';
import { type ApiEvent, CalendarApiError, type CalendarClient, createCalendarClient, type EventWrite } from './calendar.client.ts';
import { type ConnectionRow, calendarRepo } from './calendar.repo.ts';
import type { CreateEventInput, EventView, UpdateEventInput } from './calendar.schemas.ts';
import { createCalendarState, createCalendarStateCookie } from './calendar-state.rules.ts';
import { availability, isDate, isTimeZone, slotWindow, todayIn, zonedToUtc } from './calendar-time.rules.ts';

/** §4.6 scopes: events read/write, and the calendars' metadata and free/busy (read-only). */
export const CALENDAR_SCOPES = ['https://www.googleapis.com/auth/calendar.events', 'https://www.googleapis.com/auth/calendar.readonly'];

export type CalendarDeps = {
  db: Db;
  config: Pick<
    Config,
    'PUBLIC_URL' | 'CALENDAR_CLIENT_ID' | 'CALENDAR_CLIENT_SECRET' | 'CALENDAR_AUTH_URL' | 'CALENDAR_TOKEN_URL' | 'CALENDAR_API_URL'
  >;
  /** SECRETS_ENCRYPTION_KEY: seals the tokens and keys the state's HMAC */
  secretsKey: Buffer;
  now?: () => number;
  log?: Logger;
};

/** What the callback redirects to (§4.6): `connected=true` or one `error` value. */
export type CallbackOutcome = { connected: true } | { error: string };

/** A connect's consent URL, and the sealed cookie that binds its state to the browser it is given to. */
export type ConnectStart = { authUrl: string; stateCookie: string };

const notConnected = () => new AppError('CALENDAR_NOT_CONNECTED', 'Calendar not connected');
const upstream = () => new AppError('CALENDAR_UPSTREAM_FAILED', 'The calendar provider failed; try again later');

export function createCalendarService(deps: CalendarDeps) {
  const { db, config, secretsKey } = deps;
  const now = deps.now ?? Date.now;
  const clientId = config.CALENDAR_CLIENT_ID;
  const clientSecret = config.CALENDAR_CLIENT_SECRET;
  if (!clientId || !clientSecret) throw new Error('calendar service needs CALENDAR_CLIENT_ID and CALENDAR_CLIENT_SECRET');
  const client: CalendarClient = createCalendarClient({
    clientId,
    clientSecret,
    tokenUrl: config.CALENDAR_TOKEN_URL,
    apiUrl: config.CALENDAR_API_URL,
  });
  const state = createCalendarState(secretsKey, now);
  const stateCookie = createCalendarStateCookie(secretsKey, now);
  const redirectUri = `${config.PUBLIC_URL}/api/calendar/callback`;
  const seal = (v: string) => encryptSecret(secretsKey, v);
  const open = (v: string) => decryptSecret(secretsKey, v);

  type Conn = { accessToken: string; calendarId: string; timezone: string };

  /** A refreshed access token, stored; a refused refresh drops the connection (401). */
  async function refresh(userId: string, row: ConnectionRow): Promise<string> {
    if (!row.refresh_token_enc) {
      await db.withUser(userId, (trx) => calendarRepo.remove(trx, userId));
      throw notConnected();
    }
    try {
      const t = await client.refresh(open(row.refresh_token_enc));
      const expiresAt = new Date(now() + t.expiresInSec * 1000);
      await db.withUser(userId, (trx) =>
        calendarRepo.saveTokens(trx, userId, seal(t.accessToken), expiresAt, t.refreshToken ? seal(t.refreshToken) : undefined),
      );
      return t.accessToken;
    } catch (err) {
      if (err instanceof CalendarApiError && (err.status === 400 || err.status === 401)) {
        // invalid_grant: revoked or expired refresh token; nothing but a new consent helps
        deps.log?.warn({ userId, oauthError: err.oauthError }, 'calendar refresh refused: connection dropped');
        await db.withUser(userId, (trx) => calendarRepo.remove(trx, userId));
        throw notConnected();
      }
      throw err instanceof CalendarApiError ? upstream() : err;
    }
  }

  /**
   * Runs `fn` with a valid access token: refreshed first when it expires within the margin, and
   * once more when the provider answers 401 anyway (revoked early, clock skew).
   */
  async function withCalendar<T>(userId: string, fn: (c: Conn) => Promise<T>, mapError?: (e: CalendarApiError) => Error | undefined) {
    const row = await db.withUser(userId, (trx) => calendarRepo.find(trx, userId));
    if (!row) throw notConnected();
    const base = { calendarId: row.calendar_id, timezone: row.timezone };
    let accessToken =
      row.access_expires_at.getTime() - LIMITS.calendarTokenRefreshMarginMs <= now()
        ? await refresh(userId, row)
        : open(row.access_token_enc);
    try {
      try {
        return await fn({ ...base, accessToken });
      } catch (err) {
        if (!(err instanceof CalendarApiError && err.status === 401)) throw err;
        accessToken = await refresh(userId, row);
        return await fn({ ...base, accessToken });
      }
    } catch (err) {
      if (!(err instanceof CalendarApiError)) throw err;
      if (err.status === 401) throw notConnected();
      throw mapError?.(err) ?? upstream();
    }
  }

  /** The provider's 404/410 for an event id: not this user's event, or already deleted. */
  const eventErrors = (e: CalendarApiError) =>
    e.status === 404 || e.status === 410
      ? notFound('Event not found')
      : e.status === 400
        ? badRequest('The calendar provider refused the event')
        : undefined;

  /** A time as the provider takes it: with its offset, or wall-clock in the calendar's zone. */
  const timeOf = (value: string, timezone: string) =>
    /(?:Z|[+-]\d{2}:\d{2})$/i.test(value)
      ? { dateTime: value }
      : { dateTime: value.length === 16 ? `${value}:00` : value, timeZone: timezone };
  const instantOf = (value: string, timezone: string) => {
    if (/(?:Z|[+-]\d{2}:\d{2})$/i.test(value)) return Date.parse(value);
    const [date, clock = ''] = value.split('T') as [string, string];
    const [h = 0, m = 0, s = 0] = clock.split(':').map(Number);
    return zonedToUtc(date, h, m, timezone) + s * 1000;
  };
  const checkOrder = (start: string, end: string, timezone: string) => {
    if (instantOf(end, timezone) <= instantOf(start, timezone)) throw badRequest('end must be after start');
  };

  return {
    /**
     * POST connect / GET auth: the provider's consent URL with a fresh signed state (§4.6), and
     * the cookie holding that state, which the route sets on this answer: only the browser that
     * asked can finish the connect.
     */
    connect(userId: string): ConnectStart {
      const issued = state.issue(userId);
      const url = new URL(config.CALENDAR_AUTH_URL);
      url.search = new URLSearchParams({
        client_id: clientId,
        redirect_uri: redirectUri,
        response_type: 'code',
        scope: CALENDAR_SCOPES.join(' '),
        // offline access: a refresh token, so the connection outlives the hour-long access token;
        // consent every time, because the provider sends the refresh token only with a consent
        access_type: 'offline',
        prompt: 'consent',
        include_granted_scopes: 'true',
        state: issued,
      }).toString();
      return { authUrl: url.toString(), stateCookie: stateCookie.seal(issued) };
    },

    /**
     * GET /api/calendar/callback (§4.6): the provider's error, `no_code`, `missing_state`,
     * `invalid_state`, `not_signed_in`, `token_failed`, `unknown`; else the connection is stored
     * for the state's user.
     *
     * A connect link is bound to the browser and the account that asked for it, once. Otherwise
     * whoever opens someone's link and consents (signed out, or in another browser) attaches their
     * own calendar to that account, which then reads it and sends invitations from it. So besides
     * a valid state (signature, under 10 minutes) the callback wants a session (`not_signed_in`),
     * of the state's user, the sealed cookie `connect` set in this browser holding this very state,
     * and a state not used before (its nonce is recorded: a replay, even with a copied cookie, is
     * refused); each of those failing is `invalid_state`. The code is not exchanged then.
     */
    async callback(
      query: { code?: string | undefined; state?: string | undefined; error?: string | undefined },
      sealedState: string | undefined,
      sessionUserId: string | null,
    ): Promise<CallbackOutcome> {
      if (query.error) return { error: query.error.slice(0, 100) };
      if (!query.code) return { error: 'no_code' };
      if (!query.state) return { error: 'missing_state' };
      const checked = state.verify(query.state);
      if (!checked.ok) return { error: 'invalid_state' };
      const userId = checked.userId;
      const refused = (error: 'invalid_state' | 'not_signed_in', reason: string) => {
        deps.log?.warn({ userId, reason }, 'calendar callback refused');
        return { error };
      };
      if (sessionUserId === null) return refused('not_signed_in', 'no session');
      if (sessionUserId !== userId) return refused('invalid_state', 'another user is signed in');
      if (!stateCookie.matches(sealedState, query.state)) return refused('invalid_state', 'no state cookie of this state in this browser');
      const fresh = await db.withUser(userId, (trx) => calendarRepo.spendState(trx, userId, checked.nonce, new Date(checked.expiresAt)));
      if (!fresh) return refused('invalid_state', 'state already used');
      let tokens: Awaited<ReturnType<CalendarClient['exchangeCode']>>;
      try {
        tokens = await client.exchangeCode(query.code, redirectUri);
      } catch (err) {
        deps.log?.warn({ userId, status: (err as CalendarApiError).status }, 'calendar code exchange failed');
        return { error: 'token_failed' };
      }
      try {
        const primary = await client.primaryCalendar(tokens.accessToken);
        const calendarId = typeof primary.id === 'string' && primary.id ? primary.id : 'primary';
        const timezone = typeof primary.timeZone === 'string' && isTimeZone(primary.timeZone) ? primary.timeZone : 'UTC';
        await db.withUser(userId, (trx) =>
          calendarRepo.upsert(trx, userId, {
            calendar_id: calendarId,
            timezone,
            access_token_enc: seal(tokens.accessToken),
            refresh_token_enc: tokens.refreshToken ? seal(tokens.refreshToken) : null,
            access_expires_at: new Date(now() + tokens.expiresInSec * 1000),
          }),
        );
        return { connected: true };
      } catch (err) {
        deps.log?.warn({ userId, err: (err as Error).message }, 'calendar connection could not be stored');
        return { error: 'unknown' };
      }
    },

    connected: (userId: string) => db.withUser(userId, (trx) => calendarRepo.exists(trx, userId)),

    /** §4.6 list: default window now to now plus 30 days. */
    async list(userId: string, q: { start?: string | undefined; end?: string | undefined }) {
      const start = q.start ?? new Date(now()).toISOString();
      const end = q.end ?? new Date(Date.parse(start) + LIMITS.calendarListDefaultDays * 86_400_000).toISOString();
      if (Date.parse(end) <= Date.parse(start)) throw badRequest('end must be after start');
      return withCalendar(userId, async (c) => {
        const res = await client.listEvents(c.accessToken, c.calendarId, start, end);
        return { events: (res.items ?? []).map(view), timezone: c.timezone };
      });
    },

    /** §4.6 availability: one-hour slots 09:00-23:00 of `date` in the calendar's timezone, busy ones left out. */
    async availability(userId: string, date: string | undefined) {
      if (date !== undefined && !isDate(date)) throw badRequest('date must be a real day written YYYY-MM-DD');
      return withCalendar(userId, async (c) => {
        const day = date ?? todayIn(now(), c.timezone);
        const w = slotWindow(day, c.timezone);
        const busy = await client.busy(c.accessToken, c.calendarId, w.timeMin, w.timeMax, c.timezone);
        return { ...availability(day, c.timezone, busy), timezone: c.timezone };
      });
    },

    async createEvent(userId: string, input: CreateEventInput) {
      return withCalendar(
        userId,
        async (c) => {
          checkOrder(input.start, input.end, c.timezone);
          const event: EventWrite = {
            summary: input.title,
            start: timeOf(input.start, c.timezone),
            end: timeOf(input.end, c.timezone),
            ...(input.description !== undefined ? { description: input.description } : {}),
            ...(input.location !== undefined ? { location: input.location } : {}),
            ...(input.attendees ? { attendees: input.attendees.map((email) => ({ email })) } : {}),
          };
          const created = await client.insertEvent(c.accessToken, c.calendarId, event);
          return { success: true as const, eventId: created.id, event: view(created) };
        },
        eventErrors,
      );
    },

    /** §4.6 update-event: a PATCH of only the fields given. */
    async updateEvent(userId: string, input: UpdateEventInput) {
      const { eventId, ...fields } = input;
      if (Object.values(fields).every((v) => v === undefined)) {
        throw badRequest('Nothing to update: give title, description, start, end or location');
      }
      return withCalendar(
        userId,
        async (c) => {
          if (fields.start !== undefined && fields.end !== undefined) checkOrder(fields.start, fields.end, c.timezone);
          const patch: EventWrite = {
            ...(fields.title !== undefined ? { summary: fields.title } : {}),
            ...(fields.description !== undefined ? { description: fields.description } : {}),
            ...(fields.location !== undefined ? { location: fields.location } : {}),
            ...(fields.start !== undefined ? { start: timeOf(fields.start, c.timezone) } : {}),
            ...(fields.end !== undefined ? { end: timeOf(fields.end, c.timezone) } : {}),
          };
          const updated = await client.patchEvent(c.accessToken, c.calendarId, eventId, patch);
          return { success: true as const, event: view(updated) };
        },
        eventErrors,
      );
    },

    async deleteEvent(userId: string, eventId: string) {
      return withCalendar(
        userId,
        async (c) => {
          await client.deleteEvent(c.accessToken, c.calendarId, eventId);
          return { success: true as const };
        },
        eventErrors,
      );
    },

    async quickAdd(userId: string, text: string) {
      return withCalendar(
        userId,
        async (c) => {
          const created = await client.quickAdd(c.accessToken, c.calendarId, text);
          return { success: true as const, eventId: created.id };
        },
        eventErrors,
      );
    },
  };
}

/** The §4.6 event shape: `{id, summary, start:{dateTime}, end:{dateTime}, location}` (all-day events carry `date`). */
function view(e: ApiEvent): EventView {
  const time = (t: ApiEvent['start']) => ({
    ...(t?.dateTime ? { dateTime: t.dateTime } : {}),
    ...(t?.date ? { date: t.date } : {}),
  });
  return {
    id: e.id,
    ...(e.summary !== undefined ? { summary: e.summary } : {}),
    ...(e.description !== undefined ? { description: e.description } : {}),
    start: time(e.start),
    end: time(e.end),
    ...(e.location !== undefined ? { location: e.location } : {}),
    ...(e.attendees ? { attendees: e.attendees.map((a) => a.email) } : {}),
  };
}

export type CalendarService = ReturnType<typeof createCalendarService>;
