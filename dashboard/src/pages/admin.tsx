/**
 * For admins (docs/admin.md): server health, and every user with their plan and admin right, and a
 * credit to their wallet (money without a card processor), and the models' prices.
 */
import { type FormEvent, useEffect, useRef, useState } from 'react';
import { api, call } from '../api/client.ts';
import { useSession } from '../session.tsx';
import {
  Badge,
  Button,
  type Column,
  CopyButton,
  DataTable,
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
import { ModelPrices } from './admin-prices.tsx';
import { PLANS } from './settings.tsx';

const PAGE = 50;
type Plan = (typeof PLANS)[number]['value'];
type AdminUser = { id: string; email: string; name: string; plan: Plan; subscriptionStatus: string; isAdmin: boolean; createdAt: string };

export function AdminPage() {
  const { user } = useSession();
  const [offset, setOffset] = useState(0);
  const health = useData(() => call(api.GET('/api/admin/health')), [], { pollMs: 10000 });
  const users = useData(() => call(api.GET('/api/admin/users', { params: { query: { limit: PAGE, offset } } })), [offset]);
  const change = useAction();
  // the user whose wallet the credit form is open for
  const [crediting, setCrediting] = useState<AdminUser | null>(null);
  // the user a password reset link was made for, and the link
  const [resetFor, setResetFor] = useState<AdminUser | null>(null);
  if (!user?.isAdmin) return <ErrorText error={new Error('This page is for admins.')} />;
  const h = health.data;
  const update = (id: string, body: { plan?: Plan; isAdmin?: boolean }) =>
    change.run(async () => {
      await call(api.PATCH('/api/admin/users/{id}', { params: { path: { id } }, body }));
      await users.reload();
    });
  const columns: Column<AdminUser>[] = [
    { header: 'Email', cell: (u) => u.email },
    { header: 'Name', cell: (u) => u.name },
    {
      header: 'Plan',
      cell: (u) => (
        <>
          <label className="sr-only" htmlFor={`plan-${u.id}`}>
            Plan of {u.email}
          </label>
          <select
            id={`plan-${u.id}`}
            value={u.plan}
            disabled={change.busy}
            onChange={(e) => void update(u.id, { plan: e.target.value as Plan })}
          >
            {PLANS.map((p) => (
              <option key={p.value} value={p.value}>
                {p.label}
              </option>
            ))}
          </select>
          {/* an admin's agents run on network whatever plan the account holds (docs/admin.md) */}
          {u.isAdmin && u.plan !== 'network' && <span className="muted"> runs on Network as an admin</span>}
        </>
      ),
    },
    { header: 'Subscription', cell: (u) => <Badge value={u.subscriptionStatus} /> },
    {
      header: 'Admin',
      cell: (u) => (
        <input
          type="checkbox"
          aria-label={`${u.email} is an admin`}
          checked={u.isAdmin}
          disabled={change.busy || u.id === user.id}
          onChange={(e) => void update(u.id, { isAdmin: e.target.checked })}
        />
      ),
    },
    { header: 'Joined', cell: (u) => formatDate(u.createdAt) },
    {
      header: 'Actions',
      hideHeader: true,
      cell: (u) => (
        <>
          <Button label={`Credit ${u.email}`} onClick={() => setCrediting(u)}>
            Credit
          </Button>{' '}
          <Button label={`Password reset link for ${u.email}`} onClick={() => setResetFor(u)}>
            Reset link
          </Button>
        </>
      ),
    },
  ];
  return (
    <>
      <Section title="Server health">
        {health.loading && !h ? <Spinner /> : null}
        <ErrorText error={!h ? health.error : null} />
        {h && (
          <>
            <p>
              <Badge value={h.health} /> <span className="health-reason">{h.reason}</span>
            </p>
            <dl className="stats">
              {h.checks.map((c) => (
                <div key={c.name} title={c.reason}>
                  <dt>Platform {c.name === 'cpu' ? 'CPU (event loop)' : 'memory'}</dt>
                  <dd>
                    {c.percent.toFixed(0)}% <Badge value={c.status} />
                  </dd>
                </div>
              ))}
              <div>
                <dt>Machine CPU (information)</dt>
                <dd>
                  {h.cpu.percent.toFixed(0)}% of {h.cpu.cores} cores
                </dd>
              </div>
              <div>
                <dt>Machine memory (information)</dt>
                <dd>{h.memory.percent.toFixed(0)}%</dd>
              </div>
              <div>
                <dt>Platform process</dt>
                <dd>{(h.process.rssBytes / 1048576).toFixed(0)} MB</dd>
              </div>
              <div>
                <dt>Uptime</dt>
                <dd>{(h.process.uptimeSeconds / 3600).toFixed(1)} h</dd>
              </div>
            </dl>
          </>
        )}
      </Section>
      <Section title="Users">
        {users.loading && !users.data ? <Spinner /> : null}
        <ErrorText error={(!users.data ? users.error : null) ?? change.error} />
        {users.data && (
          <>
            <DataTable caption="Users" columns={columns} rows={users.data.users} rowKey={(u) => u.id} />
            {crediting && <CreditForm key={crediting.id} user={crediting} onClose={() => setCrediting(null)} />}
            {resetFor && <ResetLink key={resetFor.id} user={resetFor} onClose={() => setResetFor(null)} />}
            <div className="row">
              <span className="muted">
                {users.data.total === 0 ? 'No users' : `${offset + 1}–${Math.min(offset + PAGE, users.data.total)} of ${users.data.total}`}
              </span>
              <Button disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>
                Previous
              </Button>
              <Button disabled={offset + PAGE >= users.data.total} onClick={() => setOffset(offset + PAGE)}>
                Next
              </Button>
            </div>
          </>
        )}
      </Section>
      <ModelPrices />
    </>
  );
}

/**
 * A one-time password reset link for a user, made on request (POST /api/admin/users/:id/reset-link)
 * and shown to the admin to pass on: the way to reset a password without email (docs/admin.md).
 */
function ResetLink({ user, onClose }: { user: AdminUser; onClose: () => void }) {
  const [issued, setIssued] = useState<{ link: string; expiresAt: string } | null>(null);
  const action = useAction();
  const ref = useRef<HTMLElement>(null);
  useEffect(() => {
    ref.current?.scrollIntoView({ block: 'center' });
  }, []);
  const make = () =>
    action.run(async () => {
      setIssued(await call(api.POST('/api/admin/users/{id}/reset-link', { params: { path: { id: user.id } } })));
    });
  return (
    <section className="card" aria-labelledby={`reset-${user.id}`} ref={ref}>
      <h3 id={`reset-${user.id}`}>Password reset link for {user.email}</h3>
      <p className="muted">
        The link sets a new password for this account, once, within 24 hours; making a new one stops the earlier ones. Nothing is mailed:
        give it to the user yourself, by a channel you trust (whoever opens it can set the password).
      </p>
      {issued && (
        <Notice kind="success">
          <code className="reset-link address">{issued.link}</code> <CopyButton text={issued.link} label="Copy link" /> Works until{' '}
          {formatDate(issued.expiresAt)}.
        </Notice>
      )}
      <div className="row">
        <Button kind="primary" busy={action.busy} onClick={() => void make()}>
          {issued ? 'Make a new link' : 'Make a link'}
        </Button>
        <Button onClick={onClose}>Close</Button>
      </div>
      <ErrorText error={action.error} />
    </section>
  );
}

/** Whole cents, more than 0, at most 10 000 (the API's rule, docs/admin.md "Credits"). */
function validateCredit(amount: string, note: string): { amount?: string; note?: string } {
  const errors: { amount?: string; note?: string } = {};
  const v = amount.trim();
  if (!/^\d{1,5}(\.\d{1,2})?$/.test(v) || Number(v) <= 0 || Number(v) > 10_000)
    errors.amount = 'Enter an amount in USD, more than 0 and at most 10000, e.g. 5 or 12.50.';
  if (note.length > 500) errors.note = 'The note can be at most 500 characters.';
  return errors;
}

/**
 * Credits one user's wallet through POST /api/admin/users/:id/credit. One Idempotency-Key per
 * opened form: a double click or a retry after a lost answer credits once.
 */
function CreditForm({ user, onClose }: { user: AdminUser; onClose: () => void }) {
  const [amount, setAmount] = useState('');
  const [note, setNote] = useState('');
  const [errors, setErrors] = useState<{ amount?: string; note?: string }>({});
  const [key, setKey] = useState(() => crypto.randomUUID());
  const [done, setDone] = useState<{ amountUsd: string; balanceAfter: string } | null>(null);
  const action = useAction();
  const amountRef = useRef<HTMLInputElement>(null);
  // the form opens below the table: bring it into view and put the cursor in the amount
  useEffect(() => {
    amountRef.current?.scrollIntoView({ block: 'center' });
    amountRef.current?.focus({ preventScroll: true });
  }, []);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const found = validateCredit(amount, note);
    setErrors(found);
    if (found.amount || found.note) return;
    await action.run(async () => {
      const res = await call(
        api.POST('/api/admin/users/{id}/credit', {
          params: { path: { id: user.id }, header: { 'idempotency-key': key } },
          body: { amountUsd: Number(amount.trim()), ...(note.trim() ? { note: note.trim() } : {}) },
        }),
      );
      setDone(res.credit);
      setAmount('');
      setNote('');
      setKey(crypto.randomUUID());
    });
  };
  return (
    <section className="card" aria-labelledby={`credit-${user.id}`}>
      <h3 id={`credit-${user.id}`}>Credit {user.email}</h3>
      <p className="muted">Adds to the user's wallet balance, which pays for their gateway calls. The note is shown in their wallet.</p>
      {done && (
        <Notice kind="success">
          Credited ${done.amountUsd} to {user.email}. Their balance is now ${done.balanceAfter}.
        </Notice>
      )}
      <form className="inline-form" onSubmit={submit} noValidate>
        <TextField
          label="Amount (USD)"
          inputRef={amountRef}
          inputMode="decimal"
          value={amount}
          onChange={setAmount}
          error={errors.amount}
        />
        <Field label="Note" error={errors.note}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              value={note}
              maxLength={500}
              onChange={(e) => setNote(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
            />
          )}
        </Field>
        <Button type="submit" kind="primary" busy={action.busy}>
          Add credit
        </Button>
        <Button onClick={onClose}>Close</Button>
      </form>
      <ErrorText error={action.error} />
    </section>
  );
}
