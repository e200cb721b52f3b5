/** Response schemas of the watchdog views, shared by the backend and web routes. */
import { z } from 'zod';
import { WATCHDOG_STATES } from './watchdog.types.ts';

const state = z.enum(WATCHDOG_STATES);

/** The current state as agent responses carry it (null until the watchdog first sees the agent running). */
export const watchdogStateSchema = z
  .object({ state, since: z.string() })
  .nullable()
  .describe(
    'Watchdog state (§3 "Watchdog lifecycle"): starting, running, degraded, repairing, crash_loop or stopped, and since when; null while the agent is not watched',
  );

export const watchdogHistoryLimit = z.coerce
  .number({ error: 'limit must be a number' })
  .int({ error: 'limit must be an integer' })
  .min(1, { error: 'limit must be at least 1' })
  .max(100, { error: 'limit must be at most 100' })
  .default(50);

export const watchdogViewSchema = z
  .object({
    agentId: z.string(),
    state: state.nullable(),
    since: z.string().nullable(),
    lastCheckAt: z.string().nullable(),
    lastHealthyAt: z.string().nullable(),
    nextCheckAt: z.string().nullable(),
    repairAttempts: z.number().describe('repairs tried since the agent was last healthy'),
    lastError: z.string().nullable(),
    history: z.array(
      z.object({
        id: z.number(),
        kind: z.enum(['transition', 'crash', 'repair']),
        from: z.string().nullable(),
        to: z.string().nullable(),
        attempt: z.number().nullable(),
        ok: z.boolean().nullable(),
        detail: z.string().nullable(),
        at: z.string(),
      }),
    ),
  })
  .describe(
    'Current watchdog state and its history, newest first: transitions, crashes (the process found dead) and repairs (attempt number, outcome)',
  );
