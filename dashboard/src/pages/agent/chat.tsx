/**
 * The Chat tab: the owner's `dashboard` session with the agent through /api/chat (§4.10): the page sends
 * one message, the platform adds the session's history (docs/channels.md "Sessions"), and the
 * transcript is that session only, never calls made through the API or on channels. Replies render as
 * markdown (markdown.ts: no raw HTML, safe links); questions stay plain text. The transcript takes
 * the height the window leaves it and stays on the newest message unless the reader scrolled up.
 */
import { type FormEvent, lazy, type RefObject, Suspense, useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { ApiError, api, call, readEvents } from '../../api/client.ts';
import type { paths } from '../../api/openapi.gen.ts';
import { Button, CopyButton, Empty, ErrorText, Notice, Section, Spinner, useData } from '../../ui.tsx';
import type { Agent } from './types.ts';

type ChatBody = paths['/api/chat']['post']['requestBody']['content']['application/json'];
/** One message on screen; `at` is when it was said (ISO 8601: the stored timestamp, or now for a new one). */
type ChatLine = { id: string; sender: 'user' | 'agent'; content: string; at?: string; failed?: boolean };

/** Time of day for today's messages, date and time for older ones. */
function when(iso: string) {
  const d = new Date(iso);
  const today = d.toDateString() === new Date().toDateString();
  return today
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleString([], { dateStyle: 'medium', timeStyle: 'short' });
}

// the markdown parser is a third of the bundle: loaded with the first chat, not with every page
const MarkdownText = lazy(() => import('../../markdown.ts').then((m) => ({ default: m.MarkdownText })));

const copyCode = (code: string) => <CopyButton text={code} label="Copy" />;

/** Below this many pixels from the bottom the transcript counts as "at the newest message". */
const PINNED_PX = 48;

/**
 * Gives the transcript the height the window leaves below its top edge, minus what follows it
 * (`reserve`: the message form), never less than 16rem; again on every render (a notice above it
 * comes and goes) and resize.
 */
function useFillHeight(el: RefObject<HTMLDivElement | null>, reserve: RefObject<HTMLElement | null>) {
  useLayoutEffect(() => {
    const fitHeight = () => {
      const box = el.current;
      if (!box) return;
      const top = box.getBoundingClientRect().top + window.scrollY;
      const below = (reserve.current?.offsetHeight ?? 0) + 48; // the form, the card's padding and a margin
      box.style.height = `${Math.max(256, window.innerHeight - top - below)}px`;
    };
    fitHeight();
    window.addEventListener('resize', fitHeight);
    return () => window.removeEventListener('resize', fitHeight);
  });
}

export function Chat({ agent }: { agent: Agent }) {
  const history = useData(
    async () =>
      (await call(api.GET('/api/agents/{id}/messages', { params: { path: { id: agent.id }, query: { limit: 50, session: 'dashboard' } } })))
        .messages,
    [agent.id],
  );
  const [lines, setLines] = useState<ChatLine[]>([]);
  const [text, setText] = useState('');
  const [busy, setBusy] = useState(false);
  const [fresh, setFresh] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const box = useRef<HTMLDivElement>(null);
  const form = useRef<HTMLFormElement>(null);
  const pinned = useRef(true);
  const [scrolledUp, setScrolledUp] = useState(false);
  const abort = useRef<AbortController | null>(null);

  useEffect(() => {
    if (history.data) {
      // newest first from the API (in the order said, question before answer); the chat reads oldest first
      const stored: ChatLine[] = history.data
        .slice()
        .reverse()
        .map((m) => ({ id: m.id, sender: m.sender === 'user' ? 'user' : 'agent', content: m.content, at: m.timestamp }));
      const ids = new Set(stored.map((l) => l.id));
      // a message sent before the history arrived (a slow connection) stays, after the history
      setLines((current) => [...stored, ...current.filter((l) => !ids.has(l.id))]);
    }
  }, [history.data]);
  useFillHeight(box, form);
  const toNewest = useCallback(() => {
    const b = box.current;
    if (b) b.scrollTop = b.scrollHeight;
    pinned.current = true;
    setScrolledUp(false);
  }, []);
  // biome-ignore lint/correctness/useExhaustiveDependencies: follow every new line or streamed piece, unless the reader scrolled up
  useLayoutEffect(() => {
    if (pinned.current) toNewest();
  }, [lines, toNewest]);
  // a message can also grow after its line changed (the markdown renderer arriving, a code block laid out)
  useEffect(() => {
    const inner = box.current?.firstElementChild;
    if (!inner || typeof ResizeObserver === 'undefined') return;
    const watch = new ResizeObserver(() => {
      if (pinned.current) toNewest();
    });
    watch.observe(inner);
    return () => watch.disconnect();
  }, [toNewest]);
  const onScroll = () => {
    const b = box.current;
    if (!b) return;
    pinned.current = b.scrollHeight - b.scrollTop - b.clientHeight < PINNED_PX;
    setScrolledUp(!pinned.current);
  };
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
    setFresh(false);
    setBusy(true);
    const replyId = `r${Date.now()}`;
    const now = new Date().toISOString();
    const convo = [...lines, { id: `u${Date.now()}`, sender: 'user' as const, content: message, at: now }];
    pinned.current = true; // sending brings the newest message back into view
    setLines([...convo, { id: replyId, sender: 'agent', content: '', at: now }]);
    // one message: the platform sends the dashboard session's history with it
    const body: ChatBody = { agentId: agent.id, stream: true, message };
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

  // a reset: the platform stops sending the earlier turns (they stay on screen and in the history)
  const newConversation = async () => {
    setError(null);
    try {
      await call(api.POST('/api/chat/reset', { body: { agentId: agent.id } }));
      setFresh(true);
    } catch (err) {
      setError(err);
    }
  };

  return (
    <Section
      title="Chat"
      actions={
        <Button onClick={newConversation} disabled={busy} label="Start a new conversation">
          New conversation
        </Button>
      }
    >
      {fresh && (
        <Notice kind="info">New conversation: the agent no longer gets the messages above (/new in a message does the same).</Notice>
      )}
      {agent.status === 'suspended' ? (
        <Notice kind="info">
          This agent is asleep (no traffic for a while). Your message wakes it; the first answer takes a moment longer.
        </Notice>
      ) : (
        agent.status !== 'running' && <Notice kind="warning">This agent is {agent.status}. It answers once it is running.</Notice>
      )}
      <div className="chat-wrap">
        <div className="chat" ref={box} onScroll={onScroll} aria-live="polite" aria-busy={busy} aria-label="Conversation" role="log">
          <div className="chat-lines">
            {history.loading && !history.data ? <Spinner label="Loading the conversation…" /> : null}
            {!history.loading && lines.length === 0 ? <Empty>No messages yet. Say hello.</Empty> : null}
            {lines.map((l) => (
              <div key={l.id} className={`msg msg-${l.sender}`}>
                <div className={`bubble bubble-${l.sender}${l.failed ? ' bubble-failed' : ''}`}>
                  <span className="sr-only">{l.sender === 'user' ? 'You' : agent.name}: </span>
                  {!l.content ? (
                    <span className="typing">…</span>
                  ) : l.sender === 'agent' ? (
                    <Suspense fallback={l.content}>
                      <MarkdownText text={l.content} codeAction={copyCode} />
                    </Suspense>
                  ) : (
                    l.content
                  )}
                </div>
                {l.at && (
                  <time className="msg-time" dateTime={l.at}>
                    {when(l.at)}
                  </time>
                )}
              </div>
            ))}
          </div>
        </div>
        {scrolledUp && (
          <button type="button" className="btn btn-secondary chat-newest" onClick={toNewest}>
            Newest messages ↓
          </button>
        )}
      </div>
      <ErrorText error={error} />
      <form className="chat-form" onSubmit={send} ref={form}>
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
