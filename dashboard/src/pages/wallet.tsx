/**
 * Wallet (§4.4, §4.8, §4.18): your session wallet, its balance (card top-ups and admin credits,
 * minus paid gateway calls) and journal, its stablecoin balances, card top-ups (only with a card
 * processor; `?top_up=success|cancelled` after the processor's checkout) and payment sessions. A
 * payment session id is a bearer secret: shown once after opening, kept only in this page's memory.
 */

import { type FormEvent, useState } from 'react';
import { MICROS_PER_USD, microsToUsd } from '../../../src/lib/money.ts';
import { PLUGIN_PRICES } from '../../../src/lib/prices.ts';
import { api, call } from '../api/client.ts';
import { useFeatures } from '../features.ts';
import { useLocation } from '../router.ts';
import { SpendAlert } from '../spend-alert.tsx';
import {
  Badge,
  Button,
  type Column,
  CopyButton,
  DataTable,
  Empty,
  ErrorText,
  Field,
  formatDate,
  Notice,
  Section,
  Spinner,
  TextField,
  useAction,
  useData,
} from '../ui.tsx';

/** What one agent call costs through the gateway (§4.8), as the gateway charges it: "0.05". */
const AGENT_CALL_USD = microsToUsd(PLUGIN_PRICES.agent);

/** §4.4 top-up amounts in cents, and how many agent calls each buys at the gateway's price. */
export const TOP_UP_AMOUNTS = [500, 1000, 2500, 5000].map((cents) => ({
  cents,
  calls: Math.floor((cents * (MICROS_PER_USD / 100)) / PLUGIN_PRICES.agent),
}));

export function validateDeposit(s: string): string | undefined {
  const v = s.trim();
  if (!/^\d{1,9}(\.\d{1,6})?$/.test(v)) return 'Enter an amount in USD with at most 6 decimals, e.g. 1.50.';
  if (Number(v) <= 0) return 'The deposit must be more than zero.';
  return undefined;
}

export function WalletPage() {
  const { query } = useLocation();
  const wallet = useData(() => call(api.GET('/api/wallet')));
  const create = useAction();
  const topUp = query.get('top_up');
  const w = wallet.data;
  const address = w && 'address' in w && typeof w.address === 'string' && 'hasWallet' in w ? w.address : null;
  const features = useFeatures();
  // what this server cannot do is said once, instead of sections whose buttons would fail
  const off = features
    ? [!features.chainBalances && 'on-chain balances', !features.cardPayments && 'card top-ups'].filter((x): x is string => !!x)
    : [];

  return (
    <>
      {topUp === 'success' && (
        <Notice kind="success">Thank you: your top-up is paid. The balance updates as soon as the card processor confirms it.</Notice>
      )}
      {topUp === 'cancelled' && <Notice kind="warning">The top-up was cancelled; nothing was charged.</Notice>}
      <Section title="Session wallet">
        {wallet.loading && !w ? <Spinner /> : null}
        <ErrorText error={!w ? wallet.error : null} />
        {w && 'agenticWallet' in w && (
          <>
            <p>Custodial wallets are provided by this server's wallet provider ({w.agenticWallet.status}).</p>
            <p className="muted">{w.instructions}</p>
            <CustodialWallet />
          </>
        )}
        {w && 'hasWallet' in w && !w.hasWallet && (
          <>
            <Empty>You have no wallet yet. The platform can create one for you; its key is stored encrypted and never shown.</Empty>
            <Button
              kind="primary"
              busy={create.busy}
              onClick={async () => {
                if (await create.run(() => call(api.POST('/api/wallet', { body: { action: 'create' } })))) await wallet.reload();
              }}
            >
              Create wallet
            </Button>
            <ErrorText error={create.error} />
          </>
        )}
        {address && w && 'balance' in w && (
          <>
            <dl className="stats">
              <div>
                <dt>Balance</dt>
                <dd className="big">${w.balance}</dd>
              </div>
            </dl>
            <p className="muted">
              {features?.modelBilling
                ? `Your balance pays for your agents' model calls (at each model's price) and for gateway calls: $${AGENT_CALL_USD} per agent call.`
                : `Your balance pays for gateway calls (POST /api/v1/gateway with your session or an API key): $${AGENT_CALL_USD} per agent call.`}
            </p>
          </>
        )}
        {address && (
          <p>
            Address <code className="address">{address}</code> <CopyButton text={address} label="Copy address" />
            <br />
            <span className="muted">Network {'network' in w! ? w.network : ''}</span>
          </p>
        )}
        {address && off.length > 0 && <p className="muted">This server is not set up for {off.join(' or ')}.</p>}
        {address && features && !features.cardPayments && (
          <p className="muted">To add to your balance, ask an admin of this server for a credit.</p>
        )}
      </Section>
      {address && <SpendAlert />}
      {address && <Journal address={address} />}
      {address && features?.chainBalances && <Balances address={address} />}
      {address && features?.cardPayments && <TopUp address={address} />}
      {address && <PaymentSessions address={address} />}
    </>
  );
}

