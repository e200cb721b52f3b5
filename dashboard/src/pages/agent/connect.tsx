/**
 * The Connect tab: what a program needs to talk to this agent (docs/agents.md "Connect with the
 * openai SDK"): its id, the base URL for the official `openai` client, a snippet with a key, and
 * the WebSocket URL. The proxy takes one of the user's `sk_` keys; a key's secret is shown only
 * when it is created, so picking an existing key fills in its prefix, and "Create a key" makes a
 * new one, limited to this agent, whose secret goes into the snippet once (it lives in this
 * component's state only).
 */
import { useId, useState } from 'react';
import { LIMITS } from '../../../../src/config/limits.ts';
import { api, call } from '../../api/client.ts';
import { Button, CopyButton, ErrorText, Field, Notice, Section, useAction, useData } from '../../ui.tsx';

type ConnectAgent = { id: string; name: string; model: string };
/** Which key the snippets show: a placeholder, an existing key's prefix, or the key just created (its secret). */
type KeyChoice = { kind: 'placeholder' } | { kind: 'existing'; id: string } | { kind: 'created' };

const PLACEHOLDER = 'sk_YOUR_API_KEY';

/** A value with its own Copy button, in a region named by its label (so a Copy button can be found by what it copies). */
function CopyValue({ label, value, hint }: { label: string; value: string; hint?: string }) {
  const id = useId();
  return (
    <section className="connect-value" aria-labelledby={id}>
      <h3 id={id}>{label}</h3>
      <div className="row">
        <code className="connect-code">{value}</code>
        <CopyButton text={value} />
      </div>
      {hint && <p className="hint">{hint}</p>}
    </section>
  );
}

function Snippet({ label, code }: { label: string; code: string }) {
  const id = useId();
  return (
    <section className="connect-value" aria-labelledby={id}>
      <div className="row connect-snippet-head">
        <h3 id={id}>{label}</h3>
        <CopyButton text={code} />
      </div>
      <pre className="connect-snippet">
        <code>{code}</code>
      </pre>
    </section>
  );
}

const jsSnippet = (baseUrl: string, key: string) => `import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: '${baseUrl}',
  apiKey: '${key}',
});

const completion = await client.chat.completions.create({
  model: 'default', // the agent's own model
  messages: [{ role: 'user', content: 'Hello!' }],
});
console.log(completion.choices[0].message.content);`;

const curlSnippet = (baseUrl: string, key: string) => `curl ${baseUrl}/chat/completions \\
  -H "Authorization: Bearer ${key}" \\
  -H "Content-Type: application/json" \\
  -d '{"model":"default","messages":[{"role":"user","content":"Hello!"}]}'`;

export function Connect({ agent }: { agent: ConnectAgent }) {
  const keys = useData(async () => (await call(api.GET('/api/keys'))).keys);
  const [choice, setChoice] = useState<KeyChoice>({ kind: 'placeholder' });
  // the secret of a key created here lives only in this state until the page changes: never stored
  const [created, setCreated] = useState<{ name: string; secret: string } | null>(null);
  const create = useAction();
  const pickerHint = useId();

  const origin = window.location.origin;
  const baseUrl = `${origin}/api/agents/${agent.id}/v1`;
  const wsUrl = `${origin.replace(/^http/, 'ws')}/api/agents/${agent.id}/ws`;

  const picked = choice.kind === 'existing' ? keys.data?.find((k) => k.id === choice.id) : undefined;
  const key = choice.kind === 'created' && created ? created.secret : picked ? `${picked.keyPreview}…` : PLACEHOLDER;

  const createKey = () =>
    create.run(async () => {
      const name = `Connect ${agent.name}`.slice(0, LIMITS.apiKeyNameMax);
      // a key made here reaches this agent only (docs/payments.md "API keys"); the Keys page changes that
      const res = await call(api.POST('/api/keys', { body: { name, agentIds: [agent.id] } }));
      setCreated({ name: res.name, secret: res.key });
      setChoice({ kind: 'created' });
      await keys.reload();
    });

  return (
    <>
      <Section title="Connect">
        <p className="muted">
          The agent speaks the OpenAI chat completions API through the platform. Any OpenAI client works: point it at the base URL with one
          of your API keys. The model <code>default</code> always means the agent's own model.
        </p>
        <CopyValue label="Agent ID" value={agent.id} />
        <CopyValue label="Base URL" value={baseUrl} hint="The baseURL of the openai client; GET …/models lists the agent's model." />
        <CopyValue
          label="WebSocket URL"
          value={wsUrl}
          hint={
            'Send {"type":"chat","content":"…"} and receive {"type":"reply","content":"…"}. From a program, send your key in an ' +
            '"Authorization: Bearer sk_…" header; in a browser on this site your session is enough.'
          }
        />
      </Section>

      <Section title="Code">
        <div className="row connect-key">
          <Field label="API key">
            {({ id }) => (
              <select
                id={id}
                aria-describedby={pickerHint}
                value={choice.kind === 'existing' ? choice.id : choice.kind}
                onChange={(e) => {
                  const v = e.target.value;
                  if (v === 'placeholder') setChoice({ kind: 'placeholder' });
                  else if (v === 'created') setChoice({ kind: 'created' });
                  else setChoice({ kind: 'existing', id: v });
                }}
              >
                <option value="placeholder">Placeholder ({PLACEHOLDER})</option>
                {created && <option value="created">New key “{created.name}” (whole key)</option>}
                {(keys.data ?? []).map((k) => (
                  <option key={k.id} value={k.id}>
                    {k.name} ({k.keyPreview}…)
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Button onClick={createKey} busy={create.busy}>
            Create a key
          </Button>
        </div>
        <p id={pickerHint} className="hint">
          A key's secret is shown only once, when it is created: an existing key fills in its prefix, a new key its whole secret. A key
          created here reaches this agent only; give it a budget, a rate limit or an expiry on the Keys page.
        </p>
        <ErrorText error={keys.error ?? create.error} />
        {choice.kind === 'created' && created && (
          <Notice kind="warning">
            The new key “{created.name}” is in the snippets below. Copy it now: it is shown only this once and is gone when you leave this
            page.
          </Notice>
        )}
        {picked && (
          <Notice>
            Only the beginning of “{picked.name}” is known here: replace <code>{picked.keyPreview}…</code> with the whole key you saved when
            you created it, or create a new key.
          </Notice>
        )}
        <Snippet label="JavaScript (openai)" code={jsSnippet(baseUrl, key)} />
        <Snippet label="curl" code={curlSnippet(baseUrl, key)} />
      </Section>
    </>
  );
}
