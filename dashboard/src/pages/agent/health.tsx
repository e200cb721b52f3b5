import { api, call } from '../../api/client.ts';
import { Badge, Empty, ErrorText, formatDate, Notice, Section, Spinner, useData } from '../../ui.tsx';

export function Health({ agentId }: { agentId: string }) {
  const stats = useData(async () => call(api.GET('/api/agents/{id}/stats', { params: { path: { id: agentId } } })), [agentId], {
    pollMs: 5000,
  });
  const wd = useData(
    async () => call(api.GET('/api/agents/{id}/watchdog', { params: { path: { id: agentId }, query: { limit: 20 } } })),
    [agentId],
    { pollMs: 10000 },
  );
  const s = stats.data?.stats;
  return (
    <>
      <Section title="Stats">
        {stats.loading && !s ? <Spinner /> : null}
        <ErrorText error={!s ? stats.error : null} />
        {stats.data?.status === 'mock' && <Notice kind="warning">Live figures are unavailable right now; these are placeholders.</Notice>}
        {s && (
          <dl className="stats">
            <div>
              <dt>CPU</dt>
              <dd>{s.cpu.toFixed(1)}%</dd>
            </div>
            <div>
              <dt>Memory</dt>
              <dd>
                {(s.memory / 1048576).toFixed(0)} MB ({s.memoryPercent.toFixed(0)}%)
              </dd>
            </div>
            <div>
              <dt>Uptime</dt>
              <dd>{s.uptimeFormatted}</dd>
            </div>
            <div>
              <dt>Messages</dt>
              <dd>{s.messagesProcessed}</dd>
            </div>
            <div>
              <dt>Average response</dt>
              <dd>{Math.round(s.averageResponseTime)} ms</dd>
            </div>
            <div>
              <dt>Success rate</dt>
              <dd>{(s.successRate * (s.successRate <= 1 ? 100 : 1)).toFixed(0)}%</dd>
            </div>
          </dl>
        )}
      </Section>
      <Section title="Watchdog">
        {wd.loading && !wd.data ? <Spinner /> : null}
        <ErrorText error={!wd.data ? wd.error : null} />
        {wd.data && (
          <>
            <p>
              State: <Badge value={wd.data.state ?? 'not watched'} /> · last healthy {formatDate(wd.data.lastHealthyAt)} · repairs{' '}
              {wd.data.repairAttempts}
            </p>
            {wd.data.lastError && <p className="error">Last problem: {wd.data.lastError}</p>}
            {wd.data.history.length === 0 ? (
              <Empty>No events yet.</Empty>
            ) : (
              <ul className="events">
                {wd.data.history.map((h) => (
                  <li key={h.id}>
                    {formatDate(h.at)} — {h.kind}
                    {h.from || h.to ? `: ${h.from ?? '—'} → ${h.to ?? '—'}` : ''}
                    {h.detail ? ` (${h.detail})` : ''}
                  </li>
                ))}
              </ul>
            )}
          </>
        )}
      </Section>
    </>
  );
}
