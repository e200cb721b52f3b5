/**
 * Per-agent heartbeat settings (§2 Heartbeat settings, §4.12), and the schedule the worker runs
 * (src/workers/heartbeats.ts). A setting is the user's own (keyed by user and agent, under
 * row-level security); saving one requires owning the agent. The schedule is those rows: the
 * worker claims the due ones (leased, across users) and records each run here.
 */
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import type { JobOutcome } from '../../lib/jobs.ts';
import { heartbeatRepo } from './heartbeat.repo.ts';
import { type DueHeartbeat, heartbeatScheduleRepo } from './heartbeat-schedule.repo.ts';

const UNIT_MS = { m: 60_000, h: 60 * 60_000, d: 24 * 60 * 60_000 } as const;
const FREQUENCY = /^([1-9][0-9]{0,5})([mhd])$/;
export const FREQUENCY_ERROR = 'Invalid frequency; use <n>m, <n>h or <n>d with n a positive whole number, at most 30 days';

/** Milliseconds of a `<n>m|h|d` frequency, or null when malformed, not positive, or above the maximum. */
export function parseFrequency(value: string): number | null {
  const m = FREQUENCY.exec(value);
  if (!m) return null;
  const ms = Number(m[1]) * UNIT_MS[m[2] as keyof typeof UNIT_MS];
  return ms > LIMITS.heartbeatMaxFrequencyMs ? null : ms;
}

/** `agentId` as §4.12 requires it: a non-empty string (400 `agentId required` otherwise). */
export function requireAgentId(value: unknown): string {
  const id = typeof value === 'string' ? value.trim() : '';
  if (!id) throw badRequest('agentId required');
  if (id.length > LIMITS.heartbeatAgentIdMax) throw badRequest(`agentId must be at most ${LIMITS.heartbeatAgentIdMax} characters`);
  return id;
}

export type Heartbeat = { frequency: string; enabled: boolean; lastHeartbeat: string | null; nextHeartbeat: string | null };
export type SavedHeartbeat = Heartbeat & { agentId: string; lastUpdated: string };

/** What waking an agent for one heartbeat came to: `ran` when the agent ran its heartbeat prompt. */
export type HeartbeatRun = { status: 'ok' | 'failed' | 'skipped'; error: string | null; ran: boolean };

const iso = (d: Date | null) => (d ? d.toISOString() : null);
/** a stored frequency is checked on save; a row written otherwise falls back to the default 3 h */
const frequencyMs = (frequency: string) => parseFrequency(frequency) ?? 3 * 60 * 60 * 1000;

export function createHeartbeatService(deps: { db: Db; now?: () => Date }) {
  const { db } = deps;
  const now = deps.now ?? (() => new Date());

  return {
    /** §4.12 GET: the saved settings, or the defaults (`3h`, enabled, nulls) when none are saved. */
    async get(userId: string, agentIdInput: unknown): Promise<Heartbeat> {
      const agentId = requireAgentId(agentIdInput);
      const row = await db.withUser(userId, (trx) => heartbeatRepo.get(trx, agentId));
      if (!row) return { frequency: LIMITS.heartbeatDefaultFrequency, enabled: true, lastHeartbeat: null, nextHeartbeat: null };
      return {
        frequency: row.frequency,
        enabled: row.enabled,
        lastHeartbeat: iso(row.last_heartbeat),
        nextHeartbeat: iso(row.next_heartbeat),
      };
    },

    /**
     * §4.12 POST: `frequency` and `enabled` take their defaults when omitted (`3h`, true), as the
     * specification states, also on an update. lastHeartbeat is the save time and nextHeartbeat
     * the save time plus the frequency.
     */
    async save(userId: string, input: { agentId?: unknown; frequency?: unknown; enabled?: boolean | undefined }): Promise<SavedHeartbeat> {
      const agentId = requireAgentId(input.agentId);
      const frequency = input.frequency === undefined ? LIMITS.heartbeatDefaultFrequency : input.frequency;
      const ms = typeof frequency === 'string' ? parseFrequency(frequency) : null;
      if (ms === null || typeof frequency !== 'string') throw badRequest(FREQUENCY_ERROR);
      const at = now();
      const row = await db.withUser(userId, async (trx) => {
        if (!(await heartbeatRepo.ownsAgent(trx, userId, agentId))) throw notFound('Agent not found');
        return heartbeatRepo.upsert(trx, {
          userId,
          agentId,
          frequency,
          enabled: input.enabled ?? true,
          lastHeartbeat: at,
          nextHeartbeat: new Date(at.getTime() + ms),
          lastUpdated: at,
        });
      });
      return {
        agentId: row.agent_id,
        frequency: row.frequency,
        enabled: row.enabled,
        lastHeartbeat: iso(row.last_heartbeat),
        nextHeartbeat: iso(row.next_heartbeat),
        lastUpdated: row.last_updated.toISOString(),
      };
    },

    /** §4.12 DELETE: removes the user's settings for the agent (idempotent; defaults apply again). */
    async remove(userId: string, agentIdInput: unknown): Promise<void> {
      const agentId = requireAgentId(agentIdInput);
      await db.withUser(userId, (trx) => heartbeatRepo.remove(trx, agentId));
    },

    /**
     * The worker's claim (owner connection: scheduling is system work across users): up to `limit`
     * enabled heartbeats that are due and not leased (or whose lease ran out), leased to `holder`.
     */
    claimDue(holder: string, leaseMs: number, limit: number): Promise<DueHeartbeat[]> {
      return heartbeatScheduleRepo.claimDue(db.kysely, holder, leaseMs, limit);
    },

    /**
     * Records a run `holder` still leases (false, nothing written, when it lost the lease): the
     * agent's answer, or a run that failed; the next heartbeat is due a frequency after the
     * scheduled time. A heartbeat given back by a stopping worker is due again at once.
     */
    finish(holder: string, h: DueHeartbeat, outcome: JobOutcome<HeartbeatRun>): Promise<boolean> {
      if (outcome.status === 'released') return heartbeatScheduleRepo.release(db.kysely, holder, h);
      const run: HeartbeatRun = outcome.status === 'succeeded' ? outcome.result : { status: 'failed', error: outcome.error, ran: false };
      return heartbeatScheduleRepo.finish(db.kysely, holder, h, { ...run, frequencyMs: frequencyMs(h.frequency) });
    },
  };
}

export type HeartbeatService = ReturnType<typeof createHeartbeatService>;
