/**
 * One agent: chat (streamed), live logs, stats and health, its configuration, heartbeat settings,
 * and rename / start / stop / restart / delete (§4.7, §4.12, docs/agents.md).
 */
import { type FormEvent, type KeyboardEvent, useEffect, useRef, useState } from 'react';
import { LIMITS } from '../../../src/config/limits.ts';
import { ApiError, api, call, readEvents } from '../api/client.ts';
import type { paths } from '../api/openapi.gen.ts';
import { type ChatLine, modelMessages } from '../chat-history.ts';
import { navigate } from '../router.ts';
import { useSession } from '../session.tsx';
import {
  Badge,
  Button,
  Empty,
  ErrorText,
  Field,
  formatDate,
  Notice,
  parseJsonObject,
  Section,
  Spinner,
  useAction,
  useData,
} from '../ui.tsx';
import { validateAgentName } from './agents.tsx';

type Agent = paths['/api/agents/{id}']['get']['responses'][200]['content']['application/json']['agent'];
const TABS = ['Chat', 'Logs', 'Health', 'Configuration', 'Heartbeat', 'Manage'] as const;
type Tab = (typeof TABS)[number];

export function AgentPage({ id }: { id: string }) {
  const agent = useData(async () => (await call(api.GET('/api/agents/{id}', { params: { path: { id } } }))).agent, [id], { pollMs: 5000 });
  const [tab, setTab] = useState<Tab>('Chat');
  const tabRefs = useRef<(HTMLButtonElement | null)[]>([]);

  if (agent.loading && !agent.data) return <Spinner label="Loading the agent…" />;
  if (!agent.data)
    return (
      <>
        <h1>Agent</h1>
        <ErrorText error={agent.error ?? new Error('Agent not found.')} />
      </>
    );
  const a = agent.data;

  const onKey = (e: KeyboardEvent, i: number) => {
    const next = e.key === 'ArrowRight' ? (i + 1) % TABS.length : e.key === 'ArrowLeft' ? (i + TABS.length - 1) % TABS.length : -1;
    if (next < 0) return;
    e.preventDefault();
    setTab(TABS[next]!);
    tabRefs.current[next]?.focus();
  };

  return (
    <>
      <div className="agent-head">
        <h1 className="agent-name">{a.name}</h1>
        <Badge value={a.status} />
        {a.watchdog && (
          <span className="muted">
            watchdog <Badge value={a.watchdog.state} />
          </span>
        )}
      </div>
      <div role="tablist" aria-label="Agent" className="tabs">
        {TABS.map((t, i) => (
          <button
            key={t}
            ref={(el) => {
              tabRefs.current[i] = el;
            }}
            type="button"
            role="tab"
            id={`tab-${t}`}
            aria-selected={tab === t}
            aria-controls={`panel-${t}`}
            tabIndex={tab === t ? 0 : -1}
            onClick={() => setTab(t)}
            onKeyDown={(e) => onKey(e, i)}
          >
            {t}
          </button>
        ))}
      </div>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: WAI-ARIA tabs pattern: the panel is focusable after its tab */}
      <div role="tabpanel" id={`panel-${tab}`} aria-labelledby={`tab-${tab}`} tabIndex={0}>
        {tab === 'Chat' && <Chat agent={a} />}
        {tab === 'Logs' && <Logs agentId={a.id} />}
        {tab === 'Health' && <Health agentId={a.id} />}
        {tab === 'Configuration' && <AgentConfig agentId={a.id} />}
        {tab === 'Heartbeat' && <Heartbeat agentId={a.id} />}
        {tab === 'Manage' && <Manage agent={a} onChanged={agent.reload} />}
      </div>
    </>
  );
}

type ChatBody = paths['/api/chat']['post']['requestBody']['content']['application/json'];

