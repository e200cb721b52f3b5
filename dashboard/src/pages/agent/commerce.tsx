/**
 * The Commerce tab: the agent on the x402 gateway (§4.11, docs/payments.md "x402"). The gateway's
 * state, the agent's fitness and pricing (the §4.11 defaults, score 50 and tier `new`, when the
 * gateway cannot say), the paid endpoints, joining a colony with a wallet address, and a payment
 * from the user's balance (each attempt is audited; the server checks everything again and says
 * why it refuses). Shown only where the server has a gateway (GET /api/features `x402`).
 */
import { type FormEvent, useState } from 'react';
import { api, call } from '../../api/client.ts';
import { Badge, Button, DataTable, Empty, ErrorText, Field, Notice, Section, Spinner, TextField, useAction, useData } from '../../ui.tsx';

/** §8 x402 pay amount: greater than 0, at most 100 */
const MAX_AMOUNT = 100;
const EVM = /^0x[0-9a-fA-F]{40}$/;
const SOLANA = /^[1-9A-HJ-NP-Za-km-z]{32,44}$/;

type Fitness = { score: number; tier: string; details?: Record<string, unknown> };
type Pricing = { tier?: string; pricing?: { rate?: unknown; discount?: unknown } };
type Endpoint = { slug: string; description?: string; price?: string };

const x402 = (body: Record<string, unknown>) => call(api.POST('/api/x402', { body })) as Promise<unknown>;

/** What is wrong with a payment as typed (the server's own texts, §4.11), or undefined. */
export function paymentError(amount: string, recipient: string): { amount?: string; recipient?: string } {
  const errors: { amount?: string; recipient?: string } = {};
  const n = Number(amount);
  if (!amount.trim() || !Number.isFinite(n) || n <= 0) errors.amount = 'Invalid amount';
  else if (n > MAX_AMOUNT) errors.amount = 'Amount exceeds $100 limit. Contact support for higher limits.';
  const r = recipient.trim();
  if (!r) errors.recipient = 'Recipient required';
  else if (!EVM.test(r) && !SOLANA.test(r)) errors.recipient = 'Invalid recipient address';
  return errors;
}

export function Commerce({ agentId }: { agentId: string }) {
  const gateway = useData(() => call(api.GET('/api/x402')), []);
  const standing = useData(async () => {
    // the §4.11 defaults stand in when the gateway has no answer for this agent
    const [fitness, pricing] = await Promise.all([
      x402({ action: 'fitness', agentId }).catch(() => undefined) as Promise<Fitness | undefined>,
      x402({ action: 'pricing', agentId }).catch(() => undefined) as Promise<Pricing | undefined>,
    ]);
    return { fitness: fitness ?? { score: 50, tier: 'new' }, pricing, known: fitness !== undefined };
  }, [agentId]);
  const endpoints = useData(async () => ((await x402({ action: 'endpoints' })) as { endpoints?: Endpoint[] }).endpoints ?? [], []);

  return (
    <>
      <Section title="x402 gateway" actions={gateway.data ? <Badge value={gateway.data.status} /> : null}>
        {gateway.loading && !gateway.data ? <Spinner /> : null}
        <ErrorText error={gateway.error} />
        {standing.data && (
          <dl className="stats">
            <div>
              <dt>Fitness</dt>
              <dd>{standing.data.fitness.score}</dd>
            </div>
            <div>
              <dt>Tier</dt>
              <dd>{standing.data.fitness.tier}</dd>
            </div>
            {standing.data.pricing?.pricing && (
              <div>
                <dt>Rate</dt>
                <dd>{String(standing.data.pricing.pricing.rate ?? '—')}</dd>
              </div>
            )}
          </dl>
        )}
        {standing.data && !standing.data.known && (
          <p className="hint">The gateway has no score for this agent yet: these are the defaults.</p>
        )}
      </Section>
      <Section title="Paid endpoints">
        {endpoints.loading && !endpoints.data ? <Spinner /> : null}
        <ErrorText error={endpoints.error} />
        {endpoints.data &&
          (endpoints.data.length === 0 ? (
            <Empty>The gateway lists no paid endpoints.</Empty>
          ) : (
            <DataTable
              caption="Paid endpoints"
              rows={endpoints.data}
              rowKey={(e) => e.slug}
              columns={[
                { header: 'Endpoint', cell: (e) => <code>{e.slug}</code> },
                { header: 'Description', cell: (e) => e.description ?? '' },
                { header: 'Price', cell: (e) => e.price ?? '' },
              ]}
            />
          ))}
      </Section>
      <JoinColony agentId={agentId} />
      <Pay agentId={agentId} endpoints={endpoints.data ?? []} />
    </>
  );
}

function JoinColony({ agentId }: { agentId: string }) {
  const [wallet, setWallet] = useState('');
  const [fieldError, setFieldError] = useState<string>();
  const [joined, setJoined] = useState(false);
  const action = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const error = EVM.test(wallet.trim()) ? undefined : 'Enter the wallet address the colony pays (0x and 40 hex digits).';
    setFieldError(error);
    if (error) return;
    setJoined(false);
    if (await action.run(() => x402({ action: 'join-colony', agentId, walletAddress: wallet.trim() }))) setJoined(true);
  };
  return (
    <Section title="Join a colony">
      <form onSubmit={submit} noValidate>
        <TextField label="Wallet address" value={wallet} onChange={setWallet} error={fieldError} />
        <ErrorText error={action.error} />
        {joined && <Notice kind="success">The agent joined the colony.</Notice>}
        <Button type="submit" busy={action.busy}>
          Join
        </Button>
      </form>
    </Section>
  );
}

function Pay({ agentId, endpoints }: { agentId: string; endpoints: Endpoint[] }) {
  const [amount, setAmount] = useState('');
  const [recipient, setRecipient] = useState('');
  const [endpoint, setEndpoint] = useState('');
  const [errors, setErrors] = useState<{ amount?: string; recipient?: string }>({});
  const [paid, setPaid] = useState<string>();
  const action = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const found = paymentError(amount, recipient);
    setErrors(found);
    if (found.amount || found.recipient) return;
    setPaid(undefined);
    const body = { action: 'pay', agentId, amount: Number(amount), recipient: recipient.trim(), ...(endpoint ? { endpoint } : {}) };
    if (await action.run(() => x402(body))) setPaid(`Paid ${Number(amount).toFixed(2)} USDC from your balance.`);
  };
  return (
    <Section title="Pay">
      <form onSubmit={submit} noValidate>
        <p className="hint">Paid from your balance (Wallet page), at most ${MAX_AMOUNT} a payment; refunded when the gateway fails.</p>
        <TextField label="Amount (USD)" inputMode="decimal" value={amount} onChange={setAmount} error={errors.amount} />
        <TextField
          label="Recipient"
          hint="An EVM (0x…) or Solana address."
          value={recipient}
          onChange={setRecipient}
          error={errors.recipient}
        />
        {endpoints.length > 0 && (
          <Field label="Endpoint">
            {({ id }) => (
              <select id={id} value={endpoint} onChange={(e) => setEndpoint(e.target.value)}>
                <option value="">None</option>
                {endpoints.map((e) => (
                  <option key={e.slug} value={e.slug}>
                    {e.slug}
                    {e.price ? ` (${e.price})` : ''}
                  </option>
                ))}
              </select>
            )}
          </Field>
        )}
        <ErrorText error={action.error} />
        {paid && <Notice kind="success">{paid}</Notice>}
        <Button type="submit" kind="primary" busy={action.busy}>
          Pay
        </Button>
      </form>
    </Section>
  );
}
