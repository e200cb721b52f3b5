/**
 * Spend alerts (docs/payments.md "Spend alerts"): a user sets a threshold on their balance (tell me
 * when it falls below) and on each agent's monthly spend (tell me when it reaches); the crossing is
 * told once, by email when SMTP is configured and to the user's webhook when they gave one, and the
 * dashboard shows it (the alert reads `fired`). A balance alert arms again once the balance is back
 * at or above its threshold, a budget alert at the next UTC month. The worker (src/workers/
 * spend-alerts.ts) claims crossed alerts from PostgreSQL like every job queue, so a crossing is
 * told by one replica, at least once (a delivery that fails is retried).
 */
import type { Db } from '../../db/client.ts';
import { badRequest, notFound } from '../../lib/errors.ts';
import type { JobOutcome } from '../../lib/jobs.ts';
import { checkWebhookUrl, createGuardedDispatcher, WebhookAddressError } from '../../lib/webhook-guard.ts';
import { type DueAlert, spendAlertsRepo } from './spend-alerts.repo.ts';

/** The highest threshold (USD), as the column's CHECK. */
export const ALERT_THRESHOLD_MAX_USD = 100_000;
/** How long one webhook delivery may take (ms). */
const WEBHOOK_TIMEOUT_MS = 5_000;

export type SpendAlert = {
  kind: 'balance' | 'budget';
  agentId: string | null;
  thresholdUsd: number;
  webhookUrl: string | null;
  /** armed: waiting for a crossing; fired: told (at firedAt, the value then) */
  state: 'armed' | 'fired';
  firedAt: string | null;
  firedValueUsd: number | null;
};

export type AlertSetting = { thresholdUsd: number | null; webhookUrl?: string | null | undefined };

/** $1.50, or for amounts under a cent the digits that matter. */
const usd = (n: number) => `$${n >= 0.01 || n === 0 ? n.toFixed(2) : n.toPrecision(2)}`;

