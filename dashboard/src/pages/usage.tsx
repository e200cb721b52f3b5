/**
 * AI usage and cost over time (GET /api/usage): a bar chart per day, a table per agent (each agent's model calls
 * through the platform's AI gateway; its own page has a Usage tab with its budget) and a table per model.
 */
import { useState } from 'react';
import { api, call } from '../api/client.ts';
import { type Column, DataTable, Empty, ErrorText, Field, formatUsd, Link, Section, Spinner, useData } from '../ui.tsx';

/** The period of a usage view (the days query parameter), shared with an agent's Usage tab. */
export function PeriodSelect({ days, onChange }: { days: number; onChange: (days: number) => void }) {
  return (
    <Field label="Period">
      {({ id }) => (
        <select id={id} value={days} onChange={(e) => onChange(Number(e.target.value))}>
          <option value={7}>7 days</option>
          <option value={30}>30 days</option>
          <option value={90}>90 days</option>
        </select>
      )}
    </Field>
  );
}

type Priced = { cost: number; requests: number; unpricedRequests: number };

/**
 * What calls cost, or "unpriced" for calls of a model nobody priced (metered at $0: their cost is
 * unknown, not $0.00; docs/payments.md "Model calls from the balance").
 */
export function Cost({ of }: { of: Priced }) {
  if (of.unpricedRequests === 0) return <>{formatUsd(of.cost)}</>;
  const all = of.unpricedRequests >= of.requests;
  const title = all
    ? 'This model has no price: the operator sets one in MODEL_PRICES or on the admin page'
    : `${of.unpricedRequests.toLocaleString()} of ${of.requests.toLocaleString()} calls were of a model without a price`;
  return <span title={title}>{all ? 'unpriced' : `${formatUsd(of.cost)} + unpriced`}</span>;
}

/** The columns every usage breakdown ends with: calls, tokens and what they cost. */
export function usageColumns<T extends Priced & { totalTokens: number }>(): Column<T>[] {
  return [
    { header: 'Calls', numeric: true, cell: (r) => r.requests.toLocaleString() },
    { header: 'Tokens', numeric: true, cell: (r) => r.totalTokens.toLocaleString() },
    { header: 'Cost', numeric: true, cell: (r) => <Cost of={r} /> },
  ];
}

/** Cost, calls and tokens of a period. */
export function Totals({ totals }: { totals: Priced & { totalTokens: number } }) {
  return (
    <dl className="stats">
      <div>
        <dt>Cost</dt>
        <dd>
          <Cost of={totals} />
        </dd>
      </div>
      <div>
        <dt>Calls</dt>
        <dd>{totals.requests.toLocaleString()}</dd>
      </div>
      <div>
        <dt>Tokens</dt>
        <dd>{totals.totalTokens.toLocaleString()}</dd>
      </div>
    </dl>
  );
}

export function UsagePage() {
  const [days, setDays] = useState(30);
  const [metric, setMetric] = useState<'cost' | 'requests' | 'totalTokens'>('cost');
  const usage = useData(() => call(api.GET('/api/usage', { params: { query: { days } } })), [days]);
  const u = usage.data;
  return (
    <>
      <Section
        title="AI usage"
        actions={
          <div className="row">
            <PeriodSelect days={days} onChange={setDays} />
            <Field label="Show">
              {({ id }) => (
                <select id={id} value={metric} onChange={(e) => setMetric(e.target.value as typeof metric)}>
                  <option value="cost">Cost</option>
                  <option value="requests">Calls</option>
                  <option value="totalTokens">Tokens</option>
                </select>
              )}
            </Field>
          </div>
        }
      >
        {usage.loading && !u ? <Spinner /> : null}
        <ErrorText error={!u ? usage.error : null} />
        {u && (
          <>
            <Totals totals={u.totals} />
            {u.totals.requests === 0 ? <Empty>No AI calls in this period.</Empty> : <Chart daily={u.daily} metric={metric} />}
          </>
        )}
      </Section>
      {u && u.byAgent.length > 0 && (
        <Section title="By agent">
          <DataTable
            caption="Usage by agent"
            rowKey={(a) => a.agentId}
            rows={u.byAgent}
            columns={[
              {
                header: 'Agent',
                cell: (a) =>
                  a.name === null ? (
                    <span className="muted">deleted agent ({a.agentId})</span>
                  ) : (
                    <Link href={`/dashboard/agents/${encodeURIComponent(a.agentId)}`}>{a.name}</Link>
                  ),
              },
              ...usageColumns(),
            ]}
          />
        </Section>
      )}
      {u && u.byKey.length > 0 && (
        <Section title="By API key">
          <DataTable
            caption="Usage by API key"
            rowKey={(k) => k.keyId}
            rows={u.byKey}
            columns={[
              {
                header: 'Key',
                cell: (k) => (k.name === null ? <span className="muted">deleted key</span> : <Link href="/dashboard/keys">{k.name}</Link>),
              },
              ...usageColumns(),
            ]}
          />
        </Section>
      )}
      {u && u.byModel.length > 0 && (
        <Section title="By model">
          <DataTable
            caption="Usage by model"
            rowKey={(m) => m.model}
            rows={u.byModel}
            columns={[{ header: 'Model', cell: (m) => m.model }, ...usageColumns()]}
          />
        </Section>
      )}
    </>
  );
}

type Day = { date: string; cost: number; requests: number; totalTokens: number };

export function Chart({ daily, metric }: { daily: Day[]; metric: 'cost' | 'requests' | 'totalTokens' }) {
  const max = Math.max(...daily.map((d) => d[metric]), 0) || 1;
  const w = 100 / daily.length;
  const fmt = (v: number) => (metric === 'cost' ? formatUsd(v) : v.toLocaleString());
  const label = metric === 'cost' ? 'cost' : metric === 'requests' ? 'calls' : 'tokens';
  return (
    <figure className="chart">
      <svg viewBox="0 0 100 40" preserveAspectRatio="none" role="img" aria-label={`Daily ${label}, highest ${fmt(max)}`}>
        {daily.map((d, i) => {
          const h = (d[metric] / max) * 38;
          return (
            <rect key={d.date} x={i * w + w * 0.1} y={40 - h} width={w * 0.8} height={h} className="bar">
              <title>{`${d.date}: ${fmt(d[metric])}`}</title>
            </rect>
          );
        })}
      </svg>
      <figcaption className="muted">
        {daily[0]?.date} to {daily[daily.length - 1]?.date} · highest day {fmt(max)}
      </figcaption>
      <table className="sr-only">
        <caption>Daily {label}</caption>
        <tbody>
          {daily
            .filter((d) => d[metric] > 0)
            .map((d) => (
              <tr key={d.date}>
                <th scope="row">{d.date}</th>
                <td>{fmt(d[metric])}</td>
              </tr>
            ))}
        </tbody>
      </table>
    </figure>
  );
}
