/**
 * A spend alert's form (docs/payments.md "Spend alerts"): the threshold, an optional webhook, Save
 * and Remove, and whether it fired. The Wallet page sets the balance alert (PUT /api/alerts/balance),
 * an agent's Usage tab its spend alert (PUT /api/agents/:id/alert); both read GET /api/alerts.
 */
import { type FormEvent, useEffect, useState } from 'react';
import { api, call } from './api/client.ts';
import { Button, ErrorText, Field, formatUsd, Notice, Section, useAction, useData } from './ui.tsx';

const THRESHOLD_MAX = 100_000;

export function SpendAlert({ agentId }: { agentId?: string }) {
  const list = useData(async () => call(api.GET('/api/alerts')), []);
  const mine = list.data?.alerts.find((a) => (agentId ? a.kind === 'budget' && a.agentId === agentId : a.kind === 'balance'));
  const [threshold, setThreshold] = useState('');
  const [webhook, setWebhook] = useState('');
  const [fieldError, setFieldError] = useState<string>();
  const [done, setDone] = useState<string>();
  const save = useAction();
  // what is saved (here or elsewhere) shows in the form once the list is read
  const savedThreshold = mine ? String(mine.thresholdUsd) : '';
  const savedWebhook = mine?.webhookUrl ?? '';
  useEffect(() => {
    setThreshold(savedThreshold);
    setWebhook(savedWebhook);
  }, [savedThreshold, savedWebhook]);

  const put = async (thresholdUsd: number | null, message: string) => {
    setDone(undefined);
    const body = { thresholdUsd, webhookUrl: webhook.trim() || null };
    const ok = await save.run(() =>
      call(
        agentId ? api.PUT('/api/agents/{id}/alert', { params: { path: { id: agentId } }, body }) : api.PUT('/api/alerts/balance', { body }),
      ),
    );
    if (ok) {
      setFieldError(undefined);
      await list.reload();
      setDone(message);
    }
  };
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const n = Number(threshold.trim());
    const err =
      threshold.trim() === '' || !Number.isFinite(n) || n <= 0 || n > THRESHOLD_MAX
        ? `Enter an amount greater than 0 and at most ${THRESHOLD_MAX.toLocaleString()} (USD), or use Remove.`
        : undefined;
    setFieldError(err);
    if (!err) await put(n, 'Alert saved.');
  };

  const what = agentId ? "this agent's model spend this month reaches" : 'your balance falls below';
  return (
    <Section title={agentId ? 'Spend alert' : 'Balance alert'}>
      {mine?.state === 'fired' && (
        <Notice kind="warning">
          {agentId
            ? `This agent reached ${formatUsd(mine.firedValueUsd ?? 0)} this month, past your alert of ${formatUsd(mine.thresholdUsd)}.`
            : `Your balance fell to ${formatUsd(mine.firedValueUsd ?? 0)}, below your alert of ${formatUsd(mine.thresholdUsd)}.`}{' '}
          You were told{mine.firedAt ? ` on ${new Date(mine.firedAt).toLocaleString()}` : ''}.
        </Notice>
      )}
      <p className="muted">
        You are told once when {what} the amount: by email (when this server sends mail) and to the webhook, if you give one.
      </p>
      <form className="inline-form" onSubmit={submit} noValidate>
        <Field label="Alert at (USD)" error={fieldError}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              type="number"
              inputMode="decimal"
              min="0"
              max={THRESHOLD_MAX}
              step="any"
              value={threshold}
              onChange={(e) => setThreshold(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
            />
          )}
        </Field>
        <Field label="Webhook (optional)">
          {({ id, describedBy }) => (
            <input
              id={id}
              type="url"
              value={webhook}
              placeholder="https://"
              onChange={(e) => setWebhook(e.target.value)}
              aria-describedby={describedBy}
            />
          )}
        </Field>
        <Button type="submit" kind="primary" busy={save.busy}>
          Save alert
        </Button>
        {mine && (
          <Button onClick={() => put(null, 'Alert removed.')} busy={save.busy}>
            Remove
          </Button>
        )}
      </form>
      <ErrorText error={save.error ?? list.error} />
      {done && <Notice kind="success">{done}</Notice>}
    </Section>
  );
}
