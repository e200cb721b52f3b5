/**
 * The Underground message bus (§4.15 POST /api/underground/bus/send; §5 "Message signature"). No key
 * or session: the message authenticates itself with its sender's wallet signature (./bus-message.ts).
 * Accepting a message is one transaction: the message under its messageId (a replay is acknowledged
 * and not delivered again), its BOOKING_/AMPLIFY_ step (./bus-steps.ts), and one delivery job per
 * recipient. A sending agent sends at most UNDERGROUND_BUS_RATE_LIMIT messages a minute (counted
 * once its signature is verified, so nobody else can spend an agent's allowance; replays are free),
 * and an account's agents together at most their owner's §2 "A2A messages/day" (counted in
 * PostgreSQL in the transaction that records the message: `dailyCap`).
 *
 * The jobs are delivered by src/workers/underground-bus.ts (the job runner) through `claim`,
 * `deliver` and `finish`: the claim is a committed lease on the job (./bus.repo.ts `claimDue`), the
 * webhook is called with no transaction or pool connection held, for at most
 * LIMITS.undergroundBusDeliveryTimeoutMs, and the outcome is a second short write. Many jobs are
 * delivered at once, at most two per target host, so a webhook that never answers delays only its
 * own deliveries. Retries back off exponentially (BUS_RETRY_BASE_MS doubling, at most
 * BUS_MAX_BACKOFF_MS, BUS_MAX_ATTEMPTS attempts); deliveries go only to global unicast addresses
 * unless the operator allows private ones (./bus-address-guard.ts).
 */
import { randomUUID } from 'node:crypto';
import { LIMITS } from '../../config/limits.ts';
import type { Db, Tx } from '../../db/client.ts';
import { AppError, badRequest, conflict, tooManyRequests, unauthorized } from '../../lib/errors.ts';
import type { JobOutcome } from '../../lib/jobs.ts';
import type { RateLimiter } from '../../lib/rate-limiter.ts';
import { undici } from '../../lib/undici.ts';
import { checkWebhookTarget, checkWebhookUrl, createGuardedDispatcher, WebhookAddressError } from '../../lib/webhook-guard.ts';
import type { AdminFacts } from '../accounts/index.ts';
import { busRepo, type DeliveryRow, type SenderOwner } from './bus.repo.ts';
import { type AgentMessage, BUS_MESSAGE_MAX_AGE_MS, messageHash, recoverSigner } from './bus-message.rules.ts';
import { amplificationRecipients, checkBookingPayload, negotiate } from './bus-steps.service.ts';

/** Delivery attempts before a job is marked failed for good (about an hour of backoff with the defaults). */
export const BUS_MAX_ATTEMPTS = 10;
/** The first retry's delay; attempt n waits BUS_RETRY_BASE_MS * 2^(n-1), at most BUS_MAX_BACKOFF_MS. */
export const BUS_RETRY_BASE_MS = 5_000;
export const BUS_MAX_BACKOFF_MS = 30 * 60_000;

/** A delivery job the worker claimed; `token` fences its outcome (a worker that lost the claim changes nothing). */
export type ClaimedDelivery = { job: DeliveryRow; token: string };

export type BusServiceOptions = {
  db: Db;
  /** UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS */
  allowPrivateWebhooks: boolean;
  now?: () => Date;
  /**
   * The per-sender send limit: `perMinute` messages per sending agent (UNDERGROUND_BUS_RATE_LIMIT),
   * counted by `limiter` (shared by every replica with REDIS_URL). Absent: no limit (a service
   * that only delivers, as the tests' extra workers).
   */
  sendRate?: { limiter: RateLimiter; perMinute: number };
  /**
   * §2 "A2A messages/day": the messages an account's agents may send together in one UTC day, by
   * the owner's plan (`perDay`, default LIMITS.a2aMessagesPerDay; admins by `isAdmin` get network's).
   * Absent: no daily cap (a service that only delivers).
   */
  dailyCap?: { isAdmin: (owner: AdminFacts) => boolean; perDay?: Record<string, number> };
  /** one webhook call, connect to answer (default LIMITS.undergroundBusDeliveryTimeoutMs) */
  deliveryTimeoutMs?: number;
  /** how long a claim holds a job before another worker may take it (default LIMITS.undergroundBusLeaseMs; keep it well above the timeout) */
  leaseMs?: number;
  /** a delivery job was just written (the worker of this process wakes) */
  onEnqueued?: () => void;
};

export type SendResult = { success: true; messageId: string; replayed: boolean; deliveries: number };

