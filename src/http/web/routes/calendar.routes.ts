/**
 * §4.6 Calendar: every action on `/api/calendar` (the user from the session), `action` selecting the
 * operation, and the OAuth callback the provider redirects to. Without CALENDAR_CLIENT_ID and
 * CALENDAR_CLIENT_SECRET the module still answers: status `{connected:false}`, everything else 503.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { LIMITS } from '../../../config/limits.ts';
import {
  ACTIONS,
  availabilityInput,
  CALENDAR_STATE_COOKIE,
  CALENDAR_STATE_COOKIE_PATH,
  type CalendarService,
  type ConnectStart,
  createEventInput,
  deleteEventInput,
  getQuery,
  listInput,
  parseInput,
  postBody,
  quickAddInput,
  responses,
  updateEventInput,
} from '../../../domains/calendar/index.ts';
import { AppError, badRequest } from '../../../lib/errors.ts';
import type { RouteModule } from '../../shared/routes.ts';
import { errorResponses } from '../../shared/schemas.ts';
import { currentUser, type SessionAuth, type SessionRouteConfig } from '../../shared/session.ts';

const CALENDAR_PAGE = '/dashboard/calendar';
const invalidAction = () => badRequest('Invalid action');
const MINUTES = LIMITS.calendarStateTtlMs / 60_000;

const ERRORS_TEXT =
  'Errors: 401 `Calendar not connected` (no session, or no connection: also when the provider refused to refresh it, which drops it), ' +
  '400 `Invalid action` or a sentence naming the bad field, 404 `Event not found` (update, delete), 502 when the provider fails or ' +
  'times out (nothing stored changes), 503 when CALENDAR_CLIENT_ID/CALENDAR_CLIENT_SECRET are not set.';

export const calendarRoutes = (deps: {
  calendar: CalendarService | undefined;
  session: SessionAuth;
  /** Secure cookies (PUBLIC_URL is https) */
  secure: boolean;
}): RouteModule<'session' | 'public'> => {
  const service = (): CalendarService => {
    if (!deps.calendar) throw new AppError('CALENDAR_NOT_CONFIGURED', 'Calendar is not configured on this server');
    return deps.calendar;
  };
  // Lax: the provider's redirect back is a top-level GET, which carries it; sent to the callback only
  const cookieOptions = { httpOnly: true, sameSite: 'lax' as const, secure: deps.secure, path: CALENDAR_STATE_COOKIE_PATH };
  /** Binds the connect to this browser (calendar-state.rules.ts); the answer's consent URL for the caller. */
  const startConnect = (reply: FastifyReply, start: ConnectStart) => {
    reply.setCookie(CALENDAR_STATE_COOKIE, start.stateCookie, { ...cookieOptions, maxAge: LIMITS.calendarStateTtlMs / 1000 });
    return start.authUrl;
  };
  /** `action` from the query or the JSON body (§4.6 names only the parameter). */
  const actionOf = (request: FastifyRequest) =>
    (request.query as { action?: unknown }).action ?? (request.body as { action?: unknown } | undefined)?.action;

  return {
    prefix: '/api/calendar',
    session: async (app) => {
      app.get('', {
        schema: {
          tags: ['calendar'],
          summary: 'Calendar: status, auth, list, availability (§4.6)',
          description:
            '`?action=` selects: `status` (default) `{connected}`, `{connected:false}` without a session; `auth` redirects (302) to the ' +
            "provider's consent page with a signed state (and sets the state cookie, as `connect` does), or to `/login` without a " +
            'session; `list` `{events, timezone}` between `start` ' +
            `(default now) and \`end\` (default now plus ${LIMITS.calendarListDefaultDays} days), recurring events expanded; ` +
            '`availability` `{availableSlots, busySlots, date, timezone}`: the one-hour slots from ' +
            `${LIMITS.calendarSlotFirstHour}:00 to ${LIMITS.calendarSlotEndHour}:00 of \`date\` (default today) in the calendar's timezone, ` +
            `those overlapping a busy interval of the provider's free/busy left out. ${ERRORS_TEXT}`,
          querystring: getQuery,
          // documented as public: status answers without a session
          security: [],
          response: {
            200: z.union([responses.status, responses.list, responses.availability]),
            302: z.null().describe('auth: Location is the consent page (or /login)'),
            ...errorResponses(400, 401, 502, 503),
          },
        },
        config: { sessionOptional: true } satisfies SessionRouteConfig,
        handler: async (request, reply) => {
          const action = actionOf(request) ?? 'status';
          const user = request.user;
          switch (action) {
            case 'status':
              return { connected: user && deps.calendar ? await deps.calendar.connected(user.id) : false };
            case 'auth':
              if (!user) return reply.redirect('/login');
              return reply.redirect(startConnect(reply, service().connect(user.id)));
            case 'list': {
              const id = currentUser(request).id;
              return service().list(id, parseInput(listInput, request.query));
            }
            case 'availability': {
              const id = currentUser(request).id;
              return service().availability(id, parseInput(availabilityInput, request.query).date);
            }
            default:
              currentUser(request);
              throw invalidAction();
          }
        },
      });

      app.post('', {
        schema: {
          tags: ['calendar'],
          summary: 'Calendar: connect, create-event, update-event, delete-event, quick-add (§4.6)',
          description:
            '`action` in the body (or `?action=`) selects: `connect` `{authUrl}` (the consent URL; its `state` is HMAC-signed, bound to ' +
            `this user and valid ${MINUTES} minutes; offline access, so a refresh token) and sets \`${CALENDAR_STATE_COOKIE}\`, an ` +
            'encrypted HttpOnly cookie for the callback path holding that state: only this browser, signed in as this user, can finish ' +
            'the connect, once; `create-event` with `title`, `start`, `end` ' +
            'required and `description`, `location`, `attendees` (emails) optional → `{success, eventId, event}`; `update-event` with ' +
            '`eventId` and any of `title`, `description`, `start`, `end`, `location` → `{success, event}` (a PATCH: only the given fields ' +
            'change); `delete-event` with `eventId` → `{success:true}`; `quick-add` with `text` (natural language, parsed by the provider) ' +
            "→ `{success, eventId}`. `start`/`end` are RFC 3339 with an offset, or a wall-clock time without one read in the calendar's " +
            `timezone; \`end\` must be after \`start\`. ${ERRORS_TEXT}`,
          querystring: z.object({ action: z.string().optional() }).loose(),
          body: postBody,
          response: {
            // most fields first: the serializer keeps the first member that fits, and strips the rest
            200: z.union([responses.createEvent, responses.updateEvent, responses.quickAdd, responses.connect, responses.deleteEvent]),
            ...errorResponses(400, 401, 404, 502, 503),
          },
        },
        handler: async (request, reply) => {
          const userId = currentUser(request).id;
          const action = actionOf(request);
          const body = request.body;
          if (typeof action !== 'string' || !(ACTIONS.post as readonly string[]).includes(action)) throw invalidAction();
          switch (action) {
            case 'connect':
              return { authUrl: startConnect(reply, service().connect(userId)) };
            case 'create-event':
              return service().createEvent(userId, parseInput(createEventInput, body));
            case 'update-event':
              return service().updateEvent(userId, parseInput(updateEventInput, body));
            case 'delete-event':
              return service().deleteEvent(userId, parseInput(deleteEventInput, body).eventId);
            default:
              return service().quickAdd(userId, parseInput(quickAddInput, body).text);
          }
        },
      });
    },

    public: async (app) => {
      app.get('/callback', {
        schema: {
          tags: ['calendar'],
          summary: 'Calendar OAuth callback (§4.6)',
          description:
            'The provider redirects the browser here. Verifies the state (signature, age under ' +
            `${MINUTES} minutes), that the browser is signed in as the user who started, that it holds the \`${CALENDAR_STATE_COOKIE}\` ` +
            'cookie `connect` set with this state (the cookie is cleared whatever the outcome), and that the state was not used before; ' +
            "then exchanges `code`, reads the primary calendar's id and timezone, stores the connection (tokens encrypted at rest) for " +
            `the state's user and redirects (302) to \`${CALENDAR_PAGE}?connected=true\`. Otherwise to \`${CALENDAR_PAGE}?error=<value>\`: ` +
            "the provider's `error` (e.g. `access_denied`), `no_code`, `missing_state`, `invalid_state` (bad signature, expired, " +
            "another user signed in, not this browser's state, or already used), `not_signed_in` (no session: sign in and connect " +
            'again), `token_failed` (the code exchange failed), `unknown` (anything after it, or calendars not configured).',
          querystring: z
            .object({
              code: z.string().optional().describe('the authorization code'),
              state: z.string().optional().describe('the signed state from connect/auth'),
              error: z.string().optional().describe("the provider's refusal, e.g. access_denied"),
            })
            .loose(),
          security: [],
          response: { 302: z.null().describe(`Location: ${CALENDAR_PAGE}?connected=true or ?error=<value>`) },
        },
        handler: async (request, reply) => {
          const q = request.query as { code?: unknown; state?: unknown; error?: unknown };
          const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : undefined);
          const user = await deps.session.user(request);
          const sealed = request.cookies[CALENDAR_STATE_COOKIE];
          // one cookie, one attempt: cleared whatever the outcome
          if (sealed !== undefined) reply.clearCookie(CALENDAR_STATE_COOKIE, cookieOptions);
          const outcome = deps.calendar
            ? await deps.calendar.callback({ code: str(q.code), state: str(q.state), error: str(q.error) }, sealed, user?.id ?? null)
            : { error: 'unknown' };
          const target =
            'connected' in outcome ? `${CALENDAR_PAGE}?connected=true` : `${CALENDAR_PAGE}?error=${encodeURIComponent(outcome.error)}`;
          return reply.redirect(target);
        },
      });
    },
  };
};
