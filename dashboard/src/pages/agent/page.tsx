/**
 * One agent: chat (streamed), its messaging channels, live logs, stats and health, its x402 commerce, its configuration (persona, model and heartbeat),
 * and rename / start / stop / restart / delete (§4.7, §4.12, docs/agents.md).
 */
import { type KeyboardEvent, useRef, useState } from 'react';
import { api, call } from '../../api/client.ts';
import { useFeatures } from '../../features.ts';
import { Badge, ErrorText, Spinner, useData } from '../../ui.tsx';
import { Channels } from './channels.tsx';
import { Chat } from './chat.tsx';
import { Commerce } from './commerce.tsx';
import { AgentConfig } from './config.tsx';
import { Connect } from './connect.tsx';
import { Files } from './files.tsx';
import { Health } from './health.tsx';
import { Logs } from './logs.tsx';
import { Manage } from './manage.tsx';
import { shownStatus } from './types.ts';
import { Usage } from './usage.tsx';

const ALL_TABS = ['Chat', 'Connect', 'Channels', 'Logs', 'Files', 'Usage', 'Commerce', 'Health', 'Configuration', 'Manage'] as const;
type Tab = (typeof ALL_TABS)[number];

export function AgentPage({ id }: { id: string }) {
  const agent = useData(async () => (await call(api.GET('/api/agents/{id}', { params: { path: { id } } }))).agent, [id], { pollMs: 5000 });
  const [tab, setTab] = useState<Tab>('Chat');
  const tabRefs = useRef<(HTMLButtonElement | null)[]>([]);
  // Commerce (the x402 gateway) only where the server has one
  const features = useFeatures();
  const TABS = ALL_TABS.filter((t) => t !== 'Commerce' || features?.x402);

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
        <Badge value={shownStatus(a)} />
        {/* the one model the agent runs (docs/agents.md "Model"): the list, this header and the Configuration tab name the same id */}
        <span className="muted">
          model <code className="agent-model">{a.model}</code>
        </span>
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
        {tab === 'Connect' && <Connect agent={a} />}
        {tab === 'Channels' && <Channels agentId={a.id} />}
        {tab === 'Logs' && <Logs agentId={a.id} />}
        {tab === 'Files' && <Files agentId={a.id} />}
        {tab === 'Usage' && <Usage agentId={a.id} />}
        {tab === 'Commerce' && <Commerce agentId={a.id} />}
        {tab === 'Health' && <Health agentId={a.id} />}
        {tab === 'Configuration' && <AgentConfig agentId={a.id} onSaved={agent.reload} />}
        {tab === 'Manage' && <Manage agent={a} onChanged={agent.reload} />}
      </div>
    </>
  );
}
