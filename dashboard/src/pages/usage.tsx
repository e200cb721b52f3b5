/** AI usage and cost over time (GET /api/usage): a bar chart per day and a table per model. */
import { useState } from 'react';
import { api, call } from '../api/client.ts';
import { Empty, ErrorText, Field, formatUsd, Section, Spinner, useData } from '../ui.tsx';

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
            <Field label="Period">
              {({ id }) => (
                <select id={id} value={days} onChange={(e) => setDays(Number(e.target.value))}>
                  <option value={7}>7 days</option>
                  <option value={30}>30 days</option>
                  <option value={90}>90 days</option>
                </select>
              )}
            </Field>
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
            <dl className="stats">
              <div>
                <dt>Cost</dt>
                <dd>{formatUsd(u.totals.cost)}</dd>
              </div>
              <div>
                <dt>Calls</dt>
                <dd>{u.totals.requests.toLocaleString()}</dd>
              </div>
              <div>
                <dt>Tokens</dt>
                <dd>{u.totals.totalTokens.toLocaleString()}</dd>
              </div>
            </dl>
            {u.totals.requests === 0 ? <Empty>No AI calls in this period.</Empty> : <Chart daily={u.daily} metric={metric} />}
          </>
        )}
      </Section>
      {u && u.byModel.length > 0 && (
        <Section title="By model">
          <div className="table-wrap">
            <table>
              <thead>
                <tr>
                  <th scope="col">Model</th>
                  <th scope="col">Calls</th>
                  <th scope="col">Tokens</th>
                  <th scope="col">Cost</th>
                </tr>
              </thead>
              <tbody>
                {u.byModel.map((m) => (
                  <tr key={m.model}>
                    <td>{m.model}</td>
                    <td>{m.requests.toLocaleString()}</td>
                    <td>{m.totalTokens.toLocaleString()}</td>
                    <td>{formatUsd(m.cost)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </Section>
      )}
    </>
  );
}

type Day = { date: string; cost: number; requests: number; totalTokens: number };

function Chart({ daily, metric }: { daily: Day[]; metric: 'cost' | 'requests' | 'totalTokens' }) {
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