type JournalRow = { id: number; amountUsd: string; balanceAfterUsd: string; description: string; note: string | null; createdAt: string };

const JOURNAL_PAGE = 20;
const journalColumns: Column<JournalRow>[] = [
  { header: 'Date', cell: (r) => formatDate(r.createdAt) },
  {
    header: 'Description',
    cell: (r) => (
      <>
        {r.description}
        {r.note && <span className="muted"> · {r.note}</span>}
      </>
    ),
  },
  { header: 'Amount', numeric: true, cell: (r) => (r.amountUsd.startsWith('-') ? `−$${r.amountUsd.slice(1)}` : `+$${r.amountUsd}`) },
  { header: 'Balance after', numeric: true, cell: (r) => `$${r.balanceAfterUsd}` },
];

/** The wallet's credits and debits, newest first (GET /api/wallet/journal), with older pages on demand. */
function Journal({ address }: { address: string }) {
  const first = useData(() => call(api.GET('/api/wallet/journal', { params: { query: { limit: JOURNAL_PAGE } } })), [address]);
  const [older, setOlder] = useState<{ rows: JournalRow[]; nextBefore: number | null } | null>(null);
  const more = useAction();
  const rows = [...(first.data?.entries ?? []), ...(older?.rows ?? [])];
  const nextBefore = older ? older.nextBefore : (first.data?.nextBefore ?? null);
  return (
    <Section title="Journal">
      {first.loading && !first.data ? <Spinner /> : null}
      <ErrorText error={!first.data ? first.error : null} />
      {first.data && rows.length === 0 && <Empty>No credits or debits yet.</Empty>}
      {rows.length > 0 && <DataTable caption="Credits and debits" columns={journalColumns} rows={rows} rowKey={(r) => String(r.id)} />}
      {nextBefore !== null && (
        <Button
          busy={more.busy}
          onClick={() =>
            more.run(async () => {
              const page = await call(api.GET('/api/wallet/journal', { params: { query: { limit: JOURNAL_PAGE, before: nextBefore } } }));
              setOlder({ rows: [...(older?.rows ?? []), ...page.entries], nextBefore: page.nextBefore });
            })
          }
        >
          Show older
        </Button>
      )}
      <ErrorText error={more.error} />
    </Section>
  );
}

function Balances({ address }: { address: string }) {
  const b = useData(() => call(api.GET('/api/wallet', { params: { query: { address } } })), [address]);
  const data = b.data && 'totalUsd' in b.data ? b.data : null;
  return (
    <Section title="Stablecoin balances">
      {b.loading && !b.data ? <Spinner label="Reading balances from the chain…" /> : null}
      {b.error && !data ? <Notice kind="warning">Balances are not available right now ({(b.error as Error).message}).</Notice> : null}
      {data && (
        <>
          <p className="big">${data.totalUsd}</p>
          <p className="muted">
            {data.chain} (chain {data.chainId}
            {data.testnet ? ', testnet' : ''})
          </p>
          {data.allTokens.length === 0 ? (
            <Empty>No stablecoins in this wallet yet.</Empty>
          ) : (
            <ul className="list">
              {data.allTokens.map((t) => (
                <li key={t.address} className="list-item">
                  <span>
                    {t.name} ({t.symbol})
                  </span>
                  <span>{t.balance}</span>
                </li>
              ))}
            </ul>
          )}
        </>
      )}
    </Section>
  );
}

