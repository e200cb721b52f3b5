/**
 * Your profile (§4.1 current user), the accounts you sign in with (§2 "Linked external account")
 * and plan (§2): rename yourself, see your linked sign-ins, start a subscription checkout.
 */
import { type FormEvent, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { api, call } from '../api/client.ts';
import { useFeatures } from '../features.ts';
import { useSession } from '../session.tsx';
import { Button, DataTable, Empty, ErrorText, Field, formatDate, Notice, Section, Spinner, useAction, useData } from '../ui.tsx';

const planLabel = (plan: string) => plan[0]!.toUpperCase() + plan.slice(1);

/**
 * How many agents an account may have, as provisioning counts them (docs/agents.md "Agent
 * limits"): the web app's limit for the plan read as a tier, and the backend's limit for the plan
 * the agents run on, whichever is lower; an admin's agents run on network with the admin limit.
 */
export function agentLimit(plan: string, isAdmin: boolean): number {
  if (isAdmin) return LIMITS.webAgentLimits.enterprise!;
  const tier = ({ solo: 'starter', collective: 'pro', label: 'enterprise', network: 'enterprise' } as Record<string, string>)[plan];
  const web = (tier && LIMITS.webAgentLimits[tier]) || LIMITS.webAgentLimitDefault;
  return Math.min(web, LIMITS.backendAgentLimits[plan] ?? web);
}

const agentsText = (n: number) => `${n} agent${n === 1 ? '' : 's'}`;

export const PLANS = (['solo', 'collective', 'label', 'network'] as const).map((value) => ({
  value,
  label: value[0]!.toUpperCase() + value.slice(1),
  agents: agentsText(agentLimit(value, false)),
}));

const PROVIDER_LABELS: Record<string, string> = { idp: 'Identity provider', codehost: 'Code host' };

/** The identity-provider and code-host accounts that sign in as you (GET /api/auth/linked-accounts). */
function LinkedAccounts() {
  const linked = useData(() => call(api.GET('/api/auth/linked-accounts')));
  return (
    <Section title="Linked accounts">
      {linked.loading && !linked.data ? (
        <Spinner />
      ) : !linked.data ? (
        <ErrorText error={linked.error} />
      ) : linked.data.accounts.length === 0 ? (
        <Empty>No linked accounts. Signing in with the identity provider or the code host links it to this account by email.</Empty>
      ) : (
        <DataTable
          caption="Linked accounts"
          rows={linked.data.accounts}
          rowKey={(a) => a.id}
          columns={[
            { header: 'Provider', cell: (a) => PROVIDER_LABELS[a.provider] ?? a.provider },
            { header: 'Email', cell: (a) => a.email ?? '—' },
            { header: 'Linked', cell: (a) => formatDate(a.linkedAt) },
          ]}
        />
      )}
    </Section>
  );
}

export function SettingsPage() {
  const me = useData(() => call(api.GET('/api/user')));
  const agents = useData(() => call(api.GET('/api/agents')));
  const { user: session, refresh } = useSession();
  const [name, setName] = useState<string | null>(null);
  const [nameError, setNameError] = useState<string>();
  const [saved, setSaved] = useState(false);
  const save = useAction();
  const checkout = useAction();
  const features = useFeatures();
  if (me.loading && !me.data) return <Spinner />;
  if (!me.data) return <ErrorText error={me.error} />;
  const u = me.data;
  // the plan the platform applies: an admin's agents run on network whatever the account's plan
  const isAdmin = session?.isAdmin === true;
  const applied: string = isAdmin ? 'network' : u.plan;
  const limit = agentLimit(u.plan, isAdmin);
  const n = name ?? u.name;
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    const err = n.trim().length > LIMITS.profileNameMax ? `Use at most ${LIMITS.profileNameMax} characters.` : undefined;
    setNameError(err);
    if (err) return;
    const ok = await save.run(async () => {
      await call(api.PATCH('/api/user', { body: { name: n.trim() } }));
      await Promise.all([me.reload(), refresh()]);
    });
    setSaved(ok);
  };
  return (
    <>
      <Section title="Profile">
        <p>
          Signed in as <strong>{u.email}</strong>
          {u.referralCode ? (
            <>
              {' '}
              · referral code <code>{u.referralCode}</code>
            </>
          ) : null}
        </p>
        <form className="inline-form" onSubmit={submit} noValidate>
          <Field label="Name" error={nameError}>
            {({ id, describedBy, invalid }) => (
              <input
                id={id}
                value={n}
                onChange={(e) => setName(e.target.value)}
                aria-describedby={describedBy}
                aria-invalid={invalid}
                autoComplete="name"
              />
            )}
          </Field>
          <Button type="submit" kind="primary" busy={save.busy}>
            Save
          </Button>
        </form>
        <ErrorText error={save.error} />
        {saved && <Notice kind="success">Saved.</Notice>}
      </Section>
      <LinkedAccounts />
      <Section title="Plan">
        <p>
          Your plan: <strong>{planLabel(applied)}</strong>
          {isAdmin && applied !== u.plan ? ` (admins run on Network; your account's own plan is ${planLabel(u.plan)})` : ''}
          {' · '}
          {agents.data ? (
            <span>
              {agents.data.agents.length} of {agentsText(limit)}
            </span>
          ) : (
            <span>{agentsText(limit)}</span>
          )}
        </p>
        <div className="plans">
          {PLANS.map((p) => (
            <div key={p.value} className={`plan${p.value === applied ? ' plan-current' : ''}`}>
              <h3>{p.label}</h3>
              <p className="muted">{p.agents}</p>
              {p.value === applied ? (
                <span className="muted">Current plan</span>
              ) : !features?.cardPayments ? null : (
                <Button
                  busy={checkout.busy}
                  label={`Subscribe to ${p.label}`}
                  onClick={() =>
                    checkout.run(async () => {
                      const res = await call(api.POST('/api/billing/checkout', { body: { plan: p.value } }));
                      window.location.assign(res.url);
                    })
                  }
                >
                  Subscribe
                </Button>
              )}
            </div>
          ))}
        </div>
        {features && !features.cardPayments && (
          <p className="muted">Plans are not sold on this server: an admin changes an account's plan on the Admin page.</p>
        )}
        <ErrorText error={checkout.error} />
      </Section>
    </>
  );
}
