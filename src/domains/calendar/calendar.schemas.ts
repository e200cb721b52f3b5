/**
 * The §4.6 calendar actions' inputs and outputs, shared by the service and the route (whose
 * OpenAPI description they generate). One `/api/calendar` path serves every action, so the body of
 * a POST is checked against the schema of its `action` after the action is known.
 */
import { z } from 'zod';
import { badRequest } from '../../lib/errors.ts';

const text = (name: string, max: number) =>
  z
    .string({ error: (i) => (i.input === undefined ? `${name} required` : `${name} must be a string`) })
    .trim()
    .min(1, `${name} required`)
    .max(max, `${name} must be at most ${max} characters`);

/** RFC 3339 with an offset (`2026-03-02T10:00:00Z`, `…+01:00`), or a wall-clock time in the calendar's timezone (`2026-03-02T10:00`). */
const when = (name: string) =>
  z
    .string({ error: (i) => (i.input === undefined ? `${name} required` : `${name} must be a string`) })
    .pipe(
      z.iso.datetime({
        offset: true,
        local: true,
        error: `${name} must be a date-time such as 2026-03-02T10:00:00Z, 2026-03-02T10:00:00+01:00 or 2026-03-02T10:00 (the calendar's timezone)`,
      }),
    )
    .describe(`${name}: RFC 3339 with an offset, or a wall-clock time without one, read in the calendar's timezone`);

const instant = (name: string) =>
  z
    .string({ error: `${name} must be a string` })
    .pipe(z.iso.datetime({ offset: true, error: `${name} must be an RFC 3339 date-time with an offset, e.g. 2026-03-02T10:00:00Z` }))
    .optional();

export const ACTIONS = {
  get: ['status', 'auth', 'list', 'availability'],
  post: ['connect', 'create-event', 'update-event', 'delete-event', 'quick-add'],
} as const;

/** The query of GET /api/calendar as documented; checked per action in the handler, after the session (401 before 400). */
export const getQuery = z
  .object({
    action: z
      .string()
      .optional()
      .describe(`One of ${ACTIONS.get.join(', ')}; no action means status`),
    start: z.string().optional().describe('list: window start, RFC 3339 with an offset (default now)'),
    end: z.string().optional().describe('list: window end, RFC 3339 with an offset (default start plus 30 days)'),
    date: z.string().optional().describe("availability: the day, YYYY-MM-DD (default today in the calendar's timezone)"),
  })
  .loose();

export const listInput = z.object({ start: instant('start'), end: instant('end') });
export const availabilityInput = z.object({
  date: z
    .string({ error: 'date must be a string' })
    .regex(/^\d{4}-\d{2}-\d{2}$/, 'date must be YYYY-MM-DD')
    .optional(),
});

export const postBody = z
  .object({
    action: z
      .string()
      .optional()
      .describe(`One of ${ACTIONS.post.join(', ')} (also accepted as ?action=)`),
  })
  .loose()
  .describe('The fields of the chosen action (below); unknown fields are ignored');

const attendees = z
  .array(z.email({ error: 'attendees must be email addresses' }), { error: 'attendees must be an array of email addresses' })
  .max(100, 'attendees: at most 100')
  .optional();

export const createEventInput = z.object({
  title: text('title', 1024),
  start: when('start'),
  end: when('end'),
  description: z.string({ error: 'description must be a string' }).max(8192, 'description must be at most 8192 characters').optional(),
  location: z.string({ error: 'location must be a string' }).max(1024, 'location must be at most 1024 characters').optional(),
  attendees,
});

export const updateEventInput = z.object({
  eventId: text('eventId', 1024),
  title: text('title', 1024).optional(),
  description: z.string({ error: 'description must be a string' }).max(8192, 'description must be at most 8192 characters').optional(),
  start: when('start').optional(),
  end: when('end').optional(),
  location: z.string({ error: 'location must be a string' }).max(1024, 'location must be at most 1024 characters').optional(),
});

export const deleteEventInput = z.object({ eventId: text('eventId', 1024) });
export const quickAddInput = z.object({ text: text('text', 1024) });

export type CreateEventInput = z.infer<typeof createEventInput>;
export type UpdateEventInput = z.infer<typeof updateEventInput>;

/** Parses `value` with `schema`, or throws 400 with the first problem in words. */
export function parseInput<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const result = schema.safeParse(value ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  throw badRequest(issue?.message ?? 'Invalid request');
}

const time = z.object({ dateTime: z.string().optional(), date: z.string().optional().describe('an all-day event: its day') });
export const eventView = z.object({
  id: z.string(),
  summary: z.string().optional(),
  description: z.string().optional(),
  start: time,
  end: time,
  location: z.string().optional(),
  attendees: z.array(z.string()).optional(),
});
export type EventView = z.infer<typeof eventView>;

const slot = z.object({ start: z.string(), end: z.string() });

export const responses = {
  status: z.object({ connected: z.boolean() }),
  list: z.object({ events: z.array(eventView), timezone: z.string() }),
  availability: z.object({
    availableSlots: z.array(slot).describe("free one-hour slots, RFC 3339 in the calendar's offset"),
    busySlots: z.array(slot).describe('busy intervals as the provider reported them'),
    date: z.string(),
    timezone: z.string().describe("the calendar's IANA timezone the slots are in"),
  }),
  connect: z.object({ authUrl: z.string() }),
  createEvent: z.object({ success: z.literal(true), eventId: z.string(), event: eventView }),
  updateEvent: z.object({ success: z.literal(true), event: eventView }),
  deleteEvent: z.object({ success: z.literal(true) }),
  quickAdd: z.object({ success: z.literal(true), eventId: z.string() }),
};