export function createBusService(options: BusServiceOptions) {
  const { db } = options;
  const now = options.now ?? (() => new Date());
  const timeoutMs = options.deliveryTimeoutMs ?? LIMITS.undergroundBusDeliveryTimeoutMs;
  const leaseMs = options.leaseMs ?? LIMITS.undergroundBusLeaseMs;
  const dispatcher = createGuardedDispatcher(options.allowPrivateWebhooks, timeoutMs);

  async function authenticate(m: AgentMessage): Promise<void> {
    const wallet = await busRepo.walletAddress(db.kysely, m.from);
    if (!wallet) throw unauthorized('Invalid signature: the sending agent has no Underground wallet');
    const signer = await recoverSigner(m);
    if (!signer || signer.toLowerCase() !== wallet.toLowerCase())
      throw unauthorized("Invalid signature: not signed by the sending agent's wallet");
    if (Math.abs(now().getTime() - m.timestamp) > BUS_MESSAGE_MAX_AGE_MS)
      throw unauthorized(`Message expired: timestamp must be within ${BUS_MESSAGE_MAX_AGE_MS / 1000} seconds of the server's clock`);
  }

  /** The recipients' checked webhook URLs, in order. */
  async function targets(ids: string[]): Promise<{ recipient: string; target: string }[]> {
    const hooks = await busRepo.webhooks(db.kysely, ids);
    const out: { recipient: string; target: string }[] = [];
    for (const id of ids) {
      if (!hooks.has(id)) throw badRequest(`unknown recipient agent: ${id}`);
      const hook = hooks.get(id);
      if (!hook) throw badRequest(`recipient agent ${id} has no webhook (agent config underground.webhookUrl)`);
      try {
        out.push({ recipient: id, target: (await checkWebhookUrl(hook, options.allowPrivateWebhooks)).toString() });
      } catch (err) {
        if (err instanceof WebhookAddressError) throw badRequest(`recipient agent ${id}: ${err.message}`);
        throw err;
      }
    }
    return out;
  }

  /** Counts one message of `from` against its send rate; 429 past it. The handle takes the hit back. */
  async function countSend(from: string) {
    const rate = options.sendRate;
    if (!rate) return undefined;
    const key = `underground-bus:${from}`;
    const d = await rate.limiter.consume(key, rate.perMinute, LIMITS.undergroundBusSendWindowMs);
    if (!d.allowed)
      throw tooManyRequests(`Too many messages: agent ${from} may send at most ${rate.perMinute} per minute on the bus; try again later`, {
        retryAfter: Math.max(1, Math.ceil(d.retryAfterMs / 1000)),
      });
    return { release: () => rate.limiter.release(key) };
  }

  /** The owner's daily cap (§2 Plans): their plan's, network's for an admin, solo's for a plan not in the table. */
  function dailyCapOf(owner: SenderOwner): { plan: string; cap: number } | undefined {
    const rule = options.dailyCap;
    if (!rule) return undefined;
    const perDay = rule.perDay ?? LIMITS.a2aMessagesPerDay;
    const plan = rule.isAdmin(owner) ? 'network' : owner.plan;
    return { plan, cap: perDay[plan] ?? perDay.solo ?? 0 };
  }

  /**
   * Counts a message's `n` recipients against its sender's owner's cap for today (UTC), inside the
   * transaction that records it: a refusal rolls the message back, and a message that is not
   * recorded (a concurrent copy won its messageId) never reaches this. 429 past the cap, with
   * `retryAfter` the seconds to the next UTC midnight.
   */
  async function countDaily(trx: Tx, owner: SenderOwner | undefined, n: number): Promise<void> {
    if (!owner) return;
    const rule = dailyCapOf(owner);
    if (!rule) return;
    const at = now();
    const day = at.toISOString().slice(0, 10);
    if (n <= rule.cap && (await busRepo.addA2A(trx, { userId: owner.user_id, day, n, cap: rule.cap })) !== undefined) return;
    const sent = await busRepo.a2aSent(trx, owner.user_id, day);
    const midnight = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1);
    const retryAfter = Math.max(1, Math.ceil((midnight - at.getTime()) / 1000));
    const counts = n > 1 ? ` This message has ${n} recipients and counts ${n}; ${Math.max(0, rule.cap - sent)} remain today.` : '';
    throw tooManyRequests(
      `Daily agent-to-agent message limit reached: the ${rule.plan} plan allows ${rule.cap} messages a day (UTC) for all of an ` +
        `account's agents, and ${sent} have been sent today.${counts} Try again after midnight UTC, or move to a larger plan.`,
      { retryAfter, limit: rule.cap, sent, plan: rule.plan },
    );
  }

  /** Records a new message with its step and delivery jobs; `replayed` when a concurrent copy won its messageId. */
  async function accept(m: AgentMessage, hash: string, replay: (seen: string | undefined) => SendResult | undefined): Promise<SendResult> {
    // input checks and address resolution before the transaction (no DNS while holding locks)
    const booking = m.action.startsWith('BOOKING_');
    const amplify = m.action.startsWith('AMPLIFY_');
    if (booking) checkBookingPayload(m, now());
    const extra = amplify ? amplificationRecipients(m) : [];
    const recipients = await targets([m.to, ...extra]);
    const owner = options.dailyCap ? await busRepo.senderOwner(db.kysely, m.from) : undefined;
    const result = await db.kysely.transaction().execute(async (trx) => {
      const step = booking
        ? { negotiation: await negotiate(trx, m, now()) }
        : amplify
          ? { amplification: { recipients: extra } }
          : undefined;
      if (!(await busRepo.recordMessage(trx, { messageId: m.messageId, hash, action: m.action, from: m.from, to: m.to, step })))
        return undefined; // a concurrent copy won the messageId; its step stands, this one rolls back
      await busRepo.insertDeliveries(
        trx,
        recipients.map((r) => ({ ...r, messageId: m.messageId, payload: { message: m, ...(step ?? {}) } })),
      );
      // last, so the owner's counter row is locked only for the commit (concurrent senders queue on it)
      await countDaily(trx, owner, recipients.length);
      return { success: true as const, messageId: m.messageId, replayed: false, deliveries: recipients.length };
    });
    if (!result) {
      const again = replay(await busRepo.messageHash(db.kysely, m.messageId));
      if (again) return again;
      throw new AppError('UNEXPECTED', 'Delivery failed');
    }
    options.onEnqueued?.();
    return result;
  }

  /** Why a webhook call failed, in a line for `last_error` and the log. */
  function failure(err: unknown): string {
    if (err instanceof Error && err.name === 'TimeoutError') return `webhook did not answer within ${timeoutMs} ms`;
    if (!(err instanceof Error)) return String(err);
    const cause = err.cause instanceof Error ? err.cause.message : undefined;
    return cause ? `${err.message}: ${cause}` : err.message;
  }

  /**
   * One claimed job's webhook call, with no transaction open; throws why it failed (its outcome is
   * `finish`'s). `stopping` aborts the call (the worker then gives the claim back).
   */
  async function deliver({ job }: ClaimedDelivery, stopping?: AbortSignal): Promise<void> {
    const attempt = job.attempts;
    const timeout = AbortSignal.timeout(timeoutMs);
    let error: string | undefined;
    try {
      // IP literals here; a name is checked by the dispatcher's lookup as it connects
      checkWebhookTarget(job.target, options.allowPrivateWebhooks);
      // undici's own fetch: Node's global fetch may bundle another undici version than the dispatcher's
      const { fetch: fetchWithDispatcher } = await undici();
      const res = await fetchWithDispatcher(job.target, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-underground-message-id': job.message_id,
          'x-underground-attempt': String(attempt),
        },
        body: JSON.stringify(job.payload),
        redirect: 'manual',
        dispatcher: await dispatcher.get(),
        signal: stopping ? AbortSignal.any([stopping, timeout]) : timeout,
      });
      // the answer's body is never read: only the status matters, so its size cannot
      await res.body?.cancel().catch(() => {});
      if (res.status < 200 || res.status >= 300) error = `webhook answered ${res.status}`;
    } catch (err) {
      if (stopping?.aborted && !timeout.aborted) throw err;
      error = failure(err);
    }
    if (error !== undefined) throw new Error(error);
  }

  return {
    async send(m: AgentMessage): Promise<SendResult> {
      await authenticate(m);
      const hash = await messageHash(m);
      const replay = (seen: string | undefined): SendResult | undefined => {
        if (seen === undefined) return undefined;
        if (seen !== hash) throw conflict('messageId already used by another message');
        return { success: true, messageId: m.messageId, replayed: true, deliveries: 0 };
      };
      const early = replay(await busRepo.messageHash(db.kysely, m.messageId));
      if (early) return early;
      if (m.from === m.to) throw badRequest('from and to must be different agents');
      // counted after the signature (nobody else can spend an agent's allowance) and once a replay
      // is ruled out (a recipient re-posting a message it received costs its sender nothing)
      const counted = await countSend(m.from);
      const result = await accept(m, hash, replay);
      if (result.replayed) await counted?.release(); // a concurrent copy won: this one delivers nothing
      return result;
    },

    /**
     * For the worker: commits a claim on the oldest due job whose target host has a free slot (a
     * lease of `leaseMs` under a fresh token, ./bus.repo.ts `claimDue`); none when no job can be claimed.
     */
    async claim(): Promise<ClaimedDelivery[]> {
      const token = randomUUID();
      const job = await busRepo.claimDue(db.kysely, {
        token,
        leaseMs,
        perTargetCap: LIMITS.undergroundBusMaxInFlightPerTarget,
        maxAttempts: BUS_MAX_ATTEMPTS,
      });
      return job ? [{ job, token }] : [];
    },

    deliver,

    /**
     * Records a claimed job's outcome in one short statement fenced by its token (false, nothing
     * written, when the claim was lost): delivered; pending again after a backoff; failed for good;
     * or given back by a stopping worker, due at once with its attempt not counted.
     */
    finish({ job, token }: ClaimedDelivery, outcome: JobOutcome<unknown>): Promise<boolean> {
      switch (outcome.status) {
        case 'succeeded':
          return busRepo.markDelivered(db.kysely, job.id, token);
        case 'retry':
          return busRepo.markFailed(db.kysely, job.id, token, outcome.error, outcome.retryInMs);
        case 'failed':
          return busRepo.markFailed(db.kysely, job.id, token, outcome.error, null);
        case 'released':
          return busRepo.release(db.kysely, job.id, token);
      }
    },

    async close() {
      await dispatcher.close();
    },
  };
}

export type BusService = ReturnType<typeof createBusService>;
