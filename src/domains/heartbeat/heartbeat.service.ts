/**
 * Per-agent heartbeat settings (§2 Heartbeat settings, §4.12). A setting is the user's own
 * (keyed by user and agent, under row-level security); saving one requires owning the agent.
 */
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import { heartbeatRepo } from './heartbeat.repo.ts';

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

const iso = (d: Date | null) => (d ? d.toISOString() : null);

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
  };
}

export type HeartbeatService = ReturnType<typeof createHeartbeatService>;