function Chat({ agent }: { agent: Agent }) {
  const history = useData(
    async () => (await call(api.GET('/api/agents/{id}/messages', { params: { path: { id: agent.id }, query: { limit: 50 } } }))).messages,
    [agent.id],
  );
  const [lines, setLines] = useState<ChatLine[]>([]);
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const end = useRef<HTMLDivElement>(null);
  const abort = useRef<AbortController | null>(null);

  useEffect(() => {
    if (history.data) {
      // newest first from the API (in the order said, question before answer); the chat reads oldest first
      setLines(
        history.data
          .slice()
          .reverse()
          .map((m) => ({ id: m.id, sender: m.sender === 'user' ? 'user' : 'agent', content: m.content })),
      );
    }
  }, [history.data]);
  // biome-ignore lint/correctness/useExhaustiveDependencies: scroll to the end whenever a line arrives
  useEffect(() => {
    // braces: newer browsers return a Promise from scrollIntoView, and an effect may only return a cleanup
    end.current?.scrollIntoView?.({ block: 'end' });
  }, [lines]);
  useEffect(
    () => () => {
      abort.current?.abort();
    },
    [],
  );

  const send = async (e: FormEvent) => {
    e.preventDefault();
    const message = text.trim();
    if (!message || busy) return;
    setText('');
    setError(null);
    setBusy(true);
    const replyId = `r${Date.now()}`;
    const convo = [...lines, { id: `u${Date.now()}`, sender: 'user' as const, content: message }];
    setLines([...convo, { id: replyId, sender: 'agent', content: '' }]);
    const body: ChatBody = {
      agentId: agent.id,
      stream: true,
      messages: modelMessages(convo),
    };
    const setReply = (f: (s: string) => string, failed = false) =>
      setLines((ls) => ls.map((l) => (l.id === replyId ? { ...l, content: f(l.content), failed } : l)));
    abort.current = new AbortController();
    try {
      const res = await fetch('/api/chat', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body: JSON.stringify(body),
        signal: abort.current.signal,
      });
      if (!res.ok) {
        const err = (await res.json().catch(() => ({}))) as { error?: string; code?: string };
        throw new ApiError(
          res.status,
          err.code === 'AGENT_NOT_RUNNING'
            ? 'The agent is not running. Start it from the Manage tab.'
            : (err.error ?? `The agent did not answer (${res.status}).`),
        );
      }
      await readEvents(res, (name, data) => {
        const d = data as { content?: string; error?: string; reply?: string };
        if (name === 'delta' && d.content) setReply((s) => s + d.content);
        else if (name === 'done' && typeof d.reply === 'string') setReply(() => d.reply!);
        else if (name === 'error') throw new Error(d.error ?? 'The agent failed.');
      });
    } catch (err) {
      if ((err as Error).name !== 'AbortError') {
        setError(err);
        setLines((ls) => ls.filter((l) => l.id !== replyId || l.content));
        setReply((s) => s, true);
      }
    } finally {
      setBusy(false);
    }
  };

  return (
    <Section title="Chat">
      {agent.status !== 'running' && <Notice kind="warning">This agent is {agent.status}. It answers once it is running.</Notice>}
      <div className="chat" aria-live="polite" aria-busy={busy}>
        {history.loading && !history.data ? <Spinner label="Loading the conversation…" /> : null}
        {!history.loading && lines.length === 0 ? <Empty>No messages yet. Say hello.</Empty> : null}
        {lines.map((l) => (
          <div key={l.id} className={`bubble bubble-${l.sender}${l.failed ? ' bubble-failed' : ''}`}>
            <span className="sr-only">{l.sender === 'user' ? 'You' : agent.name}: </span>
            {l.content || <span className="typing">…</span>}
          </div>
        ))}
        <div ref={end} />
      </div>
      <ErrorText error={error} />
      <form className="chat-form" onSubmit={send}>
        <label htmlFor="chat-input" className="sr-only">
          Message
        </label>
        <textarea
          id="chat-input"
          value={text}
          rows={2}
          placeholder="Write a message. Enter sends, Shift+Enter adds a line."
          onChange={(e) => setText(e.target.value)}
          onKeyDown={(e) => {
            if (e.key === 'Enter' && !e.shiftKey) {
              e.preventDefault();
              e.currentTarget.form?.requestSubmit();
            }
          }}
        />
        <Button type="submit" kind="primary" busy={busy} disabled={!text.trim()}>
          Send
        </Button>
      </form>
    </Section>
  );
}

