/**
 * API keys (§4.3; docs/payments.md "API keys"): list, create (the key is shown once, with a copy
 * button), change limits, roll, delete. A key may be limited to some agents, given a monthly budget,
 * a rate limit and an expiry; the list shows each key's spend this month, its limits and last use.
 */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { api, call } from '../api/client.ts';
import {
  Button,
  CopyButton,
  DataTable,
  Empty,
  ErrorText,
  Field,
  formatDate,
  formatUsd,
  Notice,
  Section,
  Spinner,
  TextField,
  useAction,
  useData,
} from '../ui.tsx';

type Key = {
  id: string;
  name: string;
  keyPreview: string;
  lastUsed: string | null;
  agentIds: string[] | null;
  monthlyBudgetUsd: number | null;
  monthToDateUsd: number;
  rateLimitPerMinute: number | null;
  expiresAt: string | null;
  expired: boolean;
  previousKeyExpiresAt: string | null;
};
type Agent = { id: string; name: string };

/** The limits as the form holds them (text, as typed). */
type LimitsForm = { allAgents: boolean; agentIds: string[]; budget: string; rate: string; expires: string };
const NO_LIMITS: LimitsForm = { allAgents: true, agentIds: [], budget: '', rate: '', expires: '' };

/** `YYYY-MM-DDTHH:mm` in local time, what a datetime-local input holds. */
const localInput = (iso: string) => {
  const d = new Date(iso);
  return new Date(d.getTime() - d.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
};
const formOf = (k: Key): LimitsForm => ({
  allAgents: k.agentIds === null,
  agentIds: k.agentIds ?? [],
  budget: k.monthlyBudgetUsd === null ? '' : String(k.monthlyBudgetUsd),
  rate: k.rateLimitPerMinute === null ? '' : String(k.rateLimitPerMinute),
  expires: k.expiresAt ? localInput(k.expiresAt) : '',
});

type Limits = { agentIds: string[] | null; monthlyBudgetUsd: number | null; rateLimitPerMinute: number | null; expiresAt: string | null };
type LimitErrors = Partial<Record<'agents' | 'budget' | 'rate' | 'expires', string>>;

/** The form's limits as the API takes them, or what is wrong with each (the same rules the server applies). */
function parseLimits(f: LimitsForm): { limits: Limits } | { errors: LimitErrors } {
  const errors: LimitErrors = {};
  if (!f.allAgents && f.agentIds.length === 0) errors.agents = 'Pick at least one agent, or choose all agents.';
  const budget = f.budget.trim() === '' ? null : Number(f.budget);
  if (budget !== null && !(budget >= 0.000001 && budget <= 100000)) errors.budget = 'A number from 0.000001 to 100000 (USD), or empty.';
  const rate = f.rate.trim() === '' ? null : Number(f.rate);
  if (rate !== null && !(Number.isInteger(rate) && rate >= 1 && rate <= LIMITS.apiKeyRateLimitMax))
    errors.rate = `A whole number from 1 to ${LIMITS.apiKeyRateLimitMax}, or empty.`;
  const expires = f.expires === '' ? null : new Date(f.expires);
  if (expires && !(expires.getTime() > Date.now())) errors.expires = 'Pick a time in the future, or leave it empty.';
  if (Object.keys(errors).length > 0) return { errors };
  return {
    limits: {
      agentIds: f.allAgents ? null : f.agentIds,
      monthlyBudgetUsd: budget,
      rateLimitPerMinute: rate,
      expiresAt: expires ? expires.toISOString() : null,
    },
  };
}

/** The limit fields of the create and change forms. */
function LimitFields(props: { value: LimitsForm; onChange: (f: LimitsForm) => void; errors: LimitErrors; agents: Agent[] | undefined }) {
  const { value: f, onChange, errors } = props;
  const set = (patch: Partial<LimitsForm>) => onChange({ ...f, ...patch });
  return (
    <fieldset className="heartbeat-schedule">
      <legend>Limits (optional)</legend>
      <fieldset className="key-agents">
        <legend>Agents</legend>
        <label className="check">
          <input type="radio" checked={f.allAgents} onChange={() => set({ allAgents: true })} /> All my agents
        </label>
        <label className="check">
          <input type="radio" checked={!f.allAgents} onChange={() => set({ allAgents: false })} /> Only these:
        </label>
        {!f.allAgents &&
          (props.agents && props.agents.length > 0 ? (
            props.agents.map((a) => (
              <label className="check" key={a.id}>
                <input
                  type="checkbox"
                  checked={f.agentIds.includes(a.id)}
                  onChange={(e) => set({ agentIds: e.target.checked ? [...f.agentIds, a.id] : f.agentIds.filter((id) => id !== a.id) })}
                />{' '}
                {a.name}
              </label>
            ))
          ) : (
            <p className="muted">You have no agents yet.</p>
          ))}
        {errors.agents && <small className="field-error">{errors.agents}</small>}
      </fieldset>
      <div className="inline-form">
        <TextField
          label="Monthly budget for model calls (USD)"
          inputMode="decimal"
          value={f.budget}
          onChange={(budget) => set({ budget })}
          error={errors.budget}
        />
        <TextField label="Requests per minute" inputMode="numeric" value={f.rate} onChange={(rate) => set({ rate })} error={errors.rate} />
        <TextField
          label="Expires"
          type="datetime-local"
          value={f.expires}
          onChange={(expires) => set({ expires })}
          error={errors.expires}
        />
      </div>
    </fieldset>
  );
}

/** One key's secret, shown once (after a create or a roll). */
function Secret({ secret, onDone }: { secret: { title: string; key: string; note?: string }; onDone: () => void }) {
  return (
    <div className="secret" role="status">
      <p>
        <strong>{secret.title}</strong> It is shown only this once.
      </p>
      <code className="secret-value" data-testid="new-key">
        {secret.key}
      </code>
      {secret.note && <p>{secret.note}</p>}
      <div className="row">
        <CopyButton text={secret.key} />
        <Button onClick={onDone}>I have copied it</Button>
      </div>
    </div>
  );
}

const agentsCell = (k: Key, agents: Agent[] | undefined) =>
  k.agentIds === null
    ? 'All'
    : k.agentIds.length === 0
      ? 'None (deleted)'
      : k.agentIds.map((id) => agents?.find((a) => a.id === id)?.name ?? id).join(', ');

export function KeysPage() {
  const keys = useData(async () => (await call(api.GET('/api/keys'))).keys as Key[]);
  const agents = useData(async () => (await call(api.GET('/api/agents'))).agents as Agent[]);
  const [name, setName] = useState('');
  const [nameError, setNameError] = useState<string>();
  const [limits, setLimits] = useState<LimitsForm>(NO_LIMITS);
  const [limitErrors, setLimitErrors] = useState<LimitErrors>({});
  // a raw key lives only in this component's state until the page changes: never stored
  const [secret, setSecret] = useState<{ title: string; key: string; note?: string } | null>(null);
  const [editing, setEditing] = useState<{ key: Key; form: LimitsForm; errors: LimitErrors } | null>(null);
  const create = useAction();
  const change = useAction();
  const remove = useAction();
  const roll = useAction();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const n = name.trim();
    const err = !n
      ? 'Give the key a name.'
      : n.length > LIMITS.apiKeyNameMax
        ? `Use at most ${LIMITS.apiKeyNameMax} characters.`
        : undefined;
    setNameError(err);
    const parsed = parseLimits(limits);
    setLimitErrors('errors' in parsed ? parsed.errors : {});
    if (err || 'errors' in parsed) return;
    await create.run(async () => {
      const res = await call(api.POST('/api/keys', { body: { name: n, ...parsed.limits } }));
      setSecret({ title: `Copy your new key “${res.name}” now.`, key: res.key });
      setName('');
      setLimits(NO_LIMITS);
      await keys.reload();
    });
  };

  const save = async (e: FormEvent) => {
    e.preventDefault();
    if (!editing) return;
    const parsed = parseLimits(editing.form);
    if ('errors' in parsed) {
      setEditing({ ...editing, errors: parsed.errors });
      return;
    }
    const ok = await change.run(() => call(api.PATCH('/api/keys/{id}', { params: { path: { id: editing.key.id } }, body: parsed.limits })));
    if (ok) {
      setEditing(null);
      await keys.reload();
    }
  };

  const rollKey = (k: Key) =>
    roll.run(async () => {
      const res = await call(api.POST('/api/keys/{id}/roll', { params: { path: { id: k.id } }, body: {} }));
      setSecret({
        title: `Copy the new secret of “${res.name}” now.`,
        key: res.key,
        note: `The old secret keeps working until ${formatDate(res.previousKeyExpiresAt)}: move your programs to the new one before then.`,
      });
      await keys.reload();
    });

  return (
    <>
      <Section title="Create an API key">
        <p className="muted">
          Keys let programs call the platform as you (Authorization: Bearer sk_…). Give a key to someone else with limits: only some agents,
          a monthly budget for the model calls it causes, a rate limit, an expiry.
        </p>
        <form onSubmit={submit} noValidate>
          <div className="inline-form">
            <Field label="Key name" error={nameError}>
              {({ id, describedBy, invalid }) => (
                <input
                  id={id}
                  value={name}
                  onChange={(e) => setName(e.target.value)}
                  aria-describedby={describedBy}
                  aria-invalid={invalid}
                  placeholder="ci-deploy"
                />
              )}
            </Field>
          </div>
          <LimitFields value={limits} onChange={setLimits} errors={limitErrors} agents={agents.data} />
          <Button type="submit" kind="primary" busy={create.busy}>
            Create key
          </Button>
        </form>
        <ErrorText error={create.error} />
        {secret && <Secret secret={secret} onDone={() => setSecret(null)} />}
      </Section>
      <Section title="Your keys">
        {keys.loading && !keys.data ? (
          <Spinner />
        ) : !keys.data ? (
          <ErrorText error={keys.error} />
        ) : keys.data.length === 0 ? (
          <Empty>No API keys yet.</Empty>
        ) : (
          <DataTable
            caption="Your API keys"
            rows={keys.data}
            rowKey={(k) => k.id}
            columns={[
              { header: 'Name', cell: (k) => k.name },
              { header: 'Key', cell: (k) => <code>{k.keyPreview}…</code> },
              { header: 'Agents', cell: (k) => agentsCell(k, agents.data) },
              {
                header: 'This month',
                numeric: true,
                cell: (k) =>
                  k.monthlyBudgetUsd === null
                    ? formatUsd(k.monthToDateUsd)
                    : `${formatUsd(k.monthToDateUsd)} of ${formatUsd(k.monthlyBudgetUsd)}${k.monthToDateUsd >= k.monthlyBudgetUsd ? ' (used up)' : ''}`,
              },
              { header: 'Rate limit', cell: (k) => (k.rateLimitPerMinute === null ? '—' : `${k.rateLimitPerMinute}/min`) },
              {
                header: 'Expires',
                cell: (k) => (k.expired ? <strong>expired</strong> : k.expiresAt ? formatDate(k.expiresAt) : 'never'),
              },
              { header: 'Last used', cell: (k) => (k.lastUsed ? formatDate(k.lastUsed) : 'never') },
              {
                header: 'Actions',
                hideHeader: true,
                cell: (k) => (
                  <div className="row">
                    <Button label={`Change limits of key ${k.name}`} onClick={() => setEditing({ key: k, form: formOf(k), errors: {} })}>
                      Limits
                    </Button>
                    <Button label={`Roll key ${k.name}`} busy={roll.busy} onClick={() => rollKey(k)}>
                      Roll
                    </Button>
                    <Button
                      kind="danger"
                      label={`Delete key ${k.name}`}
                      busy={remove.busy}
                      onClick={async () => {
                        if (await remove.run(() => call(api.DELETE('/api/keys/{id}', { params: { path: { id: k.id } } }))))
                          await keys.reload();
                      }}
                    >
                      Delete
                    </Button>
                  </div>
                ),
              },
            ]}
          />
        )}
        <ErrorText error={remove.error ?? roll.error} />
        {keys.data && keys.data.length > 0 && (
          <Notice>
            Deleting a key stops it working within seconds on every server. Rolling gives it a new secret; the old one keeps working for 24
            hours.
          </Notice>
        )}
      </Section>
      {editing && (
        <Section title={`Limits of “${editing.key.name}”`}>
          <form onSubmit={save} noValidate>
            <LimitFields
              value={editing.form}
              onChange={(form) => setEditing({ ...editing, form })}
              errors={editing.errors}
              agents={agents.data}
            />
            <div className="row">
              <Button type="submit" kind="primary" busy={change.busy}>
                Save limits
              </Button>
              <Button onClick={() => setEditing(null)}>Cancel</Button>
            </div>
          </form>
          <ErrorText error={change.error} />
        </Section>
      )}
    </>
  );
}
