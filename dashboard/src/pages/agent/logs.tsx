/** The Logs tab: the last lines, then live lines over server-sent events (§4.12). */
import { useEffect, useState } from 'react';
import { api, call } from '../../api/client.ts';
import { Empty, ErrorText, Section, Spinner } from '../../ui.tsx';

type LogLine = { id: string; timestamp: string; level: string; message: string };

export function Logs({ agentId }: { agentId: string }) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [state, setState] = useState<'loading' | 'live' | 'ended' | 'error'>('loading');
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let source: EventSource | undefined;
    let closed = false;
    void (async () => {
      try {
        const h = await call(api.GET('/api/logs/{agentId}/history', { params: { path: { agentId }, query: { limit: 100 } } }));
        if (closed) return;
        setLines(h.logs.slice().sort((a, b) => a.timestamp.localeCompare(b.timestamp)));
        source = new EventSource(`/api/logs/${encodeURIComponent(agentId)}/stream`);
        source.addEventListener('open', () => setState('live'));
        source.addEventListener('log', (ev) => {
          const l = JSON.parse((ev as MessageEvent<string>).data) as LogLine;
          setLines((ls) => (ls.some((x) => x.id === l.id) ? ls : [...ls, l].slice(-500)));
        });
        source.addEventListener('end', () => {
          setState('ended');
          source?.close();
        });
        source.addEventListener('error', () => setState((s) => (s === 'ended' ? s : 'error')));
      } catch (err) {
        setError(err);
        setState('error');
      }
    })();
    return () => {
      closed = true;
      source?.close();
    };
  }, [agentId]);
  return (
    <Section
      title="Logs"
      actions={
        <span className="muted">
          {state === 'live' ? '● live' : state === 'ended' ? 'stream ended' : state === 'error' ? 'reconnecting…' : ''}
        </span>
      }
    >
      <ErrorText error={error} />
      {state === 'loading' && <Spinner label="Loading logs…" />}
      {state !== 'loading' && lines.length === 0 && <Empty>No log lines yet.</Empty>}
      {lines.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable by keyboard (axe scrollable-region-focusable)
        <pre className="logs" role="log" tabIndex={0} aria-label="Log lines">
          {lines.map((l) => `${new Date(l.timestamp).toLocaleTimeString()} ${l.level.toUpperCase().padEnd(5)} ${l.message}`).join('\n')}
        </pre>
      )}
    </Section>
  );
}