type LogLine = { id: string; timestamp: string; level: string; message: string };

function Logs({ agentId }: { agentId: string }) {
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

function Health({ agentId }: { agentId: string }) {
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

function AgentConfig({ agentId }: { agentId: string }) {
  const cfg = useData(
    async () => (await call(api.GET('/api/agents/{id}/config', { params: { path: { id: agentId } } }))).config,
    [agentId],
  );
  const [text, setText] = useState<string | null>(null);
  const [parseError, setParseError] = useState<string>();
  const [saved, setSaved] = useState(false);
  const action = useAction();
  const value = text ?? (cfg.data ? JSON.stringify(cfg.data, null, 2) : '');
  const save = async () => {
    setSaved(false);
    const result = parseJsonObject(value);
    if ('error' in result) {
      setParseError(result.error);
      return;
    }
    const parsed = result.value;
    setParseError(undefined);
    const ok = await action.run(async () => {
      const res = await call(api.PUT('/api/agents/{id}/config', { params: { path: { id: agentId } }, body: parsed }));
      setText(JSON.stringify(res.config, null, 2));
    });
    setSaved(ok);
  };
  return (
    <Section title="Agent configuration">
      <p className="muted">Secrets such as bot tokens are shown masked; leave them as they are to keep them.</p>
      {cfg.loading && !cfg.data ? (
        <Spinner />
      ) : (
        <Field label="Configuration (JSON)" error={parseError}>
          {({ id, describedBy, invalid }) => (
            <textarea
              id={id}
              className="code"
              rows={14}
              value={value}
              onChange={(e) => setText(e.target.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
              spellCheck={false}
            />
          )}
        </Field>
      )}
      <ErrorText error={action.error ?? (!cfg.data ? cfg.error : null)} />
      {saved && <Notice kind="success">Saved. The agent uses it from its next start.</Notice>}
      <Button kind="primary" busy={action.busy} onClick={save} disabled={!cfg.data}>
        Save configuration
      </Button>
    </Section>
  );
}

export function validateFrequency(f: string): string | undefined {
  const m = /^(\d{1,6})([mhd])$/.exec(f.trim());
  if (!m) return 'Use a number and a unit: m (minutes), h (hours) or d (days), e.g. 30m or 3h.';
  const ms = Number(m[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as 'm' | 'h' | 'd'];
  if (ms <= 0) return 'The frequency must be more than zero.';
  if (ms > LIMITS.heartbeatMaxFrequencyMs) return 'At most 30 days.';
  return undefined;
}

function Heartbeat({ agentId }: { agentId: string }) {
  const hb = useData(async () => (await call(api.GET('/api/heartbeat', { params: { query: { agentId } } }))).heartbeat, [agentId]);
  const [frequency, setFrequency] = useState<string | null>(null);
  const [enabled, setEnabled] = useState<boolean | null>(null);
  const [freqError, setFreqError] = useState<string>();
  const [saved, setSaved] = useState(false);
  const action = useAction();
  if (hb.loading && !hb.data) return <Spinner />;
  if (!hb.data) return <ErrorText error={hb.error} />;
  const f = frequency ?? hb.data.frequency;
  const on = enabled ?? hb.data.enabled;
  const save = async (e: FormEvent) => {
    e.preventDefault();
    setSaved(false);
    const err = validateFrequency(f);
    setFreqError(err);
    if (err) return;
    const ok = await action.run(async () => {
      await call(api.POST('/api/heartbeat', { body: { agentId, frequency: f.trim(), enabled: on } }));
      await hb.reload();
    });
    setSaved(ok);
  };
  return (
    <Section title="Heartbeat">
      <p className="muted">
        The platform wakes the agent on this schedule. Last: {formatDate(hb.data.lastHeartbeat)} · next: {formatDate(hb.data.nextHeartbeat)}
      </p>
      <form className="inline-form" onSubmit={save} noValidate>
        <Field label="Every" error={freqError} hint="e.g. 30m, 3h, 1d">
          {({ id, describedBy, invalid }) => (
            <input id={id} value={f} onChange={(e) => setFrequency(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid} />
          )}
        </Field>
        <label className="check">
          <input type="checkbox" checked={on} onChange={(e) => setEnabled(e.target.checked)} /> Enabled
        </label>
        <Button type="submit" kind="primary" busy={action.busy}>
          Save heartbeat
        </Button>
      </form>
      <ErrorText error={action.error} />
      {saved && <Notice kind="success">Heartbeat saved.</Notice>}
    </Section>
  );
}

function Manage({ agent, onChanged }: { agent: Agent; onChanged: () => Promise<void> }) {
  const { user } = useSession();
  const [name, setName] = useState(agent.name);
  const [nameError, setNameError] = useState<string>();
  const [done, setDone] = useState<string>();
  const rename = useAction();
  const lifecycle = useAction();
  const remove = useAction();
  const [confirming, setConfirming] = useState(false);

  const doRename = async (e: FormEvent) => {
    e.preventDefault();
    setDone(undefined);
    const err = validateAgentName(name);
    setNameError(err);
    if (err) return;
    if (await rename.run(() => call(api.PATCH('/api/agents/{id}', { params: { path: { id: agent.id } }, body: { name: name.trim() } })))) {
      setDone('Renamed.');
      await onChanged();
    }
  };
  const act = async (action: 'start' | 'stop' | 'restart') => {
    setDone(undefined);
    const path = `/api/instance/{userId}/${action}` as '/api/instance/{userId}/start';
    if (await lifecycle.run(() => call(api.POST(path, { params: { path: { userId: user!.id } }, body: { agentId: agent.id } })))) {
      setDone(`${action[0]!.toUpperCase()}${action.slice(1)} requested.`);
      await onChanged();
    }
  };
  return (
    <>
      <Section title="Rename">
        <form className="inline-form" onSubmit={doRename} noValidate>
          <Field label="Name" error={nameError} hint={`1 to ${LIMITS.agentNameMax} characters`}>
            {({ id, describedBy, invalid }) => (
              <input id={id} value={name} onChange={(e) => setName(e.target.value)} aria-describedby={describedBy} aria-invalid={invalid} />
            )}
          </Field>
          <Button type="submit" kind="primary" busy={rename.busy}>
            Rename
          </Button>
        </form>
        <ErrorText error={rename.error} />
      </Section>
      <Section title="Run">
        <div className="row">
          <Button onClick={() => act('start')} busy={lifecycle.busy}>
            Start
          </Button>
          <Button onClick={() => act('stop')} busy={lifecycle.busy}>
            Stop
          </Button>
          <Button onClick={() => act('restart')} busy={lifecycle.busy}>
            Restart
          </Button>
        </div>
        <ErrorText error={lifecycle.error} />
      </Section>
      {done && <Notice kind="success">{done}</Notice>}
      <Section title="Delete">
        <p>Deleting stops the agent and removes it with its configuration and messages. This cannot be undone.</p>
        {confirming ? (
          <div className="row">
            <Button
              kind="danger"
              busy={remove.busy}
              onClick={async () => {
                if (await remove.run(() => call(api.DELETE('/api/agents/{id}', { params: { path: { id: agent.id } } }))))
                  navigate('/dashboard');
              }}
            >
              Yes, delete {agent.name}
            </Button>
            <Button onClick={() => setConfirming(false)}>Cancel</Button>
          </div>
        ) : (
          <Button kind="danger" onClick={() => setConfirming(true)}>
            Delete agent
          </Button>
        )}
        <ErrorText error={remove.error} />
      </Section>
    </>
  );
}