export function createSpendAlerts(deps: {
  db: Pick<Db, 'withUser' | 'kysely'>;
  /** sends one email (SMTP configured); undefined: alerts go to webhooks and the dashboard only */
  mail?: ((message: { to: string; subject: string; text: string }) => Promise<void>) | undefined;
  /** tests and closed networks only: webhooks on private addresses (UNDERGROUND_ALLOW_PRIVATE_WEBHOOKS) */
  allowPrivateWebhooks: boolean;
  /** where the dashboard is (links in the messages) */
  publicUrl: string;
}) {
  const { db } = deps;
  const dispatcher = createGuardedDispatcher(deps.allowPrivateWebhooks, WEBHOOK_TIMEOUT_MS);

  const checkSetting = async (s: AlertSetting) => {
    if (s.thresholdUsd !== null && (!(s.thresholdUsd > 0) || s.thresholdUsd > ALERT_THRESHOLD_MAX_USD))
      throw badRequest(`thresholdUsd must be more than 0 and at most ${ALERT_THRESHOLD_MAX_USD} (USD), or null to remove the alert`);
    if (s.webhookUrl) {
      try {
        await checkWebhookUrl(s.webhookUrl, deps.allowPrivateWebhooks);
      } catch (err) {
        if (err instanceof WebhookAddressError) throw badRequest(`webhookUrl: ${err.message}`);
        throw err;
      }
    }
  };

  const message = (a: DueAlert) => {
    const value = Number(a.value_usd);
    const threshold = Number(a.threshold_usd);
    const base = deps.publicUrl.replace(/\/+$/, '');
    return a.kind === 'balance'
      ? {
          subject: `Your balance is below ${usd(threshold)}`,
          text:
            `Your balance is ${usd(value)}, below the alert threshold of ${usd(threshold)} you set.\n` +
            `Model and plugin calls stop when it cannot cover them. Add credit: ${base}/dashboard/wallet\n`,
        }
      : {
          subject: `Agent ${a.agent_name ?? a.agent_id} reached ${usd(threshold)} this month`,
          text:
            `Agent ${a.agent_name ?? a.agent_id} has spent ${usd(value)} on models this month, reaching the alert threshold of ` +
            `${usd(threshold)} you set.\nIts usage and budget: ${base}/dashboard/agents/${encodeURIComponent(a.agent_id ?? '')}\n`,
        };
  };

  return {
    async list(userId: string): Promise<SpendAlert[]> {
      const rows = await db.withUser(userId, (trx) => spendAlertsRepo.list(trx));
      return rows.map((r) => ({
        kind: r.kind,
        agentId: r.agent_id,
        thresholdUsd: Number(r.threshold_usd),
        webhookUrl: r.webhook_url,
        state: r.state === 'fired' ? 'fired' : 'armed',
        firedAt: r.fired_at ? r.fired_at.toISOString() : null,
        firedValueUsd: r.fired_value_usd === null ? null : Math.round(Number(r.fired_value_usd) * 1e6) / 1e6,
      }));
    },

    /** Sets (a threshold) or removes (null) the user's balance alert, or the budget alert of one of their agents (404 otherwise). */
    async set(userId: string, target: { kind: 'balance' } | { kind: 'budget'; agentId: string }, setting: AlertSetting) {
      await checkSetting(setting);
      const agentId = target.kind === 'budget' ? target.agentId : null;
      await db.withUser(userId, async (trx) => {
        if (agentId && !(await spendAlertsRepo.ownedAgent(trx, agentId))) throw notFound('Agent not found');
        if (setting.thresholdUsd === null) await spendAlertsRepo.remove(trx, target.kind, agentId);
        else
          await spendAlertsRepo.upsert(trx, {
            userId,
            kind: target.kind,
            agentId,
            thresholdUsd: setting.thresholdUsd,
            webhookUrl: setting.webhookUrl ?? null,
          });
      });
      return this.list(userId);
    },

    /** The worker's claim: armed alerts whose value has crossed, leased to `holder`. */
    claimDue: (holder: string, leaseMs: number, limit: number) => spendAlertsRepo.claim(db.kysely, holder, leaseMs, limit),

    /** Tells one crossed alert: the email (SMTP configured) and the webhook (when set); throws when a delivery fails. */
    async deliver(a: DueAlert, signal: AbortSignal): Promise<void> {
      const m = message(a);
      if (deps.mail) await deps.mail({ to: a.email, subject: m.subject, text: m.text });
      if (a.webhook_url) {
        const res = await fetch(a.webhook_url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            type: a.kind === 'balance' ? 'balance_below_threshold' : 'agent_spend_reached_threshold',
            agentId: a.agent_id,
            thresholdUsd: Number(a.threshold_usd),
            valueUsd: Number(a.value_usd),
            message: m.text.split('\n')[0],
            at: new Date().toISOString(),
          }),
          signal,
          // only global unicast addresses, checked at connection time (src/lib/webhook-guard.ts)
          dispatcher: await dispatcher.get(),
        } as RequestInit);
        await res.body?.cancel();
        if (!res.ok) throw new Error(`the webhook answered ${res.status}`);
      }
    },

    async finish(a: DueAlert, outcome: JobOutcome<void>, holder: string): Promise<boolean> {
      if (outcome.status === 'succeeded') return spendAlertsRepo.finish(db.kysely, a.id, holder, { told: true, valueUsd: a.value_usd });
      const retryInMs = outcome.status === 'retry' ? outcome.retryInMs : outcome.status === 'released' ? 0 : 60 * 60_000;
      const error = outcome.status === 'released' ? 'released' : outcome.error;
      return spendAlertsRepo.finish(db.kysely, a.id, holder, { told: false, retryInMs, error });
    },
  };
}

export type SpendAlerts = ReturnType<typeof createSpendAlerts>;
