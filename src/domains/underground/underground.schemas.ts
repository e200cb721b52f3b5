/** Request and response shapes of the Underground routes (§4.15, §2 "Underground event", "Royalty split"). */
import { z } from 'zod';

const required = (field: string) => ({
  error: (i: { input: unknown }) => (i.input === undefined ? `${field} is required` : `${field} must be a string`),
});
const text = (field: string, max: number) =>
  z.string(required(field)).trim().min(1, `${field} is required`).max(max, `${field} must be at most ${max} characters`);

/** Agent ids are DNS labels (migration 002); anything else cannot name an agent. */
export const agentIdSchema = z
  .string(required('agentId'))
  .min(1, 'agentId is required')
  .max(63, 'agentId is not a valid agent id')
  .regex(/^[a-z0-9][a-z0-9-]*$/, 'agentId is not a valid agent id');

/** A decimal USDC amount as a string, at most 6 decimals (the token's), below 10 000 000. */
export const usdcStringSchema = (field: string) =>
  z
    .string({ error: (i) => (i.input === undefined ? `${field} is required` : `${field} must be a decimal string, e.g. "12.50"`) })
    .trim()
    .regex(/^\d{1,7}(\.\d{1,6})?$/, `${field} must be a decimal string with at most 6 decimals, e.g. "12.50"`);

/**
 * An ISO 8601 date (`2026-12-31`, midnight UTC) or date-time with `Z` or an offset; a real calendar
 * day (Date.parse alone takes 2026-02-30 as 2 March) and no time without a timezone (it would be
 * read in the server's local time).
 */
export function isIsoDate(value: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-](\d{2}):(\d{2})))?$/.exec(value);
  if (!m) return false;
  const [y, mo, d, h = 0, mi = 0, sec = 0, oh = 0, om = 0] = m.slice(1).map((x) => (x === undefined ? undefined : Number(x)));
  const day = new Date(Date.UTC(y!, mo! - 1, d!));
  return (
    day.getUTCFullYear() === y &&
    day.getUTCMonth() === mo! - 1 &&
    day.getUTCDate() === d &&
    h < 24 &&
    mi < 60 &&
    sec < 60 &&
    oh < 24 &&
    om < 60
  );
}

export const createEventBody = z.object(
  {
    agentId: agentIdSchema,
    name: text('name', 200),
    description: text('description', 5000),
    venue: text('venue', 200),
    eventDate: z.string(required('eventDate')).refine(isIsoDate, {
      error: 'eventDate must be an ISO 8601 date or date-time with a timezone, e.g. 2026-12-31T21:00:00Z',
    }),
    ticketPriceUsdc: usdcStringSchema('ticketPriceUsdc'),
    totalTickets: z
      .number({ error: (i) => (i.input === undefined ? 'totalTickets is required' : 'totalTickets must be a number') })
      .int('totalTickets must be a whole number')
      .min(1, 'totalTickets must be at least 1')
      .max(1_000_000, 'totalTickets must be at most 1000000'),
  },
  { error: 'Request body must be a JSON object' },
);
export type CreateEventInput = z.infer<typeof createEventBody>;

export const eventSchema = z.object({
  id: z.number(),
  agent_id: z.string(),
  name: z.string(),
  description: z.string(),
  venue: z.string(),
  event_date: z.string().describe('ISO 8601'),
  ticket_price_usdc: z.string(),
  total_tickets: z.number(),
  created_at: z.string(),
});

export const createWalletBody = z.object(
  { agentId: agentIdSchema, userId: z.unknown().optional().describe('ignored: the user comes from `x-user-id` (§4.15)') },
  { error: 'Request body must be a JSON object' },
);

export const walletSchema = z.object({ address: z.string(), agentId: z.string() });
export const balanceSchema = z.object({ address: z.string(), balance_usdc: z.number().describe('USDC on Base, 6 decimals') });

export const MAX_RECIPIENTS = 100;

export const createSplitBody = z.object(
  {
    agentId: agentIdSchema,
    name: text('name', 200),
    totalAmount: usdcStringSchema('totalAmount'),
    recipients: z
      .array(
        z.object(
          {
            address: z
              .string({ error: 'Each recipient needs an address' })
              .regex(/^0x[0-9a-fA-F]{40}$/, 'Each recipient address must be 0x followed by 40 hex digits'),
            share: z.number({ error: 'Each recipient needs a numeric share (a percentage)' }),
          },
          { error: 'Each recipient must be an object with address and share' },
        ),
        { error: (i) => (i.input === undefined ? 'recipients is required' : 'recipients must be an array') },
      )
      .min(1, 'recipients must not be empty')
      .max(MAX_RECIPIENTS, `At most ${MAX_RECIPIENTS} recipients`),
    userId: z.unknown().optional().describe('ignored: the user comes from `x-user-id` (§4.15)'),
    fromAddress: z.unknown().optional().describe('ignored (§4.15)'),
  },
  { error: 'Request body must be a JSON object' },
);
export type CreateSplitInput = z.infer<typeof createSplitBody>;

export const splitResultSchema = z.object({
  success: z.literal(true),
  splitId: z.number(),
  status: z.literal('completed'),
  recipients: z
    .array(z.object({ address: z.string(), share: z.number(), amountMicros: z.number().describe('integer micro-USDC') }))
    .describe("each recipient's recorded amount; they sum exactly to totalAmount"),
});
