/** Your agents with live status and watchdog state (polled), and the provisioning form (§4.7). */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { api, call } from '../api/client.ts';
import { navigate } from '../router.ts';
import { Badge, Button, DataTable, Empty, ErrorText, Field, formatDate, Link, Section, Spinner, useAction, useData } from '../ui.tsx';
import { shownStatus } from './agent/types.ts';

/** §4.7's names, offered only when no model can run yet (the platform maps them once a provider is configured) */
export const MODELS = ['claude-opus-4-6', 'gpt-4', 'custom'] as const;
export const TIERS = [
  { value: 'starter', label: 'Starter' },
  { value: 'pro', label: 'Pro' },
  { value: 'enterprise', label: 'Enterprise' },
] as const;

export function validateAgentName(name: string): string | undefined {
  const n = name.trim();
  if (n.length < LIMITS.agentNameMin) return 'Give your agent a name.';
  if (n.length > LIMITS.agentNameMax) return `Use at most ${LIMITS.agentNameMax} characters (${n.length} now).`;
  return undefined;
}

async function loadAgents() {
  const { agents } = await call(api.GET('/api/agents'));
  // the list has no watchdog state; each agent's own record does (one small request per agent)
  const details = await Promise.all(
    agents.map((a) =>
      call(api.GET('/api/agents/{id}', { params: { path: { id: a.id } } }))
        .then((d) => d.agent.watchdog ?? null)
        .catch(() => null),
    ),
  );
  return agents.map((a, i) => ({ ...a, watchdog: details[i] ?? null }));
}

export function AgentsPage() {
  const agents = useData(loadAgents, [], { pollMs: 5000 });
  return (
    <>
      <Provision onCreated={(id) => navigate(`/dashboard/agents/${encodeURIComponent(id)}`)} />
      <Section title="Your agents">
        {agents.loading && !agents.data ? (
          <Spinner label="Loading your agents…" />
        ) : agents.error && !agents.data ? (
          <ErrorText error={agents.error} />
        ) : agents.data && agents.data.length === 0 ? (
          <Empty>You have no agents yet. Give one a name above and press Provision.</Empty>
        ) : (
          <DataTable
            caption="Your agents"
            rows={agents.data ?? []}
            rowKey={(a) => a.id}
            columns={[
              { header: 'Name', cell: (a) => <Link href={`/dashboard/agents/${encodeURIComponent(a.id)}`}>{a.name}</Link> },
              { header: 'Status', cell: (a) => <Badge value={shownStatus(a)} /> },
              { header: 'Watchdog', cell: (a) => (a.watchdog ? <Badge value={a.watchdog.state} /> : <span className="muted">—</span>) },
              { header: 'Model', cell: (a) => a.model },
              { header: 'Created', cell: (a) => formatDate(a.createdAt) },
            ]}
          />
        )}
      </Section>
    </>
  );
}

function Provision({ onCreated }: { onCreated: (id: string) => void }) {
  const [name, setName] = useState('');
  // the ids an agent of yours can run (docs/agents.md "Model"): what you pick is what it runs
  const runnable = useData(async () => call(api.GET('/api/agents/models')), []);
  const [picked, setPicked] = useState<string>();
  const options = runnable.data?.models.length ? runnable.data.models.map((m) => ({ id: m.id, label: `${m.name} (${m.id})` })) : null;
  const model = picked ?? runnable.data?.default ?? MODELS[0];
  const [tier, setTier] = useState<string>('starter');
  // off by default, as the API's gitInit: the Files tab can make a repository later too
  const [gitInit, setGitInit] = useState(false);
  const [nameError, setNameError] = useState<string>();
  const action = useAction();
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const err = validateAgentName(name);
    setNameError(err);
    if (err) return;
    await action.run(async () => {
      const res = await call(
        api.POST('/api/agents/provision', { body: { name: name.trim(), model, tier: tier as 'starter', ...(gitInit ? { gitInit } : {}) } }),
      );
      onCreated(res.agent.id);
    });
  };
  return (
    <Section title="Provision an agent">
      <form className="inline-form" onSubmit={submit} noValidate>
        <Field label="Name" error={nameError} hint={`1 to ${LIMITS.agentNameMax} characters`}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              value={name}
              onChange={(e) => setName(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
              placeholder="my-agent"
            />
          )}
        </Field>
        <Field label="Model" hint={options ? undefined : 'No model provider is configured yet: the agent answers once one is.'}>
          {({ id, describedBy }) => (
            <select id={id} value={model} onChange={(e) => setPicked(e.target.value)} aria-describedby={describedBy}>
              {options
                ? options.map((m) => (
                    <option key={m.id} value={m.id}>
                      {m.label}
                    </option>
                  ))
                : MODELS.map((m) => <option key={m}>{m}</option>)}
            </select>
          )}
        </Field>
        <Field label="Size">
          {({ id }) => (
            <select id={id} value={tier} onChange={(e) => setTier(e.target.value)}>
              {TIERS.map((t) => (
                <option key={t.value} value={t.value}>
                  {t.label}
                </option>
              ))}
            </select>
          )}
        </Field>
        <label className="check provision-git">
          <input type="checkbox" checked={gitInit} onChange={(e) => setGitInit(e.target.checked)} /> Start the workspace as a git repository
        </label>
        <Button type="submit" kind="primary" busy={action.busy}>
          Provision
        </Button>
      </form>
      <ErrorText error={action.error} />
    </Section>
  );
}