function TopUp({ address }: { address: string }) {
  const [amount, setAmount] = useState<number>(1000);
  const action = useAction();
  return (
    <Section title="Top up by card">
      <p className="muted">
        Adds to this wallet's balance for paid gateway calls: ${(TOP_UP_AMOUNTS[0]!.cents / 100).toFixed(0)} buys {TOP_UP_AMOUNTS[0]!.calls}{' '}
        agent calls at ${AGENT_CALL_USD}.
      </p>
      <div className="row">
        <Field label="Amount">
          {({ id }) => (
            <select id={id} value={amount} onChange={(e) => setAmount(Number(e.target.value))}>
              {TOP_UP_AMOUNTS.map((a) => (
                <option key={a.cents} value={a.cents}>
                  ${(a.cents / 100).toFixed(2)} — {a.calls} agent calls
                </option>
              ))}
            </select>
          )}
        </Field>
        <Button
          kind="primary"
          busy={action.busy}
          onClick={() =>
            action.run(async () => {
              const res = await call(api.GET('/api/wallet/top-up', { params: { query: { amount: String(amount), address } } }));
              window.location.assign(res.url);
            })
          }
        >
          Continue to payment
        </Button>
      </div>
      <ErrorText error={action.error} />
    </Section>
  );
}

type SessionView = { status: string; deposit: string; remaining: string; debits: number; expiresAt: string };

function PaymentSessions({ address }: { address: string }) {
  const [deposit, setDeposit] = useState('1.00');
  const [depositError, setDepositError] = useState<string>();
  // a signed-in open always answers with the bearer id (only wallet-signed opens do not: docs/payments.md)
  const [opened, setOpened] = useState<{ sessionId: string } | null>(null);
  const [lookupId, setLookupId] = useState('');
  const [found, setFound] = useState<SessionView | null>(null);
  const [returned, setReturned] = useState<string>();
  const open = useAction();
  const lookup = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const err = validateDeposit(deposit);
    setDepositError(err);
    if (err) return;
    await open.run(async () => {
      const { sessionId } = await call(api.POST('/api/wallet/sessions', { body: { address, deposit: deposit.trim() } }));
      setOpened(sessionId ? { sessionId } : null);
    });
  };
  const withId = (id: string) => ({ params: { header: { 'x-session-id': id.trim() } } });
  return (
    <Section title="Payment sessions">
      <p className="muted">
        A session holds a deposit from your balance; the gateway debits it per call and the remainder returns when you close it.
      </p>
      <form className="inline-form" onSubmit={submit} noValidate>
        <TextField label="Deposit (USD)" inputMode="decimal" value={deposit} onChange={setDeposit} error={depositError} />
        <Button type="submit" kind="primary" busy={open.busy}>
          Open session
        </Button>
      </form>
      <ErrorText error={open.error} />
      {opened && (
        <div className="secret" role="status">
          <p>
            <strong>Copy the session id now.</strong> It pays for calls (send it as <code>X-Session-Id</code>) and is shown only this once.
          </p>
          <code className="secret-value">{opened.sessionId}</code>
          <div className="row">
            <CopyButton text={opened.sessionId} />
            <Button onClick={() => setOpened(null)}>I have copied it</Button>
          </div>
        </div>
      )}
      <h3>Check or close a session</h3>
      <div className="inline-form">
        <Field label="Session id">
          {({ id }) => <input id={id} value={lookupId} onChange={(e) => setLookupId(e.target.value)} autoComplete="off" />}
        </Field>
        <Button
          disabled={!lookupId.trim()}
          busy={lookup.busy}
          onClick={() =>
            lookup.run(async () => {
              setReturned(undefined);
              setFound(await call(api.GET('/api/wallet/sessions', withId(lookupId))));
            })
          }
        >
          Check
        </Button>
        <Button
          kind="danger"
          disabled={!lookupId.trim()}
          busy={lookup.busy}
          onClick={() =>
            lookup.run(async () => {
              const res = await call(api.DELETE('/api/wallet/sessions', withId(lookupId)));
              setFound(res);
              setReturned(res.returned);
            })
          }
        >
          Close
        </Button>
      </div>
      <ErrorText error={lookup.error} />
      {found && (
        <p>
          <Badge value={found.status} /> deposit ${found.deposit} · remaining ${found.remaining} · {found.debits} debits · expires{' '}
          {formatDate(found.expiresAt)}
          {returned !== undefined && <> · ${returned} returned to your balance</>}
        </p>
      )}
    </Section>
  );
}

function CustodialWallet() {
  const [result, setResult] = useState<{ walletAddress: string; networks: string[] } | null>(null);
  const action = useAction();
  return (
    <>
      <Button
        kind="primary"
        busy={action.busy}
        onClick={() => action.run(async () => setResult(await call(api.POST('/api/wallet/create', { body: {} }))))}
      >
        Create custodial wallet
      </Button>
      <ErrorText error={action.error} />
      {result && (
        <p>
          Created <code className="address">{result.walletAddress}</code> on {result.networks.join(', ')}.
        </p>
      )}
    </>
  );
}
