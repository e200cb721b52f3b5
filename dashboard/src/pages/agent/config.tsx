/** The Configuration tab: the agent's stored configuration (§4.7 config). */
import { useState } from 'react';
import { api, call } from '../../api/client.ts';
import { Button, ErrorText, Field, Notice, parseJsonObject, Section, Spinner, useAction, useData } from '../../ui.tsx';

export function AgentConfig({ agentId }: { agentId: string }) {
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
