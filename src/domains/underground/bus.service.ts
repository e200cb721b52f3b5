/**
 * The Underground message bus (§4.15 POST /api/underground/bus/send; §5 "Message signature"). No key
 * or session: the message authenticates itself with its sender's wallet signature (./bus-message.ts).
 * Accepting a message is one transaction: the message under its messageId (a replay is acknowledged
 * and not delivered again), its BOOKING_/AMPLIFY_ step (./bus-steps.ts), and one delivery job per
 * recipient. The jobs are delivered by src/workers/underground-bus.ts through `processNext`, with
 * retries and exponential backoff, only to public addresses unless the operator allows private ones
 * (./bus-address-guard.ts).
 */
// undici's own fetch: Node's global fetch may bundle another undici version than the dispatcher's
import { fetch as fetchWithDispatcher } from 'undici';
import type { Db } from '../../db/client.ts';
import { AppError, badRequest, conflict, unauthorized } from '../../lib/errors.ts';
import { busRepo } from './bus.repo.ts';
import { checkWebhookUrl, createGuardedDispatcher, WebhookAddressError } from './bus-address-guard.ts';
import { type AgentMessage, BUS_MESSAGE_MAX_AGE_MS, messageHash, recoverSigner } from './bus-message.ts';
import { amplificationRecipients, checkBookingPayload, negotiate } from './bus-steps.ts';

/** Delivery attempts before a job is marked failed for good (about an hour of backoff with the defaults). */
export const BUS_MAX_ATTEMPTS = 10;
export const BUS_DELIVERY_TIMEOUT_MS = 10_000;
const MAX_BACKOFF_MS = 30 * 60_000;

export type BusLogger = { warn(obj: object, msg: string): void; info?(obj: object, msg: string): void };

export type BusServiceOptions = {
  db: Db;
  /** UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS */
  allowPrivateWebhooks: boolean;
  now?: () => Date;
  /** first retry delay; attempt n waits retryBaseMs * 2^(n-1), capped at 30 minutes (default 5 s) */
  retryBaseMs?: number;
  deliveryTimeoutMs?: number;
  logger?: BusLogger;
  /** a delivery job was just written (the worker of this process wakes) */
  onEnqueued?: () => void;
};

export type SendResult = { success: true; messageId: string; replayed: boolean; deliveries: number };

export function createBusService(options: BusServiceOptions) {
  const { db } = options;
  const now = options.now ?? (() => new Date());
  const retryBaseMs = options.retryBaseMs ?? 5_000;
  const dispatcher = createGuardedDispatcher(options.allowPrivateWebhooks, options.deliveryTimeoutMs ?? BUS_DELIVERY_TIMEOUT_MS);

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
      // input checks and address resolution before the transaction (no DNS while holding locks)
      const booking = m.action.startsWith('BOOKING_');
      const amplify = m.action.startsWith('AMPLIFY_');
      if (booking) checkBookingPayload(m, now());
      const extra = amplify ? amplificationRecipients(m) : [];
      const recipients = await targets([m.to, ...extra]);
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
        return { success: true as const, messageId: m.messageId, replayed: false, deliveries: recipients.length };
      });
      if (!result) {
        const again = replay(await busRepo.messageHash(db.kysely, m.messageId));
        if (again) return again;
        throw new AppError('UNEXPECTED', 'Delivery failed');
      }
      options.onEnqueued?.();
      return result;
    },

    /** Delivers the oldest due job, if any; false when none was due. One job per transaction, locked FOR UPDATE SKIP LOCKED. */
    async processNext(): Promise<boolean> {
      return db.kysely.transaction().execute(async (trx) => {
        const job = await busRepo.takeDue(trx);
        if (!job) return false;
        const attempt = job.attempts + 1;
        try {
          await checkWebhookUrl(job.target, options.allowPrivateWebhooks);
          const res = await fetchWithDispatcher(job.target, {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              'x-underground-message-id': job.message_id,
              'x-underground-attempt': String(attempt),
            },
            body: JSON.stringify(job.payload),
            redirect: 'manual',
            dispatcher,
          });
          await res.body?.cancel().catch(() => {});
          if (res.status < 200 || res.status >= 300) throw new Error(`webhook answered ${res.status}`);
          await busRepo.markDelivered(trx, job.id);
        } catch (err) {
          const reason = err instanceof Error ? err.message : String(err);
          const retryIn = attempt >= BUS_MAX_ATTEMPTS ? null : Math.min(retryBaseMs * 2 ** (attempt - 1), MAX_BACKOFF_MS);
          options.logger?.warn({ messageId: job.message_id, attempt, reason, retryInMs: retryIn }, 'underground bus delivery failed');
          await busRepo.markFailed(trx, job.id, reason, retryIn);
        }
        return true;
      });
    },

    async close() {
      await dispatcher.close();
    },
  };
}

export type BusService = ReturnType<typeof createBusService>;
