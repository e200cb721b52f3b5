/**
 * The watchdog's side of its worker (src/workers/watchdog.ts), on the owner connection (watching
 * is system work across users): which agents a backend holds and checks (`leases`), and the §6
 * notification outbox the job runner sends (`outbox`). watchdog.service.ts decides what a check
 * does; this file is what the loop around it asks of PostgreSQL.
 */
import type { Db } from '../../db/client.ts';
import type { JobOutcome } from '../../lib/jobs.ts';
import type { NotificationChannelName, WatchdogNotice } from './notifier.client.ts';
import { type DueAgent, watchdogRepo } from './watchdog.repo.ts';

/** A notification claimed for sending: `attempts` counts this attempt. */
export type ClaimedNotification = { id: number; channel: NotificationChannelName; attempts: number; notice: WatchdogNotice };

export function createWatchdogWork(deps: { db: Db; leaseMs: number }) {
  const db = deps.db.kysely;
  return {
    /**
     * Ownership of agents is a lease on their watchdog row: each backend adopts the agents nobody
     * holds, renews its leases while it lives and releases them when it stops, so each agent is
     * watched by exactly one backend at a time.
     */
    leases: {
      /**
       * Brings the watched set in line with the agents table (every `running` agent is watched),
       * then takes over up to `limit` agents nobody holds (new, released, or whose holder died).
       */
      async adopt(holder: string, limit: number): Promise<string[]> {
        await watchdogRepo.sync(db, holder);
        return watchdogRepo.adopt(db, holder, deps.leaseMs, limit);
      },
      /** This holder's agents whose check is due, leaving out `skip` (checks still running). */
      due(holder: string, limit: number, skip: string[]): Promise<DueAgent[]> {
        return watchdogRepo.due(db, holder, limit, skip);
      },
      /** Extends every lease of this holder; how many it still holds. */
      renew: (holder: string) => watchdogRepo.renew(db, holder, deps.leaseMs),
      /** Gives this holder's agents back, so another backend takes them over at once. */
      release: (holder: string) => watchdogRepo.release(db, holder),
    },

    /** §6 notifications, written in the same transaction as the event they tell of. */
    outbox: {
      /**
       * Takes up to `limit` due notifications: each one's next attempt moves `claimMs` ahead, so a
       * sender that dies mid-send leaves it to be taken again later.
       */
      async claim(limit: number, claimMs: number): Promise<ClaimedNotification[]> {
        const rows = await watchdogRepo.claimNotifications(db, limit, claimMs);
        return rows.map((n) => ({
          id: n.id,
          channel: n.channel,
          attempts: n.attempts,
          notice: { ...(n.payload as Omit<WatchdogNotice, 'eventId'>), eventId: Number(n.event_id) },
        }));
      },
      /** Records a send: sent; pending again after a backoff; failed for good; or given back unsent. */
      async finish(n: ClaimedNotification, outcome: JobOutcome<unknown>): Promise<boolean> {
        if (outcome.status === 'succeeded') await watchdogRepo.markNotification(db, n.id, { sent: true });
        else if (outcome.status === 'released') await watchdogRepo.releaseNotification(db, n.id);
        else
          await watchdogRepo.markNotification(db, n.id, {
            sent: false,
            error: outcome.error,
            retryInMs: outcome.status === 'retry' ? outcome.retryInMs : null,
          });
        return true;
      },
    },
  };
}
