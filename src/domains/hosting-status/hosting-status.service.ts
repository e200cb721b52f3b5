/**
 * Hosting status webhook (§6): turns deployment and status-page payloads into one record,
 * keeps the latest in our database (for the dashboard) and, when configured, in the key-value
 * store under a fixed key with a 7-day TTL (§8).
 */

import type { Config } from '../../config/env.ts';
import { LIMITS } from '../../config/limits.ts';
import type { Db } from '../../db/client.ts';
import { safeEqual } from '../../lib/crypto.ts';
import type { Logger } from '../../lib/logger.ts';
import { hostingStatusRepo } from './hosting-status.repo.ts';
import type { StatusStore } from './status-store.client.ts';

/** The fixed latest-status key of §6. */
export const HOSTING_STATUS_KEY = 'hosting-status:latest';

export type HostingStatusRecord = { status: string; name: string; message: string | null; eventType: string; receivedAt: string };

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
/** Payload strings are bounded so a hostile sender cannot store megabytes in the record. */
const str = (v: unknown, max = 2000): string | null => (typeof v === 'string' && v.length > 0 ? v.slice(0, max) : null);

/**
 * §6 mapping. Precedence when a payload carries several parts: deployment, then incident, then
 * component (a status-page incident notification also carries the affected components).
 */
export function toRecord(payload: Obj, receivedAt: Date): HostingStatusRecord {
  const at = receivedAt.toISOString();
  if (isObj(payload.deployment)) {
    const d = payload.deployment;
    const service = isObj(d.service) ? d.service : {};
    return {
      status: str(d.status) ?? 'unknown',
      name: str(service.name) ?? 'Hosting',
      message: str(d.url),
      eventType: 'deployment',
      receivedAt: at,
    };
  }
  if (isObj(payload.incident)) {
    const i = payload.incident;
    // status-page incident_updates are listed newest first
    const updates = Array.isArray(i.incident_updates) ? i.incident_updates : [];
    const latest = updates.find(isObj);
    return {
      status: str(i.status) ?? 'unknown',
      name: str(i.name) ?? 'Hosting',
      message: latest ? str(latest.body) : null,
      eventType: 'incident',
      receivedAt: at,
    };
  }
  if (isObj(payload.component)) {
    const c = payload.component;
    return { status: str(c.status) ?? 'unknown', name: str(c.name) ?? 'Hosting', message: null, eventType: 'component', receivedAt: at };
  }
  return {
    status: str(payload.status) ?? 'unknown',
    name: str(payload.name) ?? 'Hosting',
    message: str(payload.message),
    eventType: str(payload.type, 200) ?? 'unknown',
    receivedAt: at,
  };
}

export type HostingStatusDeps = {
  db: Db;
  config: Pick<Config, 'HOSTING_WEBHOOK_SECRET'>;
  /** undefined when KV_REST_API_URL / KV_REST_API_TOKEN are unset: the record is returned, not stored there */
  store: StatusStore | undefined;
  logger?: Logger | undefined;
  now?: () => Date;
};

export function createHostingStatusService(deps: HostingStatusDeps) {
  const now = deps.now ?? (() => new Date());
  const secret = deps.config.HOSTING_WEBHOOK_SECRET;

  return {
    /**
     * §6 compares the secret in constant time. §6 also accepts everything when
     * HOSTING_WEBHOOK_SECRET is unset; we do not (anyone could spoof statuses): `not_configured`
     * lets the route answer 503, and the start-up log names the webhook as off.
     */
    authorize(provided: string | undefined): 'ok' | 'unauthorized' | 'not_configured' {
      if (!secret) return 'not_configured';
      return provided !== undefined && safeEqual(provided, secret) ? 'ok' : 'unauthorized';
    },

    async receive(payload: Obj): Promise<HostingStatusRecord> {
      const receivedAt = now();
      const record = toRecord(payload, receivedAt);
      await hostingStatusRepo.saveLatest(deps.db.kysely, { ...record, receivedAt });
      if (deps.store) {
        try {
          await deps.store.set(HOSTING_STATUS_KEY, JSON.stringify(record), LIMITS.hostingStatusTtlSeconds);
        } catch (err) {
          // the database copy is already written; a key-value store outage must not make the
          // hosting platform retry (and re-deliver) an event we have recorded
          deps.logger?.warn({ err: (err as Error).message }, 'hosting status: key-value store write failed');
        }
      }
      return record;
    },

    async latest(): Promise<HostingStatusRecord | null> {
      const row = await hostingStatusRepo.findLatest(deps.db.kysely);
      if (!row) return null;
      return {
        status: row.status,
        name: row.name,
        message: row.message,
        eventType: row.event_type,
        receivedAt: row.received_at.toISOString(),
      };
    },
  };
}

export type HostingStatusService = ReturnType<typeof createHostingStatusService>;
