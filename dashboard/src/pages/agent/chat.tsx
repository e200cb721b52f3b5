/** The Chat tab: a streamed conversation with the agent through /api/chat (§4.10). */
import { type FormEvent, useEffect, useRef, useState } from 'react';
import { ApiError, api, call, readEvents } from '../../api/client.ts';
import type { paths } from '../../api/openapi.gen.ts';
import { type ChatLine, modelMessages } from '../../chat-history.ts';
import { Button, Empty, ErrorText, Notice, Section, Spinner, useData } from '../../ui.tsx';
import type { Agent } from './types.ts';

type ChatBody = paths['/api/chat']['post']['requestBody']['content']['application/json'];

export function Chat({ agent }: { agent: Agent }) {
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
